"""Measured runs: round trip, every filter, tags, time range, pages and totals, deletes, all-or-nothing."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import text

from perfmodel.store import RunIn, Store, StoreError, runs_repo

MATMUL = {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}
NORM = {"kind": "rmsnorm", "shape": [8192, 8192], "dtype": "fp16"}


def _run(hw: str = "h100", op: dict[str, Any] | None = None, t: float = 1e-3, source: str = "bench",
         tags: dict[str, str] | None = None, dtype: str | None = "bf16", upload: int | None = None) -> RunIn:
    return RunIn(hardware_id=hw, op=op or MATMUL, measured_time_s=t, source=source, tags=tags or {}, dtype=dtype,
                 trace_upload_id=upload)


def _count(store: Store, table: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_round_trip(store: Store) -> None:
    run_id = store.add_run(_run(tags={"model": "llama", "layer": "3"}))
    row = store.get_run(run_id)
    assert row is not None
    assert (row.id, row.hardware_id, row.op_kind, row.dtype, row.op) == (run_id, "h100", "matmul", "bf16", MATMUL)
    assert (row.measured_time_s, row.source, row.tags) == (1e-3, "bench", {"model": "llama", "layer": "3"})
    assert row.created_at.tzinfo is not None and row.created_at.utcoffset() == timedelta(0)
    assert abs(row.created_at - datetime.now(UTC)) < timedelta(minutes=1)
    assert store.get_run(run_id + 1000) is None


def test_add_runs_returns_ids_in_order(store: Store) -> None:
    runs = [_run(t=(i + 1) * 1e-6, tags={"i": str(i)}) for i in range(50)]
    ids = store.add_runs(runs)
    assert len(ids) == 50 and ids == sorted(ids) and len(set(ids)) == 50
    for run_id, run in zip(ids, runs, strict=True):
        row = store.get_run(run_id)
        assert row is not None and row.measured_time_s == run.measured_time_s and row.tags == run.tags
    assert store.add_runs([]) == []


def test_filters(store: Store) -> None:
    a = store.add_run(_run("h100", MATMUL, source="bench", tags={"model": "llama", "phase": "prefill"}))
    b = store.add_run(_run("h100", NORM, source="trace", tags={"model": "llama", "phase": "decode"}, dtype="fp16"))
    c = store.add_run(_run("mi300x", MATMUL, source="bench", tags={"model": "gpt"}))
    d = store.add_run(_run("mi300x", NORM, source="trace", dtype=None))

    def ids(**filters: Any) -> list[int]:
        rows, total = store.list_runs(**filters)
        assert total == len(rows)
        return [r.id for r in rows]

    assert ids() == [a, b, c, d]
    assert ids(hardware_id="h100") == [a, b]
    assert ids(op_kind="rmsnorm") == [b, d]
    assert ids(source="bench") == [a, c]
    assert ids(hardware_id="mi300x", op_kind="matmul", source="bench") == [c]
    assert ids(tags={"model": "llama"}) == [a, b]
    assert ids(tags={"model": "llama", "phase": "decode"}) == [b]
    assert ids(tags={"model": "llama", "phase": "nope"}) == []
    assert ids(tags={"phase": "prefill", "model": "gpt"}) == []
    assert ids(tags={}) == [a, b, c, d]
    assert ids(hardware_id="nope") == []
    assert store.get_run(d).dtype is None  # type: ignore[union-attr]


def test_time_range(store: Store) -> None:
    early = store.add_runs([_run(source="early"), _run(source="early")])
    time.sleep(0.01)
    middle = datetime.now(UTC)
    time.sleep(0.01)
    late = store.add_runs([_run(source="late")])
    assert [r.id for r in store.list_runs(created_after=middle)[0]] == late
    assert [r.id for r in store.list_runs(created_before=middle)[0]] == early
    assert store.list_runs(created_after=middle, created_before=middle)[1] == 0
    naive = middle.replace(tzinfo=None)  # naive datetimes are UTC
    assert [r.id for r in store.list_runs(created_after=naive)[0]] == late
    plus2 = middle.astimezone(timezone(timedelta(hours=2)))  # other zones are converted
    assert [r.id for r in store.list_runs(created_before=plus2)[0]] == early
    first = store.get_run(early[0])
    assert first is not None
    assert [r.id for r in store.list_runs(created_after=first.created_at, created_before=middle)[0]] == early


def test_pagination_and_total(store: Store) -> None:
    ids = store.add_runs([_run(source=f"s{i % 2}") for i in range(7)])
    pages = [store.list_runs(limit=3, offset=o) for o in (0, 3, 6, 9)]
    assert [[r.id for r in rows] for rows, _ in pages] == [ids[0:3], ids[3:6], ids[6:7], []]
    assert {total for _, total in pages} == {7}
    rows, total = store.list_runs(source="s0", limit=2, offset=1)
    assert [r.id for r in rows] == [ids[2], ids[4]] and total == 4
    assert store.list_runs(limit=0) == ([], 7)
    with pytest.raises(StoreError):
        store.list_runs(limit=-1)
    with pytest.raises(StoreError):
        store.list_runs(offset=-1)


def test_delete_cascades_to_tags(store: Store) -> None:
    keep = store.add_run(_run(tags={"a": "1"}))
    gone = store.add_run(_run(tags={"a": "2", "b": "3"}))
    assert _count(store, "run_tags") == 3
    assert store.delete_run(gone) is True
    assert store.delete_run(gone) is False
    assert store.get_run(gone) is None
    assert _count(store, "run_tags") == 1
    assert store.get_run(keep).tags == {"a": "1"}  # type: ignore[union-attr]


BAD_RUNS = [
    _run(op={"m": 1}),  # no kind
    _run(op={"kind": 3}),
    _run(op={"kind": "x" * 41}),
    _run(op={"kind": "matmul", "m": float("nan")}),
    _run(t=0.0), _run(t=-1e-3), _run(t=float("nan")), _run(t=float("inf")),
    _run(hw=""), _run(hw="h" * 81), _run(source=""), _run(source="s" * 201), _run(dtype="d" * 17),
    _run(tags={"k": "v" * 401}), _run(tags={"k" * 101: "v"}), _run(tags={"k": 1}),  # type: ignore[dict-item]
    RunIn("h100", MATMUL, True, "bench"),
]


@pytest.mark.parametrize("bad", BAD_RUNS)
def test_bad_run_is_rejected_before_the_database_and_nothing_is_written(store_url: str, bad: RunIn) -> None:
    unmigrated = Store(store_url)  # no tables: touching the database would be an OperationalError
    try:
        with pytest.raises(StoreError):
            unmigrated.add_runs([_run(), bad, _run()])
        with pytest.raises(StoreError):
            unmigrated.add_run(bad)
    finally:
        unmigrated.dispose()


def test_add_runs_one_bad_row_writes_nothing(store: Store) -> None:
    store.add_run(_run(source="before"))
    with pytest.raises(StoreError, match=r"\[1\]\.op\.kind"):
        store.add_runs([_run(tags={"a": "1"}), _run(op={"m": 1}), _run()])
    with pytest.raises(StoreError, match="trace upload 999"):
        store.add_runs([_run(tags={"a": "1"}), _run(upload=999)])
    assert store.list_runs()[1] == 1 and _count(store, "run_tags") == 0


def test_add_runs_failing_inside_the_database_rolls_back(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row the database refuses (CHECK measured_time_s > 0) after others were inserted: nothing is kept."""
    real = runs_repo._validate

    def sneak(run: RunIn, where: str = "") -> dict[str, Any]:
        row = real(run, where)
        return {**row, "measured_time_s": -1.0} if run.source == "sneaky" else row

    monkeypatch.setattr(runs_repo, "_validate", sneak)
    with pytest.raises(StoreError):
        store.add_runs([_run(tags={"a": "1"}), _run(tags={"b": "2"}), _run(source="sneaky")])
    assert store.list_runs()[1] == 0 and _count(store, "run_tags") == 0


def test_trace_upload_link_and_set_null(store: Store) -> None:
    upload = store.add_trace_upload("h100", "trace.json", "chrome", 1234, "f" * 64)
    linked = store.add_runs([_run(upload=upload), _run(upload=upload)])
    other = store.add_run(_run())
    rows, total = store.list_runs(trace_upload_id=upload)
    assert [r.id for r in rows] == linked and total == 2 and rows[0].trace_upload_id == upload
    assert store.get_run(other).trace_upload_id is None  # type: ignore[union-attr]
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM trace_uploads WHERE id = :id"), {"id": upload})
    assert [store.get_run(i).trace_upload_id for i in linked] == [None, None]  # type: ignore[union-attr]
    assert store.list_runs()[1] == 3
