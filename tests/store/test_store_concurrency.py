"""Many writer threads on one Store: every run arrives exactly once (SQLite WAL + busy timeout, PostgreSQL pool)."""

from __future__ import annotations

import threading

from perfmodel.store import RunIn, Store

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
