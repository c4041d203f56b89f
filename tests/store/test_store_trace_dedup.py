"""One parsed trace per (device, content): a repeated or concurrent store is the same trace, and migration
0004 folds the duplicates stored before the unique index existed (runs, tags and kernels too)."""

from __future__ import annotations

import threading

import pytest
from alembic import command
from sqlalchemy import Connection, create_engine, func, select, text
from sqlalchemy.exc import IntegrityError

from perfmodel.store import RunIn, Store, TraceKernelIn, migrations_config
from perfmodel.store.kernels_repo import StoredTrace
from perfmodel.store.models import RunModel, RunTagModel, TraceKernelModel, TraceUploadModel

MM = {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp16"}
SHA = "c" * 64


def _trace(store: Store, hardware: str = "h100", sha: str = SHA) -> StoredTrace:
    runs = [RunIn(hardware, {**MM, "m": 64 * (i + 1)}, 2e-5 * (i + 1), "trace:x", {"op_name": f"mm{i}"},
                  dtype="fp16") for i in range(3)]
    kernels = [TraceKernelIn(f"gemm{i}", "kernel", 1e-5, 1, "aten::mm", "matmul", i) for i in range(3)]
    kernels.append(TraceKernelIn("mystery", "kernel", 3e-6))
    return store.store_trace(hardware, "x.json", "pytorch_kineto", 1234, sha, runs, kernels)


def _counts(store: Store) -> tuple[int, int, int, int]:
    with store.engine.connect() as conn:
        return tuple(int(conn.scalar(select(func.count()).select_from(m)) or 0)  # type: ignore[return-value]
                     for m in (TraceUploadModel, RunModel, RunTagModel, TraceKernelModel))


def test_the_same_trace_twice_is_the_stored_one(store: Store) -> None:
    first = _trace(store)
    again = _trace(store)
    assert not first.duplicate and again.duplicate
    assert (again.upload_id, again.run_ids) == (first.upload_id, first.run_ids)
    assert _counts(store) == (1, 3, 3, 4)
    other_device = _trace(store, "a100")
    assert not other_device.duplicate and _counts(store) == (2, 6, 6, 8)


def test_a_failed_upload_does_not_block_the_parsed_one(store: Store) -> None:
    store.add_trace_upload("h100", "x.json", "unknown", 10, SHA, status="failed", error="bad")
    store.add_trace_upload("h100", "x.json", "unknown", 10, SHA, status="failed", error="bad")
    assert not _trace(store).duplicate
    assert _counts(store)[0] == 3


def test_the_index_refuses_a_second_parsed_row(store: Store) -> None:
    _trace(store)
    with pytest.raises(IntegrityError), store.engine.begin() as conn:
        conn.execute(text("INSERT INTO trace_uploads (hardware_id, filename, format, size_bytes, sha256, status) "
                          f"VALUES ('h100', 'y', 'f', 1, '{SHA}', 'parsed')"))


def test_twenty_concurrent_stores_keep_one_trace(store: Store) -> None:
    results: list[StoredTrace] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(20)

    def one() -> None:
        try:
            barrier.wait()
            results.append(_trace(store))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(not r.duplicate for r in results) == 1
    assert len({(r.upload_id, tuple(r.run_ids)) for r in results}) == 1
    assert _counts(store) == (1, 3, 3, 4)


def _raw_trace(conn: Connection, hardware: str, sha: str, status: str = "parsed") -> int:
    upload = conn.execute(text(
        "INSERT INTO trace_uploads (hardware_id, filename, format, size_bytes, sha256, status, created_at) "
        "VALUES (:h, 'x.json', 'pytorch_kineto', 1, :s, :st, CURRENT_TIMESTAMP) RETURNING id"),
        {"h": hardware, "s": sha, "st": status}).scalar_one()
    if status != "parsed":
        return int(upload)
    for _ in range(2):
        run = conn.execute(text(
            "INSERT INTO runs (hardware_id, op_kind, op, measured_time_s, source, created_at, trace_upload_id) "
            "VALUES (:h, 'matmul', '{\"kind\": \"matmul\"}', 1e-3, 'trace', CURRENT_TIMESTAMP, :u) RETURNING id"),
            {"h": hardware, "u": upload}).scalar_one()
        conn.execute(text("INSERT INTO run_tags (run_id, key, value) VALUES (:r, 'op_name', 'mm')"), {"r": run})
        conn.execute(text("INSERT INTO trace_kernels (trace_upload_id, name, category, duration_s, instances, "
                          "run_id, counters) VALUES (:u, 'gemm', 'kernel', 1e-3, 1, :r, '{}')"),
                     {"u": upload, "r": run})
    return int(upload)


def test_migration_0004_folds_duplicates_with_their_runs(store_url: str) -> None:
    config = migrations_config(store_url)
    command.upgrade(config, "0003_kernels_sweeps")
    engine = create_engine(store_url)
    try:
        with engine.begin() as conn:
            copies = [_raw_trace(conn, "h100", SHA) for _ in range(3)]
            kept = copies[0]
            failed = [_raw_trace(conn, "h100", SHA, "failed") for _ in range(2)]
            other = _raw_trace(conn, "a100", SHA)
            single = _raw_trace(conn, "h100", "d" * 64)
            manual = conn.execute(text(
                "INSERT INTO runs (hardware_id, op_kind, op, measured_time_s, source, created_at) "
                "VALUES ('h100', 'matmul', '{}', 1e-3, 'manual', CURRENT_TIMESTAMP) RETURNING id")).scalar_one()
        command.upgrade(config, "head")
        with engine.connect() as conn:
            uploads = sorted(conn.execute(text("SELECT id FROM trace_uploads")).scalars())
            assert uploads == sorted([kept, *failed, other, single])
            per_upload: dict[int | None, int] = dict(conn.execute(text(
                "SELECT trace_upload_id, count(*) FROM runs GROUP BY trace_upload_id")).all())
            assert per_upload == {kept: 2, other: 2, single: 2, None: 1}
            assert conn.scalar(text("SELECT count(*) FROM run_tags")) == 6
            assert conn.scalar(text("SELECT count(*) FROM trace_kernels")) == 6
            assert conn.scalar(text("SELECT count(*) FROM runs WHERE id = :m"), {"m": manual}) == 1
            orphans = conn.scalar(text("SELECT count(*) FROM trace_kernels k LEFT JOIN runs r ON k.run_id = r.id "
                                       "WHERE k.run_id IS NOT NULL AND r.id IS NULL"))
            assert orphans == 0
        command.downgrade(config, "0003_kernels_sweeps")
        command.upgrade(config, "head")
    finally:
        engine.dispose()
