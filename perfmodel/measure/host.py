"""Measure this host: threads, caches, bandwidth per level (working-set sweep), matmul peaks, dispatch cost."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from perfmodel.measure.bandwidth import (
    Plateau,
    SweepPoint,
    first_touch_bandwidth,
    level_bandwidths,
    per_thread_capacity_bytes,
    plateaus,
    sweep,
)
from perfmodel.measure.flops import DTYPES, PeakResult, best_peak, dispatch_overhead_s, peak_flops
from perfmodel.measure.sysinfo import CpuInfo, cpu_info

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class Measured:
    """A measured number (SI units: bytes/s, FLOP/s, s) and how it was measured."""

    value: float
    method: str


@dataclass(frozen=True)
class LevelMeasurement:
    """One memory level: capacity (bytes, per core if ``per_unit``) from the OS, bandwidth measured."""

    name: str  # "DRAM", "L3", "L2", "L1"
    kind: str  # "dram" or "cache"
    capacity_bytes: int | None
    per_unit: bool
    capacity_source: str
    bandwidth: Measured | None
    line_bytes: int | None = None


@dataclass(frozen=True)
class HostMeasurement:
    """Everything ``measure_host`` found; levels are outermost first (DRAM, ..., L1)."""

    cpu: CpuInfo
    threads: int
    measured_at: str  # ISO date-time, UTC
    duration_s: float
    quick: bool
    levels: tuple[LevelMeasurement, ...]
    peaks: dict[str, PeakResult]
    dispatch_overhead: Measured
    first_touch: Measured  # bytes/s writing a fresh (just allocated) buffer: not in the spec schema
    sweep: tuple[SweepPoint, ...]
    plateaus: tuple[Plateau, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    def peak_flops_per_s(self, dtype: str) -> float | None:
        result = self.peaks.get(dtype)
        return result.flops_per_s if result else None

    def level(self, name: str) -> LevelMeasurement:
        return next(lv for lv in self.levels if lv.name == name)


def measure_host(progress: Progress | None = None, quick: bool = False) -> HostMeasurement:
    """Measure this machine (a few seconds with ``quick``, well under a minute otherwise)."""
    started = time.perf_counter()
    report = progress or (lambda stage, fraction: None)
    cpu = cpu_info()
    threads = cpu.threads
    llc = max((c.size_bytes for c in cpu.caches), default=None)
    peaks: dict[str, PeakResult] = {}
    rounds = 1 if quick else 2  # one before and one after the sweep: a burst of others' load spoils one only

    def measure_peaks(round_: int) -> None:
        for i, name in enumerate(DTYPES):
            report(f"peak {name}", (round_ * len(DTYPES) + i) / (rounds * len(DTYPES)))
            result = peak_flops(name, threads, quick)
            peaks[name] = best_peak(peaks[name], result) if name in peaks else result

    measure_peaks(0)
    report("bandwidth sweep", 0.0)
    points = sweep(threads, llc, quick, lambda f: report("bandwidth sweep", f))
    runs = plateaus(points)
    levels, notes = _levels(cpu, points, runs)
    for round_ in range(1, rounds):
        measure_peaks(round_)
    fp32 = peaks["fp32"].flops_per_s
    for name, result in peaks.items():
        if result.flops_per_s and fp32 and name != "fp64" and result.flops_per_s < 0.1 * fp32:
            notes.append(f"{name} matmul runs at {result.flops_per_s / 1e9:.1f} GFLOP/s, under a tenth of fp32: "
                         "no native kernel on this CPU (torch falls back to a slow path)")
    report("dispatch overhead", 0.0)
    overhead_s, how = dispatch_overhead_s(quick)
    touch, touch_how = first_touch_bandwidth(threads, quick)
    report("done", 1.0)
    return HostMeasurement(
        cpu=cpu, threads=threads, measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        duration_s=time.perf_counter() - started, quick=quick, levels=tuple(levels), peaks=peaks,
        dispatch_overhead=Measured(overhead_s, how), first_touch=Measured(touch, touch_how), sweep=tuple(points),
        plateaus=tuple(runs), notes=tuple(notes),
    )


_SWEEP = ("working-set sweep, torch fp32 read kernel (x.expand(r, n).sum(dim=1): one call re-reads a buffer r "
          "times), {threads} Python threads with torch.set_num_threads(1) each on its own buffers, best of "
          "{repeats} per working set; median of {count} working sets of {low} per thread")


def _levels(cpu: CpuInfo, points: list[SweepPoint], runs: list[Plateau]) -> tuple[list[LevelMeasurement], list[str]]:
    threads = cpu.threads
    repeats = points[0].repeats if points else 0
    notes = [cpu.caches_note]
    found = level_bandwidths(points, cpu.caches, threads)
    levels: list[LevelMeasurement] = []
    for cache in reversed(cpu.caches):
        name = cache.name
        per_unit = cache.shared_cpus < threads
        capacity = cache.size_bytes // cache.shared_cpus if per_unit else cache.size_bytes
        capacity_source = cache.source + (f" (one instance per {cache.shared_cpus} CPUs)" if cache.shared_cpus > 1
                                          else "")
        bandwidth = None
        if name in found:
            value, count = found[name]
            low = f"≤ {per_thread_capacity_bytes(cache, threads) / 2 / 1024:.0f} KiB"
            bandwidth = Measured(value, _SWEEP.format(threads=threads, repeats=repeats, count=count, low=low))
        else:
            notes.append(f"{name}: no working set of the sweep falls inside it; bandwidth not assigned")
        levels.append(LevelMeasurement(name, "cache", capacity, per_unit, capacity_source, bandwidth, cache.line_bytes))
    if "DRAM" in found:
        value, count = found["DRAM"]
        last = cpu.caches[-1] if cpu.caches else None
        low = f"≥ {4 * per_thread_capacity_bytes(last, threads) / 2**20:.0f} MiB" if last else "any"
        dram = Measured(value, _SWEEP.format(threads=threads, repeats=repeats, count=count, low=low))
    else:
        tail = runs[-1]
        dram = Measured(tail.bandwidth_bytes_per_s,
                        f"last plateau of the working-set sweep (torch fp32 read kernel, {threads} threads, best of "
                        f"{repeats}): median of {tail.points} working sets from {tail.first_bytes >> 20} MiB; "
                        "cache sizes unknown")
    line = cpu.caches[-1].line_bytes if cpu.caches else None
    memory_source = "/proc/meminfo MemTotal" if cpu.memory_bytes else "unknown"
    levels.insert(0, LevelMeasurement("DRAM", "dram", cpu.memory_bytes, False, memory_source, dram, line))
    return levels, notes
