"""Jobs: long work queued in the store, claimed by a bounded worker pool, its progress and result recorded.

A job moves ``queued -> running -> succeeded | failed``; ``cancelled`` and ``interrupted`` end it from
``queued`` or ``running``. Every change of state is one conditional UPDATE (``WHERE status IN ...``), so a job
that was cancelled while it ran is never marked succeeded, and its calibration is never stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from perfmodel.store.base import StoreBase, as_dict, check_json, check_limit_offset, check_str, is_id, storable
from perfmodel.store.models import JOB_STATUSES, CalibrationModel, JobModel, utcnow

ACTIVE = ("queued", "running")
PG_CLAIM_LOCK = 0x6A6F_6273  # pg_advisory_xact_lock key: one claimer at a time ("jobs")


@dataclass(frozen=True)
class JobRow:
    id: int
    kind: str
    status: str
    stage: str | None
    progress: float
    request: dict[str, Any]
    result_id: int | None
    error: str | None
    owner: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None

    @property
    def done(self) -> bool:
        return self.status not in ACTIVE


def _job(m: JobModel) -> JobRow:
    return JobRow(id=m.id, kind=m.kind, status=m.status, stage=m.stage, progress=m.progress,
                  request=as_dict(m.request), result_id=m.result_id, error=m.error, owner=m.owner,
                  created_at=m.created_at, started_at=m.started_at, finished_at=m.finished_at,
                  heartbeat_at=m.heartbeat_at)


def _check_status(status: str) -> None:
    if status not in JOB_STATUSES:
        raise ValueError(f"status: {status!r} is not one of {', '.join(JOB_STATUSES)}")


class JobsRepo(StoreBase):
    def add_job(self, kind: str, request: dict[str, Any], owner: str) -> int:
        """A new queued job owned by ``owner`` (the pool that will run it)."""
        check_str("kind", kind, 40)
        check_json("request", request)
        check_str("owner", owner, 200)
        with self._write("job not stored") as session:
            model = JobModel(kind=kind, status="queued", progress=0.0, request=request, owner=owner,
                             heartbeat_at=utcnow())
            session.add(model)
            session.flush()
            return model.id

    def get_job(self, job_id: int) -> JobRow | None:
        if not is_id(job_id):
            return None
        with self._read() as session:
            model = session.get(JobModel, job_id)
            return None if model is None else _job(model)

    def list_jobs(self, kind: str | None = None, status: str | None = None, limit: int = 100,
                  offset: int = 0) -> list[JobRow]:
        """Newest first."""
        check_limit_offset(limit, offset)
        stmt = select(JobModel)
        if kind is not None:
            stmt = stmt.where(JobModel.kind == kind if storable(kind) else JobModel.id < 0)
        if status is not None:
            _check_status(status)
            stmt = stmt.where(JobModel.status == status)
        with self._read() as session:
            return [_job(m) for m in session.scalars(stmt.order_by(JobModel.id.desc()).limit(limit).offset(offset))]

    def count_jobs(self, kind: str, statuses: Iterable[str] = ACTIVE) -> int:
        with self._read() as session:
            stmt = select(func.count()).select_from(JobModel).where(JobModel.kind == kind,
                                                                   JobModel.status.in_(tuple(statuses)))
            return int(session.scalar(stmt) or 0)

    def claim_job(self, job_id: int, owner: str, max_running: int) -> bool | None:
        """Start ``job_id`` if fewer than ``max_running`` jobs of its kind run (in every process sharing the
        store): True if it now runs, False if it must wait, None if it is no longer queued."""
        with self._write() as session:
            if self.dialect == "postgresql":
                session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_CLAIM_LOCK})
            model = session.get(JobModel, job_id)
            if model is None or model.status != "queued":
                return None
            running = session.scalar(select(func.count()).select_from(JobModel).where(
                JobModel.kind == model.kind, JobModel.status == "running")) or 0
            if running >= max_running:
                return False
            now = utcnow()
            model.status, model.stage, model.owner, model.started_at, model.heartbeat_at = (
                "running", "starting", owner, now, now)
            return True

    def _set(self, session: Session, job_id: int, statuses: tuple[str, ...], **values: Any) -> bool:
        result = session.execute(update(JobModel).where(JobModel.id == job_id, JobModel.status.in_(statuses))
                                 .values(**values))
        return bool(getattr(result, "rowcount", 0))

    def report_progress(self, job_id: int, stage: str, fraction: float) -> bool:
        """Record a running job's stage and progress (0..1); False when it no longer runs (cancelled)."""
        check_str("stage", stage, 80)
        fraction = min(max(float(fraction), 0.0), 1.0)
        with self._write() as session:
            return self._set(session, job_id, ("running",), stage=stage, progress=fraction, heartbeat_at=utcnow())

    def beat(self, job_ids: Iterable[int]) -> None:
        """The owner is alive: refresh the heartbeat of these queued or running jobs."""
        ids = [i for i in job_ids if is_id(i)]
        if ids:
            with self._write() as session:
                session.execute(update(JobModel).where(JobModel.id.in_(ids), JobModel.status.in_(ACTIVE))
                                .values(heartbeat_at=utcnow()))

    def finish_job(self, job_id: int, status: str, error: str | None = None) -> bool:
        """End a queued or running job as ``failed``, ``cancelled`` or ``interrupted`` (with ``error``, the
        reason); False if it had already ended."""
        if status not in ("failed", "cancelled", "interrupted"):
            raise ValueError(f"status: a job ends here as failed, cancelled or interrupted, not {status!r}")
        check_str("error", error, 10**5, optional=True, empty=True)
        with self._write() as session:
            return self._set(session, job_id, ACTIVE, status=status, error=error, finished_at=utcnow())

    def cancel_job(self, job_id: int) -> JobRow | None:
        """Cancel a queued or running job (a finished one stays as it was); the job, or None if unknown."""
        if not is_id(job_id):
            return None
        self.finish_job(job_id, "cancelled", "cancelled by a request")
        return self.get_job(job_id)

    def finish_calibration_job(self, job_id: int, hardware_id: str, params: dict[str, Any],
                               fit_report: dict[str, Any], notes: str | None) -> int | None:
        """Store the fitted calibration and mark the job succeeded, in one transaction; None (nothing stored)
        when the job no longer runs (cancelled or interrupted meanwhile)."""
        check_str("hardware_id", hardware_id, 80)
        check_json("params", params)
        check_json("fit_report", fit_report)
        check_str("notes", notes, 10**6, optional=True, empty=True)
        with self._write("calibration not stored") as session:
            model = session.scalar(select(JobModel).where(JobModel.id == job_id).with_for_update())
            if model is None or model.status != "running":
                return None
            calibration = CalibrationModel(hardware_id=hardware_id, params=params, fit_report=fit_report,
                                           notes=notes)
            session.add(calibration)
            session.flush()
            model.status, model.stage, model.progress, model.result_id, model.finished_at = (
                "succeeded", "done", 1.0, calibration.id, utcnow())
            return calibration.id

    def active_owners(self) -> set[str]:
        """The owners of queued or running jobs."""
        with self._read() as session:
            stmt = select(JobModel.owner).where(JobModel.status.in_(ACTIVE)).distinct()
            return {o for o in session.scalars(stmt) if o is not None}

    def interrupt_jobs(self, reason: str, *, owners: Iterable[str] = (), stale_after_s: float | None = None) -> int:
        """Mark ``interrupted`` (with ``reason``) the queued or running jobs of ``owners``, and those whose
        heartbeat is older than ``stale_after_s``; how many."""
        owners = list(owners)
        count = 0
        with self._write() as session:
            if owners:
                result = session.execute(update(JobModel).where(JobModel.status.in_(ACTIVE),
                                                                JobModel.owner.in_(owners))
                                         .values(status="interrupted", error=reason, finished_at=utcnow()))
                count += int(getattr(result, "rowcount", 0))
            if stale_after_s is not None:
                cutoff = utcnow() - timedelta(seconds=stale_after_s)
                result = session.execute(update(JobModel).where(JobModel.status.in_(ACTIVE),
                                                                JobModel.heartbeat_at < cutoff)
                                         .values(status="interrupted", error=reason, finished_at=utcnow()))
                count += int(getattr(result, "rowcount", 0))
        return count
