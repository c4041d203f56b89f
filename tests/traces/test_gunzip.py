"""The gzip reader (ISA-L where installed, the standard library's otherwise) gives the same bytes, and a
truncated or corrupt stream is a TraceError with either."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from perfmodel.traces import gunzip, parse_trace
from perfmodel.traces.records import TraceError

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / \
    "kineto_resnet50_num_workers_0__worker0.1623143566756.pt.trace.json.gz"


def _readers(monkeypatch: pytest.MonkeyPatch, which: str) -> None:
    if which == "stdlib":
        monkeypatch.setattr(gunzip, "_IGZIP", None)
    else:  # isal is a declared dependency: a missing one is a broken install, not a reason to skip
        assert gunzip._IGZIP is not None, "isal (a dependency in pyproject.toml) is not installed"


@pytest.mark.parametrize("which", ["isal", "stdlib"])
def test_same_bytes(monkeypatch: pytest.MonkeyPatch, which: str) -> None:
    _readers(monkeypatch, which)
    raw = TRACE.read_bytes()
    with gunzip.open_gzip(io.BytesIO(raw)) as unzipped:
        assert unzipped.read() == gzip.decompress(raw)


@pytest.mark.parametrize("which", ["isal", "stdlib"])
def test_truncated_and_corrupt(monkeypatch: pytest.MonkeyPatch, which: str) -> None:
    _readers(monkeypatch, which)
    raw = TRACE.read_bytes()
    with pytest.raises(TraceError, match="gzip"):
        parse_trace(raw[: len(raw) // 2], "cut.json.gz")
    bad = bytearray(raw)
    bad[len(raw) // 2: len(raw) // 2 + 64] = b"x" * 64
    with pytest.raises(TraceError, match="gzip"):
        parse_trace(bytes(bad), "bad.json.gz")
