"""Roof alarm: a measured point above its roof means a wrong number somewhere, and says which.

For a kernel with measured FLOPs per dtype and bytes per memory level (Nsight Compute counters) or
a matched run (the op's model FLOPs and compulsory bytes), the attained FLOP/s is compared with
the dtype's peak and each level's bytes/s with that level's bandwidth, with a tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from perfmodel.dtypes import DType
from perfmodel.hardware import Hardware, MemoryLevel
from perfmodel.machine import tables
from perfmodel.ops import make_op
from perfmodel.ops.base import DTYPE_INDEX
from perfmodel.traces.matching import MatchedRun
from perfmodel.traces.op_text import op_key
from perfmodel.traces.records import KernelRecord

AlarmKind = Literal["wrong_peak", "wrong_bytes_level", "missing_flop_counter"]
DEFAULT_TOLERANCE = 0.05
COUNTER_DTYPES = {"flops_fp32": DType.FP32, "flops_fp64": DType.FP64, "flops_fp16": DType.FP16}
# matrix-core FLOPs counted per dtype (AMD MFMA MOPS), against the device's matrix peaks
MATRIX_COUNTER_DTYPES = {"matrix_flops_fp16": DType.FP16, "matrix_flops_bf16": DType.BF16,
                         "matrix_flops_fp32": DType.FP32, "matrix_flops_fp64": DType.FP64,
                         "matrix_flops_fp8": DType.FP8_E4M3, "matrix_flops_int8": DType.INT8}


@dataclass(frozen=True)
class RoofAlarm:
    """One measured rate above its roof (``ratio`` = attained / roof > 1 + tolerance)."""

    name: str
    quantity: str  # 'flops_fp32', 'dram_bytes', 'matrix_flops' ...
    attained_per_s: float
    roof_per_s: float
    kind: AlarmKind
    reason: str

    @property
    def ratio(self) -> float:
        return self.attained_per_s / self.roof_per_s


def counter_levels(hw: Hardware) -> dict[str, MemoryLevel | None]:
    """The device's level behind each byte counter: DRAM, its last-level cache, the per-unit L1/shared memory."""
    machine = tables(hw)
    inner = next((lv for lv in hw.levels if lv.per_unit and lv.kind in ("cache", "scratchpad")), None)
    return {"dram_bytes": machine.dram, "l2_bytes": machine.llc, "l1_bytes": inner}


def has_roof(hw: Hardware, level: MemoryLevel) -> bool:
    """A level with a bandwidth figure (or the LLC, whose default is a multiple of DRAM's) has a roof."""
    return bool(level.bandwidth_bytes_per_s) or level is tables(hw).llc


def vector_peak(hw: Hardware, dtype: DType) -> float | None:
    """The SIMT peak of ``dtype`` in FLOP/s (the matrix one where the spec has no vector figure)."""
    return hw.peak_flops_per_s(dtype, "vector") or hw.peak_flops_per_s(dtype, "matrix")


def _bytes_alarm(hw: Hardware, name: str, key: str, level: MemoryLevel, rate: float,
                 tolerance: float, model_bytes: bool) -> RoofAlarm | None:
    roof = tables(hw).bandwidth_bytes_per_s(level)
    if rate <= roof * (1 + tolerance):
        return None
    why = ("the op's compulsory bytes did not all come from DRAM (a warm cache served them: measure "
           "cold, or count them at L2)" if model_bytes else
           f"bytes counted at {level.name} were served by another level, or the spec's {level.name} "
           "bandwidth is too low")
    return RoofAlarm(name, key, rate, roof, "wrong_bytes_level",
                     f"{rate:.3g} B/s at {level.name} exceeds its {roof:.3g} B/s: {why}")


def kernel_alarms(hw: Hardware, kernel: KernelRecord, tolerance: float = DEFAULT_TOLERANCE) -> list[RoofAlarm]:
    """Alarms for one kernel from its measured counters (per launch: counters and time are totals)."""
    if kernel.duration_s <= 0:
        return []
    alarms: list[RoofAlarm] = []
    counters = kernel.counters
    tensor_active = counters.get("tensor_active_pct", 0.0) > 0 or counters.get("tensor_inst", 0.0) > 0
    for key, dtype in COUNTER_DTYPES.items():
        flops = counters.get(key)
        peak = vector_peak(hw, dtype)
        if not flops or peak is None:
            continue
        rate = flops / kernel.duration_s
        if rate > peak * (1 + tolerance):
            alarms.append(RoofAlarm(kernel.name, key, rate, peak, "wrong_peak",
                                    f"{rate:.3g} FLOP/s of {dtype.value} SIMT work exceeds the {peak:.3g} "
                                    f"FLOP/s peak of {hw.id}: the spec's {dtype.value} peak or clock is wrong, "
                                    "or the kernel ran on another device"))
    for key, dtype in MATRIX_COUNTER_DTYPES.items():
        flops, peak = counters.get(key), hw.peak_flops_per_s(dtype, "matrix")
        if flops and peak and flops / kernel.duration_s > peak * (1 + tolerance):
            rate = flops / kernel.duration_s
            alarms.append(RoofAlarm(kernel.name, key, rate, peak, "wrong_peak",
                                    f"{rate:.3g} FLOP/s of {dtype.value} matrix work exceeds the {peak:.3g} FLOP/s "
                                    f"matrix peak of {hw.id}: the spec's peak or clock is wrong, or the kernel ran "
                                    "on another device"))
    for key, level in counter_levels(hw).items():
        moved = counters.get(key)
        if moved and level is not None and has_roof(hw, level):
            alarm = _bytes_alarm(hw, kernel.name, key, level, moved / kernel.duration_s, tolerance, False)
            if alarm:
                alarms.append(alarm)
    if tensor_active and not alarms:
        dram = counters.get("dram_bytes")
        simt = sum(counters.get(k, 0.0) for k in COUNTER_DTYPES)
        if dram and simt and dram / kernel.duration_s > 0 and simt / dram < 1e-3:
            alarms.append(RoofAlarm(kernel.name, "tensor_flops", 0.0, 1.0, "missing_flop_counter",
                                    "tensor pipe active but only SIMT FLOPs were counted: add the tensor "
                                    "FLOP metric (sm__ops_path_tensor_*), the point plots far below its roof"))
    return alarms


