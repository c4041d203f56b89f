"""Persistence: custom hardware, measured runs, API tokens, trace uploads, calibrations and jobs (SQLite or
PostgreSQL through SQLAlchemy 2; the schema comes from the Alembic migrations in ``migrations/``)."""

from perfmodel.store.errors import NotFound, StoreError
from perfmodel.store.jobs_repo import JobRow
from perfmodel.store.migrate import MIGRATIONS_DIR, migrations_config
from perfmodel.store.rows import (
    CalibrationRow,
    HardwareRow,
    RunIn,
    RunRow,
    SweepRow,
    TokenRow,
    TraceKernelIn,
    TraceKernelRow,
    TraceTotals,
    TraceUploadRow,
)
from perfmodel.store.store import Store

__all__ = [
    "MIGRATIONS_DIR",
    "CalibrationRow",
    "HardwareRow",
    "JobRow",
    "NotFound",
    "RunIn",
    "RunRow",
    "Store",
    "StoreError",
    "SweepRow",
    "TokenRow",
    "TraceKernelIn",
    "TraceKernelRow",
    "TraceTotals",
    "TraceUploadRow",
    "migrations_config",
]
