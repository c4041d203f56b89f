"""Request and response bodies of the REST API (separate from the database models)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from perfmodel import __version__
from perfmodel.store.base import MAX_RUN_TIME_S, storable

OpJson = dict[str, Any]


class Versioned(BaseModel):
    model_version: str = __version__


class HardwareSummary(BaseModel):
    id: str
    name: str
    vendor: str
    kind: str
    units: int
    origin: Literal["bundled", "custom"]
    content_hash: str


class HardwareList(Versioned):
    items: list[HardwareSummary]


class HardwareDetail(Versioned):
    id: str
    origin: Literal["bundled", "custom"]
    content_hash: str
    spec: dict[str, Any]


class VariantRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    base: str = Field(description="Id of the device to start from")
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=80)
    overrides: dict[str, Any] = Field(description='e.g. {"levels.dram.bandwidth_bytes_per_s": "x1.5"}')


class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hardware: str
    op: OpJson
    calibration: str | int | None = None
    timing: Literal["kernel", "host"] = "kernel"
    warm_cache: bool = False


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hardware: str
    ops: list[OpJson]
    timing: Literal["kernel", "host"] = "kernel"
    warm_cache: bool = False
    space: Literal["compact", "full"] = "compact"
    calibration: str | int | None = Field(default=None, description="a calibration id, 'latest' or null")
    layout: Literal["rows", "columns"] = Field(
        default="rows", description="rows: one Cost object per op; columns: one array per field (faster to "
                                    "produce and to read for large batches)")


class CostOut(BaseModel):
    """A prediction: time, bound and breakdown (SI units) with its provenance."""

    time_s: float
    bound: str
    op_kind: str
    hardware_id: str
    hardware_hash: str
    flops: float
    flops_by_engine: dict[str, float]
    bytes_by_level: dict[str, float]
    time_s_by_level: dict[str, float]
    time_s_by_engine: dict[str, float]
    overhead_s: float
    intensity_flops_per_byte: float | None
    attained_flops_per_s: float
    utilization: float
    schedule: dict[str, Any]
    notes: list[str]
    interval_s: list[float] | None = None
    in_calibrated_range: bool | None = None
    uncalibrated_interval_s: list[float] | None = Field(
        default=None, description="uncalibrated: 10-90 % interval from the op class's leave-one-device-out "
        "residuals (null once a calibration gives interval_s)")
    calibration: str | int | None = None
    model_version: str = __version__


class CostColumns(BaseModel):
    """A batch's predictions as arrays in request order (SI units); absent schedule entries are 0."""

    time_s: list[float]
    bound: list[str]
    op_kind: list[str]
    flops: list[float]
    flops_by_engine: dict[str, list[float]]
    bytes_by_level: dict[str, list[float]]
    time_s_by_level: dict[str, list[float]]
    time_s_by_engine: dict[str, list[float]]
    overhead_s: list[float]
    intensity_flops_per_byte: list[float | None]
    attained_flops_per_s: list[float]
    utilization: list[float]
    schedule: dict[str, list[float]]
    notes: dict[str, list[str]] = Field(description="row index -> notes")
    interval_s: list[list[float | None]] | None = Field(
        default=None, description="calibrated: 10-90 % interval per op (null where the class has none)")
    in_calibrated_range: list[bool] | None = None
    uncalibrated_interval_s: list[list[float]] | None = Field(
        default=None, description="uncalibrated: 10-90 % interval per op from its class's leave-one-device-out "
        "residuals (null with a calibration)")


class BatchOut(Versioned):
    hardware_id: str
    hardware_hash: str
    calibration: int | None = Field(default=None, description="the calibration applied (null: none)")
    distinct_ops: int = Field(description="ops predicted after removing repeats")
    results: list[CostOut] | None = Field(default=None, description="layout=rows: one per op, in request order")
    columns: CostColumns | None = Field(default=None, description="layout=columns")


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hardware: str
    op: OpJson
    top_k: int = Field(default=5, ge=1, le=100)
    budget: int | None = Field(default=None, ge=1)
    seed: int = 0


class SearchOut(Versioned):
    op_kind: str
    hardware_id: str
    hardware_hash: str
    best: CostOut
    top_k: list[dict[str, float]]
    pareto: list[dict[str, float]]
    space_size: int
    evaluated: int
    pruned: int
    rejected: dict[str, int]
    search_time_s: float
    explanation: str
    notes: list[str]


def _storable_text(value: str) -> str:
    if not storable(value):
        raise ValueError("NUL characters and invalid UTF-8 (lone surrogates) are not allowed")
    return value


TagKey = Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_storable_text)]
TagValue = Annotated[str, Field(max_length=400), AfterValidator(_storable_text)]
Notes = Annotated[str, Field(max_length=10_000), AfterValidator(_storable_text)]


class RunCreate(BaseModel):
    """What the store can hold is checked here (422), not found out by the database (was 409 for a NUL)."""

    model_config = ConfigDict(extra="forbid")
    hardware: str
    op: OpJson
    measured_time_s: float = Field(gt=0, lt=MAX_RUN_TIME_S, allow_inf_nan=False)
    source: Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_storable_text)]
    tags: dict[TagKey, TagValue] = Field(default_factory=dict)


class RunOut(Versioned):
    id: int
    hardware: str
    op_kind: str
    dtype: str | None
    op: OpJson
    measured_time_s: float
    source: str
    tags: dict[str, str]
    created_at: datetime


class RunIds(Versioned):
    ids: list[int]


class RunPage(Versioned):
    items: list[RunOut]
    total: int
    limit: int
    offset: int


class ComparisonRow(BaseModel):
    run_id: int
    hardware: str
    op_kind: str
    source: str
    measured_time_s: float
    predicted_time_s: float
    error_percent: float
    bound: str
    calibration: int | None = None


class ComparisonSummary(BaseModel):
    op_kind: str
    count: int
    median_abs_error_percent: float
    p90_abs_error_percent: float
    bias_percent: float = Field(description="median signed error: > 0 means the model is slower")


class ComparisonsOut(Versioned):
    hardware: str | None
    calibration: str | int | None
    rows: list[ComparisonRow]
    summary: list[ComparisonSummary]


class ErrorOut(BaseModel):
    """Every error: what is wrong, and the field it concerns when there is one."""

    detail: str
    field: str | None = None
    model_version: str = __version__
