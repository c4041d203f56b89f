"""Measured runs and their tags. Tags live in ``run_tags`` so tag filters are plain SQL on every backend."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, false, func, insert, select
from sqlalchemy.orm import Session

from perfmodel.store.base import (
    StoreBase,
    as_dict,
    check_json,
    check_limit_offset,
    check_positive,
    check_str,
    is_id,
    storable,
)
from perfmodel.store.errors import StoreError
from perfmodel.store.models import RunModel, RunTagModel, TraceUploadModel
from perfmodel.store.rows import RunIn, RunRow
from perfmodel.store.runs_read import run_page


def _validate(run: RunIn, where: str = "") -> dict[str, Any]:
    """The row to insert, or a ``StoreError`` naming the field; runs before anything touches the database."""
    check_str(f"{where}hardware_id", run.hardware_id, 80)
    check_json(f"{where}op", run.op)
    kind = run.op.get("kind")
    check_str(f"{where}op.kind", kind, 40)
    time_s = check_positive(f"{where}measured_time_s", run.measured_time_s)
    check_str(f"{where}source", run.source, 200)
    check_str(f"{where}dtype", run.dtype, 16, optional=True)
    if not isinstance(run.tags, dict):
        raise StoreError(f"{where}tags: expected a dict of strings, got {type(run.tags).__name__}")
    for key, value in run.tags.items():
        check_str(f"{where}tags key", key, 100)
        check_str(f"{where}tags[{key!r}]", value, 400, empty=True)
    if run.trace_upload_id is not None and not is_id(run.trace_upload_id):
        raise StoreError(f"{where}trace_upload_id: no trace upload {run.trace_upload_id!r}")
    return {"hardware_id": run.hardware_id, "op_kind": kind, "dtype": run.dtype, "op": run.op,
            "measured_time_s": time_s, "source": run.source, "trace_upload_id": run.trace_upload_id}


def _row(model: RunModel) -> RunRow:
    return RunRow(id=model.id, hardware_id=model.hardware_id, op_kind=model.op_kind, dtype=model.dtype,
                  op=as_dict(model.op), measured_time_s=model.measured_time_s, source=model.source,
                  tags={t.key: t.value for t in model.tags}, created_at=model.created_at,
                  trace_upload_id=model.trace_upload_id)


def _filters(hardware_id: str | None, op_kind: str | None, source: str | None, tags: dict[str, str] | None,
             created_after: datetime | None, created_before: datetime | None,
             trace_upload_id: int | None) -> list[ColumnElement[bool]]:
    texts = [hardware_id, op_kind, source, *(tags or {}).keys(), *(tags or {}).values()]
    if any(t is not None and not storable(t) for t in texts):
        return [false()]  # no stored row holds such text
    where: list[ColumnElement[bool]] = []
    if hardware_id is not None:
        where.append(RunModel.hardware_id == hardware_id)
    if op_kind is not None:
        where.append(RunModel.op_kind == op_kind)
    if source is not None:
        where.append(RunModel.source == source)
    for key, value in (tags or {}).items():
        where.append(RunModel.id.in_(select(RunTagModel.run_id)
                                     .where(RunTagModel.key == key, RunTagModel.value == value)))
    if created_after is not None:
        where.append(RunModel.created_at >= created_after)
    if created_before is not None:
        where.append(RunModel.created_at < created_before)
    if trace_upload_id is not None:
        where.append(RunModel.trace_upload_id == trace_upload_id if is_id(trace_upload_id) else false())
    return where


def validate_runs(runs: Sequence[RunIn]) -> list[dict[str, Any]]:
    """The rows to insert, or a ``StoreError`` naming the run and field."""
    return [_validate(run, f"[{i}]." if len(runs) > 1 else "") for i, run in enumerate(runs)]


def insert_runs(session: Session, runs: Sequence[RunIn], rows: list[dict[str, Any]]) -> list[int]:
    """Insert validated runs and their tags in the caller's transaction; ids in input order."""
    uploads = {r["trace_upload_id"] for r in rows if r["trace_upload_id"] is not None}
    if uploads:
        found = set(session.scalars(select(TraceUploadModel.id).where(TraceUploadModel.id.in_(uploads))))
        if uploads - found:
            missing = ", ".join(map(str, sorted(uploads - found)))
            raise StoreError(f"trace_upload_id: no trace upload {missing}")
    stmt = insert(RunModel).returning(RunModel.id, sort_by_parameter_order=True)
    ids = list(session.scalars(stmt, rows))
    tag_rows = [{"run_id": run_id, "key": k, "value": v}
                for run_id, run in zip(ids, runs, strict=True) for k, v in run.tags.items()]
    if tag_rows:
        session.execute(insert(RunTagModel), tag_rows)
    return ids


class RunsRepo(StoreBase):
    def add_runs(self, runs: Sequence[RunIn]) -> list[int]:
        """Insert every run in one transaction (all or nothing); the ids come back in input order."""
        rows = validate_runs(runs)
        if not rows:
            return []
        with self._write("runs not stored") as session:
            return insert_runs(session, runs, rows)

    def add_run(self, run: RunIn) -> int:
        return self.add_runs([run])[0]

    def get_run(self, run_id: int) -> RunRow | None:
        if not is_id(run_id):
            return None
        with self._read() as session:
            model = session.get(RunModel, run_id)
            return None if model is None else _row(model)

    def list_runs(self, hardware_id: str | None = None, op_kind: str | None = None, source: str | None = None,
                  tags: dict[str, str] | None = None, created_after: datetime | None = None,
                  created_before: datetime | None = None, limit: int = 100, offset: int = 0,
                  trace_upload_id: int | None = None) -> tuple[list[RunRow], int]:
        """One page of runs by id, and how many match in all. Every given filter must hold; ``tags`` must all
        match; ``created_after`` is inclusive, ``created_before`` exclusive (naive datetimes are UTC)."""
        check_limit_offset(limit, offset)
        where = _filters(hardware_id, op_kind, source, tags, created_after, created_before, trace_upload_id)
        with self._read() as session:
            total = session.scalar(select(func.count()).select_from(RunModel).where(*where)) or 0
            return run_page(session, where, limit, offset), int(total)

    def delete_run(self, run_id: int) -> bool:
        """True if it existed; its tags go with it (ON DELETE CASCADE)."""
        if not is_id(run_id):
            return False
        with self._write() as session:
            result = session.execute(delete(RunModel).where(RunModel.id == run_id))
            return bool(getattr(result, "rowcount", 0))