_Work = tuple[dict[str, float], object, float]  # an op's FLOPs by engine, its dtype, its compulsory bytes


def _op_work(op_dict: dict[str, Any], cache: dict[bytes, _Work] | None) -> _Work:
    """The model work of an op, once per distinct op where ``cache`` is given (a trace repeats a few hundred
    ops many thousand times; ``op_key`` tells them apart)."""
    key = op_key(op_dict) if cache is not None else b""
    if cache is not None and key in cache:
        return cache[key]
    op = make_op(op_dict)
    work: _Work = (op.flops_by_engine(), getattr(op, "dtype", None) or getattr(op, "from_dtype", None), op.bytes)
    if cache is not None:
        cache[key] = work
    return work


def _longest_alarming_s(hw: Hardware, work: _Work, tolerance: float) -> float:
    """The longest measured time (s) at which a run of this work could still raise an alarm in ``run_alarms``
    (a rate above its roof); inf where a roof is 0."""
    flops, dtype, op_bytes = work
    machine = tables(hw)
    limits = [(op_bytes, machine.bandwidth_bytes_per_s(machine.dram))]
    if isinstance(dtype, DType):
        limits += [(flops[engine], paths[DTYPE_INDEX[dtype]].peak_flops_per_s)
                   for engine, paths in (("matrix", machine.matrix_paths), ("vector", machine.vector_paths))]
    longest = 0.0
    for amount, roof in limits:
        if amount > 0:
            longest = max(longest, amount / (roof * (1 + tolerance)) if roof > 0 else math.inf)
    return longest


def run_alarms(hw: Hardware, run: MatchedRun, tolerance: float = DEFAULT_TOLERANCE,
               work_cache: dict[bytes, _Work] | None = None) -> list[RoofAlarm]:
    """Alarms for a matched run from its op's model FLOPs and compulsory DRAM bytes (``work_cache``: the work of
    ops seen before, see ``_op_work``)."""
    if run.measured_time_s <= 0:
        return []
    flops, dtype, op_bytes = _op_work(run.op, work_cache)
    alarms: list[RoofAlarm] = []
    machine = tables(hw)
    if isinstance(dtype, DType):
        for engine, paths in (("matrix", machine.matrix_paths), ("vector", machine.vector_paths)):
            path = paths[DTYPE_INDEX[dtype]]
            rate = flops[engine] / run.measured_time_s
            if flops[engine] and rate > path.peak_flops_per_s * (1 + tolerance):
                alarms.append(RoofAlarm(run.op_name, f"{engine}_flops", rate, path.peak_flops_per_s, "wrong_peak",
                                        f"{rate:.3g} {dtype.value} FLOP/s on {path.engine} exceeds its "
                                        f"{path.peak_flops_per_s:.3g} FLOP/s peak: the spec's peak is wrong or the "
                                        "op's shapes overstate the work"))
    alarm = _bytes_alarm(hw, run.op_name, "dram_bytes", machine.dram, op_bytes / run.measured_time_s, tolerance,
                         True)
    if alarm:
        alarms.append(alarm)
    return alarms


def roof_alarms(hw: Hardware, items: Iterable[KernelRecord | MatchedRun],
                tolerance: float = DEFAULT_TOLERANCE, limit: int | None = None) -> list[RoofAlarm]:
    """Every alarm over kernels (measured counters) and matched runs (model FLOPs and bytes), in their order;
    ``limit``: stop once that many are found. A run is tested (``run_alarms``) only where its time is below the
    longest at which its op's work could alarm (with a margin of 1e-9 for rounding)."""
    alarms: list[RoofAlarm] = []
    work_cache: dict[bytes, _Work] = {}
    longest: dict[int, float] = {}  # id of a cached work tuple -> its longest alarming time
    for item in items:
        if limit is not None and len(alarms) >= limit:
            break
        if isinstance(item, KernelRecord):
            alarms += kernel_alarms(hw, item, tolerance)
            continue
        time_s = item.measured_time_s
        if not time_s > 0:
            continue
        try:
            work = _op_work(item.op, work_cache)
        except ValueError:  # an op the model refuses (a grid of 1e300): no run was stored for it, no alarm
            continue
        bound = longest.get(id(work))
        if bound is None:
            bound = longest[id(work)] = _longest_alarming_s(hw, work, tolerance)
        if time_s < bound * (1 + 1e-9):
            alarms += run_alarms(hw, item, tolerance, work_cache)
    return alarms if limit is None else alarms[:limit]
