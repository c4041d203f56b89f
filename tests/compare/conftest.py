"""Real traces for the compare tests, parsed once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfmodel.traces import ParsedTrace, parse_trace

ROOT = Path(__file__).resolve().parents[2]
REPO = ROOT / "tests" / "data" / "traces"
SHARED = ROOT.parent / "shared" / "data" / "traces" / "pytorch_kineto"  # shared/ beside the clone, as CI lays it
RESNET_0 = "kineto_resnet50_num_workers_0__worker0.1623143566756.pt.trace.json.gz"
RESNET_4 = "kineto_resnet50_num_workers_4__worker0.1623212756351.pt.trace.json.gz"
HTA_0 = "timeline_analysis__sampled_rank-0.json.gz"
HTA_1 = "trace_filter__sampled_rank-1.json.gz"


def trace_path(name: str) -> Path:
    for folder in (REPO, SHARED):
        if (folder / name).is_file():
            return folder / name
    pytest.skip(f"{name} is not in tests/data/traces or {SHARED}")


_CACHE: dict[str, ParsedTrace] = {}


@pytest.fixture(scope="session")
def parsed() -> object:
    def get(name: str) -> ParsedTrace:
        if name not in _CACHE:
            _CACHE[name] = parse_trace(trace_path(name), name)
        return _CACHE[name]

    return get
