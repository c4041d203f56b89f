"""A parsed trace stored in one transaction: its upload, the runs matched from it and every kernel."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, case, distinct, func, insert, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from perfmodel.store.base import OFFSET_MAX, StoreBase, as_dict, check_json, check_str, is_id, storable
from perfmodel.store.errors import StoreError
from perfmodel.store.models import RunModel, RunTagModel, TraceKernelModel, TraceUploadModel, TraceUploadTagModel
from perfmodel.store.rows import RunIn, TraceKernelIn, TraceKernelRow, TraceTotals, TraceUploadRow
from perfmodel.store.runs_repo import insert_runs, validate_runs
from perfmodel.store.tags import check_tags
from perfmodel.store.traces_repo import _check_count, _upload

MAX_KERNEL_NAME = 4096  # characters kept of a kernel name (C++ template names run long)


@dataclass(frozen=True)
class StoredTrace:
    """What ``store_trace`` did: the upload's id, its runs' ids, and whether it was already stored."""

    upload_id: int
    run_ids: list[int]
    duplicate: bool


def _parsed(hardware_id: str, sha256: str) -> tuple[ColumnElement[bool], ...]:
    """The parsed upload of this content for this device (at most one: the partial unique index)."""
    return (TraceUploadModel.hardware_id == hardware_id, TraceUploadModel.sha256 == sha256,
            TraceUploadModel.status == "parsed")


def _insert_parsed_upload(session: Session, values: dict[str, Any]) -> int | None:
    """INSERT ... ON CONFLICT DO NOTHING on the parsed-trace index: the new id, or None when this device
    already has this content parsed. On PostgreSQL a concurrent uncommitted twin is waited for, then counts."""
    dialect = session.get_bind().dialect.name
    upsert = sqlite_insert if dialect == "sqlite" else postgresql_insert
    stmt = (upsert(TraceUploadModel).values(**values)
            .on_conflict_do_nothing(index_elements=["hardware_id", "sha256"],
                                    index_where=TraceUploadModel.status == "parsed")
            .returning(TraceUploadModel.id))
    return session.scalar(stmt)


def _kernel_row(m: TraceKernelModel) -> TraceKernelRow:
    return TraceKernelRow(id=m.id, trace_upload_id=m.trace_upload_id, name=m.name, category=m.category,
                          duration_s=m.duration_s, instances=m.instances, op_name=m.op_name, op_kind=m.op_kind,
                          run_id=m.run_id, counters=as_dict(m.counters), reason=m.reason)


def _validate_kernel(i: int, k: TraceKernelIn, runs: int) -> None:
    check_str(f"kernels[{i}].category", k.category, 20)
    check_str(f"kernels[{i}].op_name", k.op_name, 200, optional=True)
    check_str(f"kernels[{i}].op_kind", k.op_kind, 40, optional=True)
    if not isinstance(k.duration_s, int | float) or not math.isfinite(k.duration_s) or k.duration_s < 0:
        raise StoreError(f"kernels[{i}].duration_s: expected a finite number >= 0, got {k.duration_s!r}")
    if isinstance(k.instances, bool) or not isinstance(k.instances, int) or not 1 <= k.instances <= 2**31 - 1:
        raise StoreError(f"kernels[{i}].instances: expected an integer >= 1, got {k.instances!r}")
    if k.run_index is not None and not 0 <= k.run_index < runs:
        raise StoreError(f"kernels[{i}].run_index: {k.run_index} is not one of the {runs} runs")
    check_json(f"kernels[{i}].counters", k.counters)


class KernelsRepo(StoreBase):
    def find_trace_upload(self, hardware_id: str, sha256: str) -> TraceUploadRow | None:
        """The parsed upload of this content for this device, if any (the same file twice is one trace)."""
        if not (storable(hardware_id) and storable(sha256)):
            return None
        stmt = select(TraceUploadModel).where(*_parsed(hardware_id, sha256)).order_by(TraceUploadModel.id).limit(1)
        with self._read() as session:
            model = session.scalar(stmt)
            return None if model is None else _upload(model)

    def ingest_trace(self, hardware_id: str, filename: str, format: str, size_bytes: int, sha256: str,
                     runs: Sequence[RunIn], kernels: Sequence[TraceKernelIn]) -> tuple[int, list[int]]:
        """``store_trace`` as (upload id, run ids)."""
        stored = self.store_trace(hardware_id, filename, format, size_bytes, sha256, runs, kernels)
        return stored.upload_id, stored.run_ids

    def store_trace(self, hardware_id: str, filename: str, format: str, size_bytes: int, sha256: str,
                    runs: Sequence[RunIn], kernels: Sequence[TraceKernelIn],
                    tags: Mapping[str, str] | None = None) -> StoredTrace:
        """Store a parsed trace atomically: the upload (status ``parsed``), its runs (pointing at it) and its
        kernels (pointing at their run); nothing is stored if anything fails. When this device already has a
        parsed upload of this content (stored before, or by a concurrent call that won the unique index) nothing
        is written and that upload and its runs come back with ``duplicate=True``."""
        check_str("hardware_id", hardware_id, 80)
        check_str("filename", filename, 255)
        check_str("format", format, 40)
        check_str("sha256", sha256, 64)
        _check_count("size_bytes", size_bytes, OFFSET_MAX)
        checked_tags = check_tags(tags or {})
        linked = [RunIn(hardware_id=r.hardware_id, op=r.op, measured_time_s=r.measured_time_s, source=r.source,
                        tags=r.tags, dtype=r.dtype) for r in runs]
        valid = validate_runs(linked)
        for i, kernel in enumerate(kernels):
            _validate_kernel(i, kernel, len(runs))
        with self._write("trace not stored") as session:
            upload_id = _insert_parsed_upload(session, {
                "hardware_id": hardware_id, "filename": filename, "format": format, "size_bytes": size_bytes,
                "sha256": sha256, "status": "parsed", "kernel_count": len(kernels)})
            if upload_id is None:  # the same trace: answer with the stored one
                existing = session.scalars(select(TraceUploadModel.id).where(*_parsed(hardware_id, sha256))).one()
                run_ids = list(session.scalars(select(RunModel.id).where(RunModel.trace_upload_id == existing)
                                               .order_by(RunModel.id)))
                return StoredTrace(existing, run_ids, duplicate=True)
            if checked_tags:
                session.execute(insert(TraceUploadTagModel), [
                    {"trace_upload_id": upload_id, "key": k, "value": v} for k, v in checked_tags.items()])
            for row in valid:
                row["trace_upload_id"] = upload_id
            run_ids = insert_runs(session, linked, valid) if linked else []
            rows: list[dict[str, Any]] = [
                {"trace_upload_id": upload_id, "name": k.name[:MAX_KERNEL_NAME], "category": k.category,
                 "duration_s": float(k.duration_s), "instances": k.instances, "op_name": k.op_name,
                 "op_kind": k.op_kind, "run_id": None if k.run_index is None else run_ids[k.run_index],
                 "counters": k.counters, "reason": None if k.reason is None else k.reason[:2000]}
                for k in kernels]
            if rows:
                session.execute(insert(TraceKernelModel), rows)
            return StoredTrace(upload_id, run_ids, duplicate=False)

    def list_trace_kernels(self, upload_id: int, limit: int | None = None) -> list[TraceKernelRow]:
        """The kernels of an upload, longest first (all of them unless ``limit``)."""
        if not is_id(upload_id):
            return []
        stmt = (select(TraceKernelModel).where(TraceKernelModel.trace_upload_id == upload_id)
                .order_by(TraceKernelModel.duration_s.desc(), TraceKernelModel.id).limit(limit))
        with self._read() as session:
            return [_kernel_row(m) for m in session.scalars(stmt)]

    def trace_kernel_runs(self, upload_id: int) -> list[tuple[int, str]]:
        """(run id, kernel name) of an upload's kernels that made a run, in ``list_trace_kernels``' order
        (longest first), read as plain rows: no ``TraceKernelRow`` with its counters JSON per kernel."""
        if not is_id(upload_id):
            return []
        stmt = (select(TraceKernelModel.run_id, TraceKernelModel.name)
                .where(TraceKernelModel.trace_upload_id == upload_id, TraceKernelModel.run_id.is_not(None))
                .order_by(TraceKernelModel.duration_s.desc(), TraceKernelModel.id))
        with self._read() as session:
            return [(int(run_id or 0), str(name)) for run_id, name in session.execute(stmt)]  # run_id IS NOT NULL

    def trace_time_by_match_source(self, upload_id: int) -> dict[str, float]:
        """An upload's matched kernel time (s) per match source (its runs' ``match_source`` tag: framework
        shapes, counters, grid/block...; 'untagged' for runs without one), in one aggregate query."""
        if not is_id(upload_id):
            return {}
        source = func.coalesce(RunTagModel.value, "untagged")
        stmt = (select(source, func.sum(TraceKernelModel.duration_s))
                .select_from(TraceKernelModel)
                .outerjoin(RunTagModel, (RunTagModel.run_id == TraceKernelModel.run_id)
                           & (RunTagModel.key == "match_source"))
                .where(TraceKernelModel.trace_upload_id == upload_id, TraceKernelModel.run_id.is_not(None))
                .group_by(source))
        with self._read() as session:
            return {str(name): float(time_s) for name, time_s in session.execute(stmt)}

    def trace_totals(self, upload_ids: Sequence[int]) -> dict[int, TraceTotals]:
        """Per upload, in one aggregate query: kernel launches, kernel time, the time matched to runs and the
        number of runs (uploads without kernels are absent)."""
        ids = [i for i in upload_ids if is_id(i)]
        if not ids:
            return {}
        matched = case((TraceKernelModel.run_id.is_not(None), TraceKernelModel.duration_s), else_=0.0)
        stmt = (select(TraceKernelModel.trace_upload_id, func.sum(TraceKernelModel.instances),
                       func.sum(TraceKernelModel.duration_s), func.sum(matched),
                       func.count(distinct(TraceKernelModel.run_id)))
                .where(TraceKernelModel.trace_upload_id.in_(ids)).group_by(TraceKernelModel.trace_upload_id))
        with self._read() as session:
            return {upload: TraceTotals(int(kernels), float(total), float(matched_s), int(runs))
                    for upload, kernels, total, matched_s, runs in session.execute(stmt)}
