"""Where each profiled kernel stands against the device's roofs, from its own counters (Nsight Compute,
rocprof / rocprofv3).

A kernel with measured bytes per memory level and FLOPs per dtype attains a rate at each: its share of that
roof (attained / roof) says how close it runs to it. The nearest roof is the one it is closest to; a kernel far
below every roof is limited by something else (latency, occupancy, launch, dependencies).

Nsight Compute's default set gives Speed-of-Light percentages instead of bytes: a level's throughput % of peak
is taken as its share of that roof, and its bytes are derived as share x the spec's bandwidth x time (listed
in ``derived``); 'sm' is the SM throughput % (the busiest SM pipe, not a FLOP rate).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from perfmodel.hardware import Hardware
from perfmodel.machine import tables
from perfmodel.traces.ncu_metrics import SOL_SHARES
from perfmodel.traces.records import CounterTotals, KernelRecord
from perfmodel.traces.roof import COUNTER_DTYPES, MATRIX_COUNTER_DTYPES, counter_levels, has_roof, vector_peak

LEVEL_LABELS = {"dram_bytes": "dram", "l2_bytes": "l2", "l1_bytes": "l1"}
AT_ROOF = 0.8  # a kernel at >= 80 % of a roof runs at it
FAR_BELOW = 0.5


@dataclass(frozen=True)
class CounterPoint:
    """One kernel name's measured point: summed time and counters over its launches, shares of each roof."""

    name: str
    launches: int
    time_s: float
    flops: float  # FLOPs counted: SIMT (fp16 + fp32 + fp64) and, where counted (AMD MFMA), matrix-core
    bytes_by_level: dict[str, float]  # 'dram', 'l2', 'l1' -> bytes moved
    share_of_roof: dict[str, float]  # 'dram', 'l2', 'l1', 'compute', 'tensor', 'sm' -> attained / roof
    derived: tuple[str, ...] = ()  # what came from Speed-of-Light percentages, not from counted bytes/FLOPs

    @property
    def nearest(self) -> str:
        """The roof the kernel runs closest to ('' when no counter tells)."""
        return max(self.share_of_roof, key=lambda k: self.share_of_roof[k]) if self.share_of_roof else ""

    @property
    def best_share(self) -> float:
        return max(self.share_of_roof.values(), default=0.0)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "launches": self.launches, "time_s": self.time_s, "flops": self.flops,
                "bytes_by_level": self.bytes_by_level, "share_of_roof": self.share_of_roof,
                "nearest_roof": self.nearest, "derived": list(self.derived)}


def _sol_bytes(hw: Hardware, counters: dict[str, float], time_s: float) -> dict[str, float]:
    """Bytes per level derived from Speed-of-Light throughput % where the level has no byte counter:
    share of peak x the spec's bandwidth x time."""
    machine = tables(hw)
    derived: dict[str, float] = {}
    for key, level in counter_levels(hw).items():
        pct = counters.get(SOL_SHARES[key], 0.0)
        if counters.get(key, 0.0) <= 0 and pct > 0 and level is not None and has_roof(hw, level):
            derived[key] = pct / 100.0 * machine.bandwidth_bytes_per_s(level) * time_s
    return derived


