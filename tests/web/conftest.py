"""Fixtures for the dashboard tests: demo data with markup in every user-supplied string, a TestClient app,
and (browser tests) the real app under uvicorn with one Debian Chromium per session."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from perfmodel.specs import library, parse_spec
from perfmodel.store import RunIn, Store, TraceKernelIn

TOKEN = "web-test-token"
XSS = "<img src=x onerror=alert(1)>"
XSS_DEVICE = "xss-device"
H100 = "nvidia-h100-sxm5-80gb"
A100 = "nvidia-a100-sxm4-80gb"
TRACE_DIRS = (Path(__file__).resolve().parents[1] / "data" / "traces",
              Path(__file__).resolve().parents[2].parent / "shared" / "data" / "traces" / "pytorch_kineto")


def real_traces() -> list[Path]:
    """Kineto traces: the project's copies, else the shared originals."""
    for directory in TRACE_DIRS:
        found = sorted(p for p in directory.glob("*.json*") if p.is_file()) if directory.is_dir() else []
        if found:
            return found
    return []


def _ops() -> list[tuple[str, dict[str, Any]]]:
    ops: list[tuple[str, dict[str, Any]]] = []
    for m in (16, 128, 1024, 4096):
        ops.append((f"gemm_{m}", {"kind": "matmul", "m": m, "n": 4096, "k": 4096, "dtype": "bf16"}))
    for rows in (64, 1024, 16384):
        ops.append((f"rmsnorm_{rows}", {"kind": "rmsnorm", "shape": [rows, 4096], "dtype": "bf16"}))
        ops.append((f"softmax_{rows}", {"kind": "softmax", "shape": [rows, 2048], "dtype": "fp16"}))
    return ops


def seed(store: Store) -> int:
    """Runs on two devices (one named with markup), a custom device with a markup name and vendor, and a trace
    whose file and kernel carry markup. Returns the trace upload id."""
    from perfmodel.roofline import predict_many

    runs: list[RunIn] = []
    for hardware_id, factor in ((H100, 1.15), (A100, 0.9)):
        ops = _ops()
        predicted = predict_many(hardware_id, [op for _, op in ops]).time_s
        for i, ((name, op), t) in enumerate(zip(ops, predicted, strict=True)):
            runs.append(RunIn(hardware_id=hardware_id, op=op, measured_time_s=float(t) * factor * (1 + 0.03 * i),
                              source="web-test", tags={"name": name}, dtype=op["dtype"]))
    runs.append(RunIn(hardware_id=H100, op=_ops()[1][1], measured_time_s=5e-5, source=XSS, tags={"name": XSS}))
    store.add_runs(runs)
    spec = copy.deepcopy(library()[H100].model_dump(mode="json"))
    spec.update(id=XSS_DEVICE, name=XSS, vendor=XSS)
    hw = parse_spec(spec, "xss fixture")
    store.add_hardware(hw.id, hw.model_dump(mode="json"), None, hw.content_hash)
    op = _ops()[0][1]
    upload_id, _ = store.ingest_trace(
        H100, f"{XSS}.json", "kineto", 10, hashlib.sha256(b"xss").hexdigest(),
        [RunIn(hardware_id=H100, op=op, measured_time_s=1e-4, source="trace", tags={"kernel": XSS})],
        [TraceKernelIn(name=XSS, category="kernel", duration_s=1e-4, op_kind="matmul", run_index=0),
         TraceKernelIn(name="unmatched_kernel", category="kernel", duration_s=2e-5)])
    return upload_id


def make_app(tmp: Path, **settings: Any) -> FastAPI:
    return create_app(Settings(database_url=f"sqlite:///{tmp / 'perfmodel.sqlite3'}", data_dir=tmp,
                               api_token=TOKEN, **settings))


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    app = make_app(tmp_path_factory.mktemp("web"))
    with TestClient(app) as test_client:
        seed(app.state.perfmodel.store)
        yield test_client
