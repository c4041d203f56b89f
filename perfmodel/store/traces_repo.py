"""Trace uploads and calibrations (schema and simple access; the trace and calibration issues build on them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from sqlalchemy import Select, false, select, update
from sqlalchemy.orm import InstrumentedAttribute

from perfmodel.store.base import ID_MAX, OFFSET_MAX, StoreBase, as_dict, check_json, check_str, is_id, storable
from perfmodel.store.errors import NotFound, StoreError
from perfmodel.store.models import CalibrationModel, TraceUploadModel, TraceUploadTagModel
from perfmodel.store.rows import CalibrationRow, TraceUploadRow
from perfmodel.store.tags import check_tags

M = TypeVar("M")


def _upload(m: TraceUploadModel) -> TraceUploadRow:
    return TraceUploadRow(id=m.id, hardware_id=m.hardware_id, filename=m.filename, format=m.format,
                          size_bytes=m.size_bytes, sha256=m.sha256, status=m.status, error=m.error,
                          kernel_count=m.kernel_count, created_at=m.created_at,
                          tags={t.key: t.value for t in m.tags})


def _calibration(m: CalibrationModel) -> CalibrationRow:
    return CalibrationRow(id=m.id, hardware_id=m.hardware_id, created_at=m.created_at, params=as_dict(m.params),
                          fit_report=as_dict(m.fit_report), notes=m.notes)


def _check_count(field: str, value: int | None, maximum: int = ID_MAX) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum):
        raise StoreError(f"{field}: expected an integer from 0 to {maximum}, got {value!r}")


def _where_hardware(stmt: Select[M], column: InstrumentedAttribute[str], hardware_id: str | None,
                    ) -> Select[M]:
    if hardware_id is None:
        return stmt
    return stmt.where(column == hardware_id if storable(hardware_id) else false())


class TracesRepo(StoreBase):
    def add_trace_upload(self, hardware_id: str, filename: str, format: str, size_bytes: int, sha256: str,
                         status: str = "received", error: str | None = None,
                         kernel_count: int | None = None, tags: Mapping[str, str] | None = None) -> int:
        check_str("hardware_id", hardware_id, 80)
        check_str("filename", filename, 255)
        check_str("format", format, 40)
        _check_count("size_bytes", size_bytes, OFFSET_MAX)
        check_str("sha256", sha256, 64)
        check_str("status", status, 20)
        check_str("error", error, 10**6, optional=True, empty=True)
        _check_count("kernel_count", kernel_count)
        checked = check_tags(tags or {})
        with self._write("trace upload not stored") as session:
            model = TraceUploadModel(hardware_id=hardware_id, filename=filename, format=format,
                                     size_bytes=size_bytes, sha256=sha256, status=status, error=error,
                                     kernel_count=kernel_count,
                                     tags=[TraceUploadTagModel(key=k, value=v) for k, v in checked.items()])
            session.add(model)
            session.flush()
            return model.id

    def update_trace_upload(self, upload_id: int, status: str, error: str | None = None,
                            kernel_count: int | None = None) -> None:
        """Record how parsing went; ``NotFound`` if there is no such upload."""
        check_str("status", status, 20)
        check_str("error", error, 10**6, optional=True, empty=True)
        _check_count("kernel_count", kernel_count)
        if not is_id(upload_id):
            raise NotFound(f"no trace upload {upload_id!r}")
        with self._write() as session:
            result = session.execute(update(TraceUploadModel).where(TraceUploadModel.id == upload_id)
                                     .values(status=status, error=error, kernel_count=kernel_count))
            if not getattr(result, "rowcount", 0):
                raise NotFound(f"no trace upload {upload_id}")

    def get_trace_upload(self, upload_id: int) -> TraceUploadRow | None:
        if not is_id(upload_id):
            return None
        with self._read() as session:
            model = session.get(TraceUploadModel, upload_id)
            return None if model is None else _upload(model)

    def list_trace_uploads(self, hardware_id: str | None = None) -> list[TraceUploadRow]:
        stmt = _where_hardware(select(TraceUploadModel).order_by(TraceUploadModel.id), TraceUploadModel.hardware_id,
                               hardware_id)
        with self._read() as session:
            return [_upload(m) for m in session.scalars(stmt)]

    def add_calibration(self, hardware_id: str, params: dict[str, Any], fit_report: dict[str, Any],
                        notes: str | None = None) -> int:
        check_str("hardware_id", hardware_id, 80)
        check_json("params", params)
        check_json("fit_report", fit_report)
        check_str("notes", notes, 10**6, optional=True, empty=True)
        with self._write("calibration not stored") as session:
            model = CalibrationModel(hardware_id=hardware_id, params=params, fit_report=fit_report, notes=notes)
            session.add(model)
            session.flush()
            return model.id

    def get_calibration(self, calibration_id: int) -> CalibrationRow | None:
        if not is_id(calibration_id):
            return None
        with self._read() as session:
            model = session.get(CalibrationModel, calibration_id)
            return None if model is None else _calibration(model)

    def latest_calibration(self, hardware_id: str) -> CalibrationRow | None:
        """The newest calibration of a device (by time, then id), or None."""
        stmt = _where_hardware(select(CalibrationModel), CalibrationModel.hardware_id, hardware_id)
        stmt = stmt.order_by(CalibrationModel.created_at.desc(), CalibrationModel.id.desc()).limit(1)
        with self._read() as session:
            model = session.scalar(stmt)
            return None if model is None else _calibration(model)

    def list_calibrations(self, hardware_id: str | None = None) -> list[CalibrationRow]:
        stmt = _where_hardware(select(CalibrationModel).order_by(CalibrationModel.id), CalibrationModel.hardware_id,
                               hardware_id)
        with self._read() as session:
            return [_calibration(m) for m in session.scalars(stmt)]
