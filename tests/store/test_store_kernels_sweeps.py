"""A parsed trace is stored atomically with its runs and kernels; sweeps round-trip."""

from __future__ import annotations

import pytest

from perfmodel.store import RunIn, Store, StoreError, TraceKernelIn

MM = {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp16"}


def _ingest(store: Store, sha: str = "a" * 64, kernels: list[TraceKernelIn] | None = None) -> tuple[int, list[int]]:
    runs = [RunIn("h100", MM, 2e-5, "trace:x.json", {"op_name": "aten::mm"}, dtype="fp16")]
    kernels = kernels if kernels is not None else [
        TraceKernelIn("sm80_xmma_gemm <img src=x>", "kernel", 1.5e-5, 3, "aten::mm", "matmul", 0, {"dram_bytes": 1e6}),
        TraceKernelIn("splitKreduce", "kernel", 0.5e-5, 1, "aten::mm", "matmul", 0),
        TraceKernelIn("mystery_kernel", "kernel", 3e-6)]
    return store.ingest_trace("h100", "x.json", "kineto", 1234, sha, runs, kernels)


def test_ingest_links_upload_runs_and_kernels(store: Store) -> None:
    upload_id, (run_id,) = _ingest(store)
    upload = store.get_trace_upload(upload_id)
    assert upload is not None and upload.status == "parsed" and upload.kernel_count == 3
    run = store.get_run(run_id)
    assert run is not None and run.trace_upload_id == upload_id and run.tags == {"op_name": "aten::mm"}
    kernels = store.list_trace_kernels(upload_id)
    assert [k.duration_s for k in kernels] == sorted((k.duration_s for k in kernels), reverse=True)
    assert kernels[0].name == "sm80_xmma_gemm <img src=x>" and kernels[0].counters == {"dram_bytes": 1e6}
    assert kernels[0].instances == 3
    assert {k.run_id for k in kernels} == {run_id, None}
    assert store.find_trace_upload("h100", "a" * 64) == upload
    assert store.find_trace_upload("a100", "a" * 64) is None


def test_trace_totals_sum_in_one_query(store: Store) -> None:
    first, _ = _ingest(store)
    second, _ = _ingest(store, "b" * 64, [TraceKernelIn("only", "kernel", 4e-6, 2)])
    totals = store.trace_totals([first, second, 10**6])
    assert set(totals) == {first, second}
    assert totals[first].kernels == 5 and totals[first].matched_runs == 1
    assert totals[first].total_s == pytest.approx(2.3e-5) and totals[first].matched_s == pytest.approx(2e-5)
    assert totals[first].unmodelled_share == pytest.approx(3e-6 / 2.3e-5)
    assert totals[second].matched_runs == 0 and totals[second].unmodelled_share == 1.0


def test_bad_kernel_stores_nothing(store: Store) -> None:
    _ingest(store)
    with pytest.raises(StoreError, match="run_index"):
        _ingest(store, "b" * 64, [TraceKernelIn("k", "kernel", 1e-6, run_index=5)])
    with pytest.raises(StoreError, match="instances"):
        _ingest(store, "b" * 64, [TraceKernelIn("k", "kernel", 1e-6, 0)])
    with pytest.raises(StoreError, match="duration_s"):
        _ingest(store, "b" * 64, [TraceKernelIn("k", "kernel", float("nan"))])
    assert len(store.list_trace_uploads()) == 1
    assert store.list_runs()[1] == 1


def test_deleting_a_run_keeps_its_kernels(store: Store) -> None:
    upload_id, (run_id,) = _ingest(store)
    store.delete_run(run_id)
    assert {k.run_id for k in store.list_trace_kernels(upload_id)} == {None}


def test_sweeps_round_trip_newest_first(store: Store) -> None:
    first = store.add_sweep("hbm sweep", {"axes": {"bw": [1, 2]}}, {"rows": [{"bw": 1, "time_s": 2.0}]})
    second = store.add_sweep("sram sweep", {"axes": {"sram": [1]}}, {"rows": []})
    assert [s.id for s in store.list_sweeps()] == [second, first]
    row = store.get_sweep(first)
    assert row is not None and row.results["rows"][0]["time_s"] == 2.0
    assert store.get_sweep(10**12) is None
    with pytest.raises(StoreError):
        store.add_sweep("x" * 300, {}, {})