def _shares(hw: Hardware, counters: dict[str, float], time_s: float) -> dict[str, float]:
    """Attained / roof per memory level and for the SIMT FLOPs (their dtypes' times at peak, added)."""
    machine = tables(hw)
    shares: dict[str, float] = {}
    for key, level in counter_levels(hw).items():
        moved = counters.get(key, 0.0)
        if moved > 0 and level is not None and has_roof(hw, level):
            shares[LEVEL_LABELS[key]] = moved / time_s / machine.bandwidth_bytes_per_s(level)
    if "compute" not in shares and counters.get("sm_throughput_pct", 0.0) > 0 and not any(
            counters.get(k, 0.0) > 0 for k in COUNTER_DTYPES):
        shares["sm"] = counters["sm_throughput_pct"] / 100.0
    compute_s = 0.0
    for key, dtype in COUNTER_DTYPES.items():
        peak = vector_peak(hw, dtype)
        if counters.get(key, 0.0) > 0 and peak:
            compute_s += counters[key] / peak
    if compute_s > 0:
        shares["compute"] = compute_s / time_s
    matrix_s = sum(counters[key] / peak for key, dtype in MATRIX_COUNTER_DTYPES.items()
                   if counters.get(key, 0.0) > 0 and (peak := hw.peak_flops_per_s(dtype, "matrix")))
    if matrix_s > 0:
        shares["tensor"] = matrix_s / time_s  # the matrix FLOPs' times at their dtypes' peaks, over the time
    elif counters.get("tensor_active_pct", 0.0) > 0:
        shares["tensor"] = counters["tensor_active_pct"] / 100.0
    if "compute" in shares:
        shares.pop("sm", None)
    return shares


def counter_points(hw: Hardware, kernels: Iterable[KernelRecord]) -> list[CounterPoint]:
    """The kernels with counters, grouped by name (times and counters summed), longest total time first."""
    time_s: dict[str, float] = defaultdict(float)
    launches: dict[str, int] = defaultdict(int)
    totals: dict[str, CounterTotals] = defaultdict(CounterTotals)
    wave_counted: set[str] = set()  # names whose SIMT FLOPs count whole waves (rocprof VALU instructions)
    for k in kernels:
        if not k.counters or k.duration_s <= 0:
            continue
        if k.source_format.startswith("rocprof"):
            wave_counted.add(k.name)
        time_s[k.name] += k.duration_s
        launches[k.name] += k.instances
        totals[k.name].add(k.counters, k.duration_s)
    points = []
    for name, t in time_s.items():
        counters = totals[name].result()
        derived = _sol_bytes(hw, counters, t)
        counters.update(derived)
        flops = sum(counters.get(key, 0.0) for key in (*COUNTER_DTYPES, *MATRIX_COUNTER_DTYPES))
        moved = {LEVEL_LABELS[key]: counters[key] for key in LEVEL_LABELS if counters.get(key, 0.0) > 0}
        notes = tuple(f"{LEVEL_LABELS[k]} bytes = {SOL_SHARES[k]} x spec bandwidth x time" for k in derived)
        if "sm_throughput_pct" in counters and not flops:
            notes += ("sm share = SM throughput % (busiest pipe), no FLOP counter",)
        if name in wave_counted and any(counters.get(key, 0.0) > 0 for key in COUNTER_DTYPES):
            notes += ("SIMT FLOPs = VALU instructions x wave lanes: every lane counted, an upper bound",)
        points.append(CounterPoint(name, launches[name], t, flops, moved, _shares(hw, counters, t), notes))
    points.sort(key=lambda p: -p.time_s)
    return points


def time_by_headroom(points: list[CounterPoint]) -> dict[str, float]:
    """Share of the points' time at a roof (>= 80 % of it), at 50-80 %, below 50 %, and with no roof counter."""
    total = sum(p.time_s for p in points) or 1.0
    out = {"at_roof": 0.0, "near_roof": 0.0, "far_below": 0.0, "no_counter": 0.0}
    for p in points:
        key = ("no_counter" if not p.share_of_roof else "at_roof" if p.best_share >= AT_ROOF
               else "near_roof" if p.best_share >= FAR_BELOW else "far_below")
        out[key] += p.time_s / total
    return out


def measured_roofline_json(points: list[CounterPoint], top: int | None = None) -> dict[str, Any]:
    """The points as JSON: their time split by headroom (empty without points) and the first ``top`` of them."""
    return {"time_by_headroom": time_by_headroom(points) if points else {},
            "kernels": [p.to_json() for p in points[:top]]}


__all__ = ["CounterPoint", "counter_points", "measured_roofline_json", "time_by_headroom"]
