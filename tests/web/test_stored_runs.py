"""The stored runs' columns kept between pages (web/stored_runs.py): after appends, deletions and late commits
they must equal what the store's own run listing returns, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from db_urls import BACKENDS, database_url
from sqlalchemy import insert

from perfmodel.store import RunIn, Store
from perfmodel.store.models import RunModel
from web.run_columns import codes, objects
from web.stored_runs import StoredRuns

H100, A100 = "nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb"


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    with database_url(request.param, tmp_path) as url:
        s = Store(url)
        s.migrate()
        try:
            yield s
        finally:
            s.dispose()


def _runs(n: int, start: int = 0) -> list[RunIn]:
    return [RunIn(hardware_id=(H100, A100)[i % 2], measured_time_s=1e-5 * (i + 1),
                  source=("bench", "trace")[i % 3 == 0],
                  op={"kind": "matmul", "m": 64 * (1 + i % 3), "n": 128, "k": 256, "dtype": "bf16"})
            for i in range(start, start + n)]


def _same_as_listing(held: StoredRuns, store: Store, **filters: str) -> None:
    """The columns of ``filters`` equal the store's own listing, row by row."""
    got = held.columns(store, **filters)  # type: ignore[arg-type]
    rows, total = store.list_runs(limit=1000, **filters)  # type: ignore[arg-type]
    rows = sorted(rows, key=lambda r: r.id)
    assert got.size == total == len(rows)
    assert got.run_id.tolist() == [r.id for r in rows]
    assert got.hardware_id.tolist() == [r.hardware_id for r in rows]
    assert got.op_kind.tolist() == [r.op_kind for r in rows]
    assert got.measured_s.tolist() == [r.measured_time_s for r in rows]


def test_columns_follow_appends_and_deletions(store: Store) -> None:
    held = StoredRuns()
    _same_as_listing(held, store)  # empty
    store.add_runs(_runs(30))
    _same_as_listing(held, store)
    store.add_runs(_runs(7, 30))
    for filters in ({}, {"hardware_id": A100}, {"source": "trace"}, {"op_kind": "matmul"}, {"hardware_id": "x"}):
        _same_as_listing(held, store, **filters)
    assert held.full_reads == 0  # appends were read incrementally
    first = held.columns(store).run_id
    store.delete_run(int(first[3]))
    _same_as_listing(held, store)
    assert held.full_reads == 1


def test_a_run_committed_late_with_a_smaller_id_is_read(store: Store) -> None:
    store.add_runs(_runs(5))
    held = StoredRuns()
    ids = held.columns(store).run_id.tolist()
    # a run that another writer's transaction committed after these were read, with an id among theirs
    store.delete_run(ids[2])
    held.columns(store)
    row = {"id": ids[2], "hardware_id": H100, "op_kind": "matmul", "op": {"kind": "matmul", "m": 1, "n": 1, "k": 1},
           "measured_time_s": 1.0, "source": "late"}
    with store._write() as session:
        session.execute(insert(RunModel), [row])
    store.add_runs(_runs(1, 5))  # and a new one above them: an incremental read alone would miss the late one
    _same_as_listing(held, store)
    assert held.columns(store, source="late").run_id.tolist() == [ids[2]]


def test_codes_of_a_coded_column_match_the_hash_pass(store: Store) -> None:
    store.add_runs(_runs(40))
    for filters in ({}, {"hardware_id": A100}, {"source": "trace"}):
        column = StoredRuns().columns(store, **filters).op_text  # type: ignore[arg-type]
        values, inverse = codes(column)
        expected_values, expected_inverse = codes(objects(column.tolist()))
        assert values == expected_values and np.array_equal(inverse, expected_inverse)
