"""Request and response bodies of POST /schedules/rank (kept beside, not inside, the shared schemas)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ModelWrapValidatorHandler, PrivateAttr, model_validator
from typing_extensions import TypedDict

from api.schedule_columns import gather_candidates
from api.schemas import OpJson, Versioned

MAX_CANDIDATES = 100_000


class ScheduleCandidate(TypedDict, total=False):
    """One schedule. GEMM-like ops: tile_m, tile_n, tile_k (elements) required; attention: tile_q, tile_kv.
    A zero, negative or fractional size is not a 422: that candidate is ranked null with its reason.
    (A TypedDict, not a model: 10,000 of them validate in about half the time.)"""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]
    tile_m: Annotated[float | None, Field(description="GEMM: output rows per CTA / tile (BLOCK_M)")]
    tile_n: Annotated[float | None, Field(description="GEMM: output columns per tile (BLOCK_N)")]
    tile_k: Annotated[float | None, Field(description="GEMM: K elements per pipeline step (BLOCK_K)")]
    tile_q: Annotated[float | None, Field(description="attention: query rows per tile")]
    tile_kv: Annotated[float | None, Field(description="attention: keys per KV tile")]
    stages: Annotated[float | None, Field(description="pipeline buffers (1: none, 2: double); default 2")]
    split_k: Annotated[float | None, Field(description="GEMM: K split over CTAs; default 1")]
    split_kv: Annotated[float | None, Field(description="attention: KV split (flash-decoding); default 1")]
    group_m: Annotated[float | None, Field(description="GEMM: raster group of tile rows (GROUP_M); default 1")]
    warps: Annotated[float | None, Field(description="warps per CTA (a power of two); null: not bounded")]


CANDIDATE_FIELDS = tuple(ScheduleCandidate.__annotations__)


class RankRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hardware: str
    op: OpJson = Field(description="the op, as for /predict: GEMM-like (matmul, bmm, linear, conv) or attention")
    candidates: list[ScheduleCandidate] | None = Field(
        default=None, max_length=MAX_CANDIDATES, description="the schedules as objects (give this or columns)")
    columns: dict[str, list[float | None]] | None = Field(
        default=None, description="the schedules as one array per field, e.g. {'tile_m': [...], ...}: faster to "
                                  "send and parse for large batches (give this or candidates); null: the default")
    layout: Literal["rows", "columns"] = Field(
        default="rows", description="rows: one object per candidate; columns: one array per field")
    _gathered: dict[str, list[Any]] | None = PrivateAttr(default=None)

    @model_validator(mode="wrap")
    @classmethod
    def _batch(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """Candidate objects of known fields and number-or-null values are checked as a batch and kept per
        field (``gathered``); anything else is validated candidate by candidate (api.schedule_columns)."""
        gathered = gather_candidates(data, CANDIDATE_FIELDS, MAX_CANDIDATES)
        if gathered is None:
            return handler(data)
        request = handler({key: value for key, value in data.items() if key != "candidates"})
        request.candidates = data["candidates"]  # checked above: objects of known fields, numbers or null
        request._gathered = gathered
        return request

    @property
    def gathered(self) -> dict[str, list[Any]] | None:
        """The candidates' values per field where the batch check accepted them, else None."""
        return self._gathered


class RankedCandidate(BaseModel):
    index: int = Field(description="position in the request")
    rank: int | None = Field(description="1 = fastest; null: the candidate cannot run (see reason)")
    time_s: float | None = Field(description="predicted kernel time, s (the search engine's candidate cost)")
    bound: str | None = Field(description="what bounds it: compute, the DRAM level or the last-level cache")
    waves: float | None = Field(description="tiles / (units x tiles resident per unit)")
    tiles: float | None
    resident: float | None = Field(description="tiles resident per unit at once")
    footprint_bytes: float | None = Field(description="on-chip (SMEM / scratchpad) bytes per tile")
    reason: str


class RankOut(Versioned):
    hardware_id: str
    hardware_hash: str
    family: Literal["gemm", "attention"]
    problem: dict[str, float] = Field(description="the sizes the schedules are costed for")
    sram_bytes_per_unit: float = Field(description="scratchpad (SMEM) bytes of one unit")
    count: int
    valid: int
    order: list[int] = Field(description="indices of the runnable candidates, fastest first")
    results: list[RankedCandidate] | None = None
    columns: dict[str, list[float | int | str | None]] | None = None
