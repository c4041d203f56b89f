"""Many writer threads on one Store: every run arrives exactly once (SQLite WAL + busy timeout, PostgreSQL pool)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from perfmodel.store import RunIn, Store
from perfmodel.store.engine import make_engine

THREADS = 16
RUNS_PER_THREAD = 25


def test_concurrent_add_run(store: Store) -> None:
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []
    ids: list[int] = []
    lock = threading.Lock()

    def writer(t: int) -> None:
        try:
            barrier.wait()
            for i in range(RUNS_PER_THREAD):
                run = RunIn(hardware_id="h100", op={"kind": "matmul", "m": t, "n": i, "k": 64},
                            measured_time_s=1e-6 * (i + 1), source=f"thread-{t}", tags={"i": str(i)})
                run_id = store.add_run(run)
                with lock:
                    ids.append(run_id)
        except BaseException as exc:
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    expected = {(f"thread-{t}", str(i)) for t in range(THREADS) for i in range(RUNS_PER_THREAD)}
    rows, total = store.list_runs(limit=THREADS * RUNS_PER_THREAD + 10)
    assert total == len(rows) == THREADS * RUNS_PER_THREAD
    pairs = [(r.source, r.tags["i"]) for r in rows]
    assert len(pairs) == len(set(pairs)) and set(pairs) == expected
    assert sorted(ids) == [r.id for r in rows]
    assert all(r.op["m"] == int(r.source.removeprefix("thread-")) and r.op["n"] == int(r.tags["i"]) for r in rows)


def test_first_connection_to_a_new_sqlite_file_waits_for_the_write_lock(tmp_path: Path) -> None:
    """Switching a fresh file to WAL while another connection holds the write lock: SQLite answers "database is
    locked" at once (no busy handler on that path), so make_engine's connect must wait and retry. This is how
    three processes migrating one new database failed in CI."""
    path = tmp_path / "fresh.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE held (x INTEGER)")
    release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    release.start()
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    finally:
        release.join()
        engine.dispose()
        holder.close()
