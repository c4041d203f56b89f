"""What the store takes and returns: frozen dataclasses, never ORM objects (they outlive the session)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class RunIn:
    """One measured run to store. ``op`` is the canonical op dict and must contain ``kind``."""

    hardware_id: str
    op: dict[str, Any]
    measured_time_s: float
    source: str
    tags: dict[str, str] = field(default_factory=dict)
    dtype: str | None = None
    trace_upload_id: int | None = None


@dataclass(frozen=True)
class RunRow:
    id: int
    hardware_id: str
    op_kind: str
    dtype: str | None
    op: dict[str, Any]
    measured_time_s: float
    source: str
    tags: dict[str, str]
    created_at: datetime
    trace_upload_id: int | None = None


@dataclass(frozen=True)
class HardwareRow:
    """A custom device or what-if variant saved by a user (bundled specs are not stored)."""

    id: str
    spec: dict[str, Any]
    derived_from: str | None
    content_hash: str
    created_at: datetime


@dataclass(frozen=True)
class TokenRow:
    """An API token; the plaintext is never stored, only its SHA-256."""

    id: int
    name: str
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True)
class TraceUploadRow:
    id: int
    hardware_id: str
    filename: str
    format: str
    size_bytes: int
    sha256: str
    status: str
    error: str | None
    kernel_count: int | None
    created_at: datetime
    tags: dict[str, str] = field(default_factory=dict)  # commit, environment, versions, clocks (store.tags)


@dataclass(frozen=True)
class CalibrationRow:
    id: int
    hardware_id: str
    created_at: datetime
    params: dict[str, Any]
    fit_report: dict[str, Any]
    notes: str | None


@dataclass(frozen=True)
class TraceKernelIn:
    """A kernel of an uploaded trace (``instances`` launches, ``duration_s`` their total), matched to a run
    (``run_index`` into the runs stored with it) or not."""

    name: str
    category: str
    duration_s: float
    instances: int = 1
    op_name: str | None = None
    op_kind: str | None = None
    run_index: int | None = None
    counters: dict[str, float] = field(default_factory=dict)
    reason: str | None = None  # why it is unmodelled


@dataclass(frozen=True)
class TraceKernelRow:
    id: int
    trace_upload_id: int
    name: str
    category: str
    duration_s: float
    instances: int
    op_name: str | None
    op_kind: str | None
    run_id: int | None
    counters: dict[str, Any]
    reason: str | None = None


@dataclass(frozen=True)
class TraceTotals:
    """An upload's kernels summed: launches, time (s), the time matched to runs (s), matched runs."""

    kernels: int
    total_s: float
    matched_s: float
    matched_runs: int

    @property
    def unmodelled_share(self) -> float:
        return (self.total_s - self.matched_s) / self.total_s if self.total_s > 0 else 0.0


@dataclass(frozen=True)
class SweepRow:
    id: int
    name: str
    created_at: datetime
    spec: dict[str, Any]
    results: dict[str, Any]
