"""The roofline explorer showing a stored trace takes the trace's device when the URL names none, and says which
device a trace belongs to when another is chosen (qa14: ``/roofline?workload=trace&trace=1`` drew the H100 and
said "no stored runs for trace 1" for an A100 trace of 64 runs)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from fastapi.testclient import TestClient

from perfmodel.store import RunIn, TraceKernelIn
from tests.web.conftest import A100, H100, make_app


def test_a_trace_without_a_device_shows_on_its_own_device(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    with TestClient(app) as client:
        op = {"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp16"}
        upload_id, _ = app.state.perfmodel.store.ingest_trace(
            A100, "a100.json", "kineto", 10, hashlib.sha256(b"a100 trace").hexdigest(),
            [RunIn(hardware_id=A100, op=op, measured_time_s=1e-4, source="trace")],
            [TraceKernelIn(name="ampere_gemm", category="kernel", duration_s=1e-4, op_kind="matmul", run_index=0)])
        own = client.get(f"/roofline?workload=trace&trace={upload_id}")
        assert own.status_code == 200
        assert f'<option value="{A100}" selected' in own.text
        assert "no stored runs" not in own.text
        other = client.get(f"/roofline?workload=trace&trace={upload_id}&hardware={H100}")
        assert other.status_code == 200
        assert f"no stored runs for trace {upload_id} on {H100}: it was uploaded for {A100}" in other.text


def test_a_failed_upload_is_not_offered_and_says_why_it_has_no_runs(tmp_path: Path) -> None:
    """qa15: the explorer's trace picker listed failed uploads (an omniperf sysinfo.csv) and choosing one said only
    "no stored runs for trace 2"; /trace-diff already left them out."""
    app = make_app(tmp_path)
    with TestClient(app) as client:
        failed_id = app.state.perfmodel.store.add_trace_upload(
            A100, "sysinfo.csv", "unknown", 10, hashlib.sha256(b"sysinfo").hexdigest(), status="failed",
            error="an omniperf sysinfo.csv: the device's description, no kernel times")
        page = client.get(f"/roofline?workload=trace&trace={failed_id}")
        assert page.status_code == 200
        assert "sysinfo.csv (" not in page.text  # not among the picker's options
        assert (f"no stored runs for trace {failed_id}: the upload failed to parse (an omniperf sysinfo.csv: "
                "the device&#39;s description, no kernel times)") in page.text


def test_the_home_page_counts_parsed_traces_and_failed_ones_apart(tmp_path: Path) -> None:
    """qa15: "Uploaded traces 22" for 17 parsed uploads and 5 failed attempts."""
    app = make_app(tmp_path)
    store = app.state.perfmodel.store
    with TestClient(app) as client:
        op = {"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp16"}
        store.ingest_trace(A100, "a100.json", "kineto", 10, hashlib.sha256(b"ok").hexdigest(),
                           [RunIn(hardware_id=A100, op=op, measured_time_s=1e-4, source="trace")],
                           [TraceKernelIn(name="gemm", category="kernel", duration_s=1e-4, op_kind="matmul",
                                          run_index=0)])
        for i in range(2):
            store.add_trace_upload(A100, "bad.csv", "unknown", 10, hashlib.sha256(b"bad").hexdigest(),
                                   status="failed", error=f"attempt {i}")
        page = client.get("/").text
    assert "<dt>Uploaded traces</dt><dd>1 <small>(+2 failed)</small></dd>" in page
