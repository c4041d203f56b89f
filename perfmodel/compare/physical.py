"""Timings no device can produce: a group whose measured time per call is shorter than the least time its op's
bytes and FLOPs need on that side's device is a recording artefact, not a measurement ("timing suspect").

The least time is a lower bound, never the model's estimate: the op's compulsory bytes over the roof of the level
they must come from (the last-level cache when they fit in it, and only the part beyond its capacity from DRAM
when they do not, at the faster of the levels' read and write figures), its FLOPs over the sum of every engine's
best peak at the op's width or narrower down to 16 bits (a library may convert), and the recorded time is given
the profiler's timer resolution (Kineto truncates to whole microseconds: a 1 us record may be up to 2 us).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from perfmodel.dtypes import DType, parse_dtype
from perfmodel.hardware import Hardware
from perfmodel.units import format_bytes, format_rate, format_time_s

RESOLUTIONS_S = (1e-6, 1e-7, 1e-8, 1e-9)  # the coarsest that divides every call time is the group's timer step
MIN_CONSTANT_GROUPS = 3  # groups of one kernel, all with the same median time, over work spanning MIN_WORK_SPAN
MIN_WORK_SPAN = 10.0


@dataclass(frozen=True)
class Ceiling:
    """What one device can do at most: DRAM and last-level-cache bandwidth (B/s), the cache's capacity (B)."""

    dram_name: str
    dram_bytes_per_s: float | None
    cache_name: str | None
    cache_bytes_per_s: float | None
    cache_capacity_bytes: float
    hardware: Hardware

    def flops_per_s(self, dtype: str | None) -> float | None:
        """Every engine's best peak for ``dtype`` or any type of 16 bits or more not wider than it, summed."""
        try:
            bits = parse_dtype(dtype).bits if dtype else 64
        except ValueError:
            bits = 64
        floor = min(bits, 16)
        total = 0.0
        for engine in self.hardware.engines:
            peaks = [p for d, p in engine.peak_flops_per_s.items() if floor <= DType(d).bits <= max(bits, 16)]
            total += max(peaks, default=0.0)
        return total or None


def ceiling(hw: Hardware) -> Ceiling:
    dram = hw.levels[0]
    caches = [lv for lv in hw.levels if lv.kind == "cache" and not lv.per_unit]
    cache = caches[0] if caches else None
    capacity = (hw.level_capacity_bytes(cache) or 0.0) if cache else sum(
        hw.level_capacity_bytes(lv) or 0.0 for lv in hw.levels[1:])
    dram_bw = max(filter(None, (dram.bandwidth_bytes_per_s, dram.write_bandwidth_bytes_per_s)), default=None)
    cache_bw = max(filter(None, (cache.bandwidth_bytes_per_s, cache.write_bandwidth_bytes_per_s)),
                   default=None) if cache else None
    return Ceiling(dram.name, dram_bw, cache.name if cache else None, cache_bw, capacity, hw)


def least_time_s(c: Ceiling, bytes_moved: float, flops: float, dtype: str | None) -> tuple[float, str]:
    """The least time the op's bytes and FLOPs need on the device, and what sets it (the reason's words)."""
    best, why = 0.0, ""
    beyond = bytes_moved - c.cache_capacity_bytes
    if beyond > 0 and c.dram_bytes_per_s:
        t = beyond / c.dram_bytes_per_s
        cache = f"{c.cache_name or 'on-chip'}'s {format_bytes(c.cache_capacity_bytes)}"
        best, why = t, (f"{format_bytes(bytes_moved)} exceed {cache}: "
                        f"{format_bytes(beyond)} at {c.dram_name}'s {format_rate(c.dram_bytes_per_s, 'B/s')}")
    if bytes_moved > 0 and c.cache_bytes_per_s and bytes_moved / c.cache_bytes_per_s > best:
        best = bytes_moved / c.cache_bytes_per_s
        why = f"{format_bytes(bytes_moved)} at {c.cache_name}'s {format_rate(c.cache_bytes_per_s, 'B/s')}"
    peak = c.flops_per_s(dtype)
    if flops > 0 and peak and flops / peak > best:
        best, why = flops / peak, f"{flops:.3g} FLOP at the {format_rate(peak, 'FLOP/s')} of every engine together"
    return best, why


def resolution_s(times_s: Sequence[float]) -> float:
    """The coarsest of ``RESOLUTIONS_S`` that every call time is a whole multiple of (0 where none is)."""
    for step in RESOLUTIONS_S:
        if all(abs(t / step - round(t / step)) < 1e-3 for t in times_s):
            return step
    return 0.0


def impossible(side: str, c: Ceiling, bytes_moved: float, flops: float, dtype: str | None, median_s: float,
               times_s: Sequence[float], launches_per_call: float) -> str | None:
    """Why the median call on one side is faster than the device allows (None when it is possible)."""
    if not (median_s >= 0 and math.isfinite(median_s)):
        return None
    least, why = least_time_s(c, bytes_moved, flops, dtype)
    if least <= median_s:
        return None
    slack = resolution_s(times_s) * max(math.ceil(launches_per_call), 1)
    if least <= median_s + slack:
        return None
    step = f" (+{format_time_s(slack)} timer resolution)" if slack else ""
    return (f"{side}: {format_time_s(median_s)}{step} per call, but {why} take at least {format_time_s(least)} "
            f"on {c.hardware.id}")


def constant_recording(side: str, kernel: str, time_s: float, work_bytes: Sequence[float], proof: str) -> str:
    """The reason for a group whose kernel records one time on this side whatever its work, while that time is
    impossible for another of its sizes: the recorder, not the device, set it."""
    return (f"{side}: {kernel} records a median {format_time_s(time_s)} per call whatever its size "
            f"({format_bytes(min(work_bytes))} to {format_bytes(max(work_bytes))}), "
            f"impossible at the largest ({proof})")
