"""``list_runs`` reads pages with plain SELECTs (``runs_read.run_page``) and ``stored_side`` reads only (run id,
kernel name) pairs (``trace_kernel_runs``): the rows equal what the ORM objects gave (qa16: /trace-history over
three V100 traces spent 3.6 of 6.1 s building ORM objects), on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import select

from perfmodel.store import RunIn, RunRow, Store, TraceKernelIn
from perfmodel.store.models import RunModel
from perfmodel.store.runs_repo import _row

MM = {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp16"}


def _orm_rows(store: Store) -> list[RunRow]:
    with store._read() as session:
        return [_row(m) for m in session.scalars(select(RunModel).order_by(RunModel.id))]


def test_pages_equal_the_orm_rows_with_tags_in_key_order(store: Store) -> None:
    runs = [RunIn("h100" if i % 3 else "a100", {**MM, "m": 64 + i}, 1e-5 * (i + 1), f"s{i % 2}",
                  {"z": str(i), "a": "x", **({"odd": "1"} if i % 2 else {})}, dtype="fp16") for i in range(23)]
    runs.append(RunIn("h100", MM, 1e-5, "none"))  # a run without tags
    store.add_runs(runs)
    orm = _orm_rows(store)
    assert store.list_runs(limit=1000) == (orm, 24)
    assert all(list(r.tags) == sorted(r.tags) for r in orm)
    paged = [row for offset in range(0, 24, 5) for row in store.list_runs(limit=5, offset=offset)[0]]
    assert paged == orm
    h100, total = store.list_runs(hardware_id="h100", tags={"odd": "1"}, limit=4, offset=2)
    expected = [r for r in orm if r.hardware_id == "h100" and r.tags.get("odd") == "1"]
    assert total == len(expected) and h100 == expected[2:6]
    assert store.list_runs(limit=0) == ([], 24) and store.list_runs(offset=100) == ([], 24)


def test_trace_kernel_runs_are_list_trace_kernels_with_a_run_in_order(store: Store) -> None:
    runs = [RunIn("h100", {**MM, "m": m}, 2e-5, "trace:x.json", {"op_name": "aten::mm"}, dtype="fp16")
            for m in (64, 128)]
    kernels = [TraceKernelIn("b", "kernel", 1e-5, 1, run_index=1), TraceKernelIn("a", "kernel", 3e-5, 2, run_index=0),
               TraceKernelIn("c", "kernel", 3e-5, 1, run_index=1), TraceKernelIn("free", "kernel", 9e-5)]
    upload_id, _ = store.ingest_trace("h100", "x.json", "kineto", 1, "a" * 64, runs, kernels)
    expected = [(k.run_id, k.name) for k in store.list_trace_kernels(upload_id) if k.run_id is not None]
    assert store.trace_kernel_runs(upload_id) == expected and len(expected) == 3
    assert store.trace_kernel_runs(upload_id + 1) == [] and store.trace_kernel_runs(0) == []
