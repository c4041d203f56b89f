"""Every stored run's chart columns kept in memory between data versions, so a page that aggregates 100,000
runs reads only the runs stored since the last page, not all of them (issue 25: a cold ``/runs`` spent ~0.5 s
CPU reading 100,000 rows and ~0.4 s coding their text columns in Python).

Runs are only ever appended or deleted. Each read fetches the runs above the largest id read so far, then checks
that the runs with ids up to it are exactly those held (their count and the sum of their ids): a deletion or a
run committed late with a smaller id makes the next read start over from nothing. Text columns (device, op kind,
source, the op's JSON) are held as integer codes into their distinct values, so filtering and grouping are
numpy operations on integers."""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Text, cast, func, select

from perfmodel.store import Store
from perfmodel.store.base import is_id
from perfmodel.store.models import RunModel
from web.run_columns import Coded, IntArray, RunColumns, objects

log = logging.getLogger(__name__)
TEXT = ("hardware_id", "op_kind", "source", "op_text")


@dataclass(frozen=True)
class _Snapshot:
    """The columns at one read (arrays never changed after: a later read builds new ones)."""

    run_id: np.ndarray[Any, np.dtype[np.int64]]
    measured_s: np.ndarray[Any, np.dtype[np.float64]]
    trace_id: np.ndarray[Any, np.dtype[np.int64]]  # -1: not from a trace
    text: dict[str, Coded]
    code_of: dict[str, dict[Any, int]]  # value -> code; codes never change, later values get larger ones


def _read_rows(store: Store, after_id: int) -> list[tuple[Any, ...]]:
    """The runs with ids above ``after_id``, ordered by id, as the driver's plain tuples (no Row objects)."""
    stmt = (select(RunModel.id, RunModel.hardware_id, RunModel.op_kind, RunModel.source, cast(RunModel.op, Text),
                   RunModel.trace_upload_id, RunModel.measured_time_s)
            .where(RunModel.id > after_id).order_by(RunModel.id))
    with store.engine.connect() as conn:
        result = conn.execute(stmt)
        rows = list(result.cursor.fetchall())
        result.close()
    return rows


def _count_and_sum(store: Store, up_to_id: int) -> tuple[int, int]:
    stmt = select(func.count(RunModel.id), func.coalesce(func.sum(RunModel.id), 0)).where(RunModel.id <= up_to_id)
    with store.engine.connect() as conn:
        count, total = conn.execute(stmt).one()
    return int(count), int(total)


class StoredRuns:
    """The columns of every run of one store, read incrementally (thread safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.full_reads = 0  # how many times the columns were read from nothing (for tests)
        self._clear()

    def _clear(self) -> None:
        self._seen: dict[str, dict[Any, int]] = {name: {} for name in TEXT}
        empty_codes = np.zeros(0, dtype=np.intp)
        self._snapshot = _Snapshot(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0, dtype=np.int64),
                                   {name: Coded(objects([]), empty_codes) for name in TEXT}, self._seen)
        self._id_sum = 0

    def _append(self, rows: Sequence[tuple[Any, ...]]) -> None:
        ids, hardware, kinds, sources, ops, traces, measured = zip(*rows, strict=True)
        old = self._snapshot
        text = {}
        for name, column in zip(TEXT, (hardware, kinds, sources, ops), strict=True):
            seen = self._seen[name]
            before = len(seen)
            new = np.fromiter((seen.setdefault(v, len(seen)) for v in column), dtype=np.intp, count=len(column))
            values = old.text[name].values
            if len(seen) > before:
                values = np.concatenate([values, objects(list(seen)[before:])])
            text[name] = Coded(values, np.concatenate([old.text[name].code, new]))
        new_ids = np.asarray(ids, dtype=np.int64)
        self._id_sum += int(new_ids.sum())
        self._snapshot = _Snapshot(
            np.concatenate([old.run_id, new_ids]), np.concatenate([old.measured_s, np.asarray(measured, dtype=float)]),
            np.concatenate([old.trace_id, np.asarray([-1 if t is None else t for t in traces], dtype=np.int64)]),
            text, self._seen)

    def read(self, store: Store) -> _Snapshot:
        """The columns of every run stored now: only new runs are read, unless runs were deleted."""
        with self._lock:
            last = int(self._snapshot.run_id[-1]) if self._snapshot.run_id.size else 0
            rows = _read_rows(store, last)
            if rows:
                self._append(rows)
            last = int(self._snapshot.run_id[-1]) if self._snapshot.run_id.size else 0
            if _count_and_sum(store, last) != (self._snapshot.run_id.size, self._id_sum):
                self._clear()
                self.full_reads += 1
                rows = _read_rows(store, 0)
                if rows:
                    self._append(rows)
            return self._snapshot

    def columns(self, store: Store, hardware_id: str | None = None, op_kind: str | None = None,
                source: str | None = None, trace_id: int | None = None) -> RunColumns:
        """The runs matching the filters (those of ``/api/v1/runs``), ordered by id."""
        snap = self.read(store)
        keep = np.ones(snap.run_id.size, dtype=bool)
        for name, wanted in (("hardware_id", hardware_id), ("op_kind", op_kind), ("source", source)):
            if wanted is not None:
                code = snap.code_of[name].get(wanted, -1)
                keep &= snap.text[name].code == code
        if trace_id is not None:
            keep &= snap.trace_id == (trace_id if is_id(trace_id) else -2)
        rows: IntArray = np.nonzero(keep)[0]
        return RunColumns(snap.run_id[rows], snap.text["hardware_id"][rows], snap.text["op_kind"][rows],
                          snap.measured_s[rows], snap.text["op_text"][rows])


_BY_STORE: weakref.WeakKeyDictionary[Store, StoredRuns] = weakref.WeakKeyDictionary()
_BY_STORE_LOCK = threading.Lock()


def stored_runs(store: Store) -> StoredRuns:
    """The one ``StoredRuns`` of ``store`` in this process."""
    with _BY_STORE_LOCK:
        found = _BY_STORE.get(store)
        if found is None:
            found = _BY_STORE[store] = StoredRuns()
        return found


def start_reading(store: Store) -> threading.Thread:
    """Read every run's columns in a daemon thread (at server start, so the first page does not); returns the
    thread (join it before disposing of the store)."""
    def read() -> None:
        try:
            stored_runs(store).read(store)
        except Exception:  # the first page then reads them itself
            log.exception("reading the stored runs' columns failed")

    thread = threading.Thread(target=read, name="perfmodel-run-columns", daemon=True)
    thread.start()
    return thread
