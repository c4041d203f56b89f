"""SQLAlchemy models. The schema itself is created only by the Alembic migrations; ``alembic check`` keeps
these models and the migrations identical. Times are SI seconds; every timestamp is timezone-aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    func,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """``DateTime(timezone=True)`` that always stores and returns aware UTC (SQLite keeps no zone: naive = UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _created_at(index: bool = False) -> Mapped[datetime]:
    return mapped_column(UTCDateTime(), nullable=False, default=utcnow, server_default=func.now(), index=index)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class HardwareModel(Base):
    __tablename__ = "hardware"

    id: Mapped[str] = mapped_column(String(80), primary_key=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    derived_from: Mapped[str | None] = mapped_column(String(80))
    content_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    created_at: Mapped[datetime] = _created_at()


class RunModel(Base):
    __tablename__ = "runs"
    __table_args__ = (CheckConstraint("measured_time_s > 0", name="ck_runs_measured_time_s_positive"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    hardware_id: Mapped[str] = mapped_column(String(80), nullable=False, index=True)
    op_kind: Mapped[str] = mapped_column(String(40), nullable=False, index=True)
    dtype: Mapped[str | None] = mapped_column(String(16), index=True)
    op: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    measured_time_s: Mapped[float] = mapped_column(Float, nullable=False)
    source: Mapped[str] = mapped_column(String(200), nullable=False, index=True)
    created_at: Mapped[datetime] = _created_at(index=True)
    trace_upload_id: Mapped[int | None] = mapped_column(
        Integer, ForeignKey("trace_uploads.id", ondelete="SET NULL"), index=True)

    tags: Mapped[list[RunTagModel]] = relationship(
        lazy="selectin", cascade="all, delete-orphan", passive_deletes=True, order_by="RunTagModel.key")


class RunTagModel(Base):
    __tablename__ = "run_tags"
    __table_args__ = (Index("ix_run_tags_key_value", "key", "value"),)

    run_id: Mapped[int] = mapped_column(Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(String(400), nullable=False)


class TokenModel(Base):
    __tablename__ = "api_tokens"
    __table_args__ = (
        # names are unique among active (not revoked) tokens only
        Index("uq_api_tokens_active_name", "name", unique=True,
              sqlite_where="revoked_at IS NULL", postgresql_where="revoked_at IS NULL"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(100), nullable=False)
    token_sha256: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    created_at: Mapped[datetime] = _created_at()
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


PARSED_TRACE_INDEX = "uq_trace_uploads_parsed_hardware_id_sha256"


class TraceUploadModel(Base):
    __tablename__ = "trace_uploads"
    __table_args__ = (
        CheckConstraint("size_bytes >= 0", name="ck_trace_uploads_size_bytes_nonnegative"),
        # one parsed trace per (device, content): concurrent uploads of one file store it once; failed
        # uploads are a log of attempts and may repeat
        Index(PARSED_TRACE_INDEX, "hardware_id", "sha256", unique=True,
              sqlite_where=text("status = 'parsed'"), postgresql_where=text("status = 'parsed'")),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    hardware_id: Mapped[str] = mapped_column(String(80), nullable=False, index=True)
    filename: Mapped[str] = mapped_column(String(255), nullable=False)
    format: Mapped[str] = mapped_column(String(40), nullable=False)
    size_bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    sha256: Mapped[str] = mapped_column(String(64), nullable=False, index=True)
    status: Mapped[str] = mapped_column(String(20), nullable=False)
    error: Mapped[str | None] = mapped_column(Text)
    kernel_count: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = _created_at()

    tags: Mapped[list[TraceUploadTagModel]] = relationship(
        lazy="selectin", cascade="all, delete-orphan", passive_deletes=True, order_by="TraceUploadTagModel.key")


class TraceUploadTagModel(Base):
    """A tag of a trace upload (commit, driver / library versions, clocks, environment: ``perfmodel.store.tags``)."""

    __tablename__ = "trace_upload_tags"
    __table_args__ = (Index("ix_trace_upload_tags_key_value", "key", "value"),)

    trace_upload_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("trace_uploads.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(String(400), nullable=False)


class CalibrationModel(Base):
    __tablename__ = "calibrations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    hardware_id: Mapped[str] = mapped_column(String(80), nullable=False, index=True)
    created_at: Mapped[datetime] = _created_at()
    params: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    fit_report: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    notes: Mapped[str | None] = mapped_column(Text)


class TraceKernelModel(Base):
    __tablename__ = "trace_kernels"
    __table_args__ = (CheckConstraint("duration_s >= 0", name="ck_trace_kernels_duration_s_nonnegative"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    trace_upload_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("trace_uploads.id", ondelete="CASCADE"), nullable=False, index=True)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    category: Mapped[str] = mapped_column(String(20), nullable=False)
    duration_s: Mapped[float] = mapped_column(Float, nullable=False)
    instances: Mapped[int] = mapped_column(Integer, nullable=False)
    op_name: Mapped[str | None] = mapped_column(String(200))
    op_kind: Mapped[str | None] = mapped_column(String(40))
    run_id: Mapped[int | None] = mapped_column(Integer, ForeignKey("runs.id", ondelete="SET NULL"))
    reason: Mapped[str | None] = mapped_column(Text)
    counters: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)


class SweepModel(Base):
    __tablename__ = "sweeps"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[datetime] = _created_at()
    spec: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    results: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)


JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled", "interrupted")


class JobModel(Base):
    """Long work (a calibration fit): queued, run by a worker pool, its progress and result stored here."""

    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint("status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')",
                        name="ck_jobs_status_known"),
        CheckConstraint("progress >= 0 AND progress <= 1", name="ck_jobs_progress_fraction"),
        Index("ix_jobs_kind_status", "kind", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(40), nullable=False)
    status: Mapped[str] = mapped_column(String(20), nullable=False)
    stage: Mapped[str | None] = mapped_column(String(80))
    progress: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    request: Mapped[dict[str, Any]] = mapped_column(JSON, nullable=False)
    result_id: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    owner: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = _created_at()
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
