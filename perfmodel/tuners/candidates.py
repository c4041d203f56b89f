"""Explicit schedules as columns: which fields each op family takes, defaults, per-candidate checks.

A GEMM-like op (matmul, bmm, linear, conv as implicit GEMM) takes ``tile_m``, ``tile_n``, ``tile_k``
(elements) and optionally ``stages`` (2: double buffering), ``split_k`` (1), ``group_m`` (1: the raster
group of output tile-rows) and ``warps``; attention takes ``tile_q``, ``tile_kv`` and optionally
``stages`` (2), ``split_kv`` (1) and ``warps``. A malformed request (a missing or unknown column,
columns of different lengths, nothing to rank) raises ``ScheduleError``; a candidate with a zero,
negative or fractional size is kept and gets its own reason. An optional field left null takes its default.

Warps bound occupancy on GPUs: a CTA of ``warps`` x warp-size threads leaves room for
⌊resident threads per unit / threads⌋ CTAs, and its fp32 accumulators (BM·BN, or BQ·(BKV + dv) for
attention) are spread over its threads: more than a thread's registers hold and they spill.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.hardware import Hardware
from perfmodel.ops.base import FloatArray

GEMM_REQUIRED = ("tile_m", "tile_n", "tile_k")
GEMM_DEFAULTS = {"stages": 2.0, "split_k": 1.0, "group_m": 1.0, "warps": np.nan}
ATTENTION_REQUIRED = ("tile_q", "tile_kv")
ATTENTION_DEFAULTS = {"stages": 2.0, "split_kv": 1.0, "warps": np.nan}
FAMILIES = {"gemm": (GEMM_REQUIRED, GEMM_DEFAULTS), "attention": (ATTENTION_REQUIRED, ATTENTION_DEFAULTS)}

# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": warp size 32,
# 1024 threads per block, 255 32-bit registers per thread (cc 3.5 onwards). AMD CDNA (HIP
# programming guide / CDNA ISA): wavefront 64, 1024 threads per block, 512 VGPRs + AGPRs per lane.
WARP_SIZE_BY_VENDOR = {"nvidia": 32, "amd": 64}
MAX_REGISTERS_PER_THREAD_BY_VENDOR = {"nvidia": 255, "amd": 512}
MAX_THREADS_PER_BLOCK = 1024


class ScheduleError(ValueError):
    """A malformed ranking request: names the field and the reason."""

    def __init__(self, field_name: str, reason: str) -> None:
        super().__init__(f"{field_name}: {reason}")
        self.field_name = field_name
        self.reason = reason


@dataclass(frozen=True)
class Candidates:
    """The columns of one family, defaults filled (float64, one element per candidate), and the
    reason each candidate cannot be costed ('' where it can)."""

    family: str
    columns: dict[str, FloatArray]
    input_reason: list[str]

    @property
    def size(self) -> int:
        return len(self.input_reason)


def parse_candidates(family: str, raw: Mapping[str, Sequence[float] | FloatArray]) -> Candidates:
    """Columns of ``raw`` checked against ``family``'s fields; per-candidate size checks."""
    required, defaults = FAMILIES[family]
    known = (*required, *defaults)
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ScheduleError(f"candidates.{unknown[0]}", f"not a {family} schedule field (known: {', '.join(known)})")
    missing = [name for name in required if name not in raw]
    if missing:
        raise ScheduleError(f"candidates.{missing[0]}", f"required for a {family} op (required: {', '.join(required)})")
    columns: dict[str, FloatArray] = {}
    for name in known:
        if name in raw:
            try:
                columns[name] = np.asarray(raw[name], dtype=np.float64).reshape(-1)
            except (TypeError, ValueError) as exc:
                raise ScheduleError(f"candidates.{name}", f"must be numbers ({exc})") from exc
    sizes = {name: col.size for name, col in columns.items()}
    count = sizes[required[0]]
    if count == 0:
        raise ScheduleError("candidates", "no candidates to rank")
    uneven = [name for name, size in sizes.items() if size != count]
    if uneven:
        raise ScheduleError(f"candidates.{uneven[0]}", f"{sizes[uneven[0]]} values, {required[0]} has {count}")
    for name, value in defaults.items():  # absent, or null in a column: the default
        columns[name] = np.where(np.isnan(columns[name]), value, columns[name]) if name in columns else np.full(
            count, value)
    return Candidates(family, columns, _input_reasons(columns, required, count))


def _input_reasons(columns: dict[str, FloatArray], required: tuple[str, ...], count: int) -> list[str]:
    reasons = [""] * count
    for name, col in columns.items():
        if name == "warps":
            bad = ~np.isnan(col) & ~((col >= 1) & (col == np.round(col)) & _power_of_two(col))
            what = "a power of two"
        else:
            bad = ~(np.isfinite(col) & (col >= 1) & (col == np.round(col)))
            what = "a positive integer"
        for i in np.nonzero(bad)[0]:
            if not reasons[i]:
                reasons[i] = f"{name} must be {what} (got {col[i]:g})"
    return reasons


def _power_of_two(col: FloatArray) -> np.ndarray[Any, np.dtype[np.bool_]]:
    safe = np.where(np.isfinite(col) & (col >= 1), col, 3.0)
    return np.asarray(np.log2(safe) == np.round(np.log2(safe)))


def threads_per_block(hw: Hardware, warps: FloatArray) -> FloatArray | None:
    """Threads of each candidate's CTA, or None where the device has no warps we know of."""
    size = WARP_SIZE_BY_VENDOR.get(hw.vendor.lower())
    if hw.kind != "gpu" or size is None:
        return None
    out: FloatArray = warps * size
    return out


def warp_reasons(hw: Hardware, warps: FloatArray, accumulators: FloatArray) -> list[str]:
    """Per candidate: '' or why its warps cannot run it (too many threads, accumulators spilling).
    ``accumulators``: fp32 values a CTA keeps in registers."""
    threads = threads_per_block(hw, warps)
    reasons = [""] * warps.size
    if threads is None:
        return reasons
    limit = MAX_REGISTERS_PER_THREAD_BY_VENDOR[hw.vendor.lower()]
    with np.errstate(invalid="ignore", divide="ignore"):
        per_thread = np.ceil(accumulators / threads)
    for i in np.nonzero(threads > MAX_THREADS_PER_BLOCK)[0]:
        reasons[i] = f"{warps[i]:g} warps = {threads[i]:g} threads, more than the {MAX_THREADS_PER_BLOCK} a block holds"
    for i in np.nonzero(per_thread > limit)[0]:
        if not reasons[i]:
            reasons[i] = (f"{accumulators[i]:g} fp32 accumulators over {threads[i]:g} threads = {per_thread[i]:g} "
                          f"registers per thread, more than the {limit} a thread holds: they spill")
    return reasons


def occupancy_cap(hw: Hardware, max_resident_tiles: int, resident_threads_per_unit: int, warps: float) -> int:
    """Tiles one unit holds at once when each CTA has ``warps`` warps (nan: the device's own cap)."""
    size = WARP_SIZE_BY_VENDOR.get(hw.vendor.lower())
    if np.isnan(warps) or size is None or hw.kind != "gpu":
        return max_resident_tiles
    return max(1, min(max_resident_tiles, int(resident_threads_per_unit // (warps * size))))
