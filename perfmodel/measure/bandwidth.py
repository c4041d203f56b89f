"""Working-set sweep (Empirical Roofline Toolkit style): bandwidth of each cache level and of DRAM.

Kernels, fp32 torch ops, one Python thread per usable CPU (``torch.set_num_threads(1)`` inside
each, torch releases the GIL in an op), each thread on its own buffers; working set = all the
threads' buffers together:

- ``read``:  ``x.expand(r, n).sum(dim=1)``: one call re-reads an ``n``-element buffer ``r`` times,
  so the per-call cost is paid once (the only way to time L1 from Python). Bytes = r · n · 4.
- ``copy``:  ``y.copy_(x)`` in a loop. Bytes = 2 · n · 4 per call (read x, write y).
- ``triad``: ``torch.add(b, c, alpha=s, out=a)`` in a loop (STREAM triad). Bytes = 3 · n · 4 per call.

Each point is the best of N repeats (the host is shared). ``copy``/``triad`` pay ~1 µs per call,
so they understate small working sets; the levels take the ``read`` plateau.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from perfmodel.measure.sysinfo import CacheInfo
from perfmodel.measure.timing import best_of_s, parallel_best_of_s, torch_threads

FP32_BYTES = 4
KERNELS = ("read", "copy", "triad")
_STREAMS = {"read": 1, "copy": 2, "triad": 3}


@dataclass(frozen=True)
class SweepPoint:
    """One working set: the best-of-N bandwidth of one kernel (bytes/s) over all threads."""

    kernel: str
    working_set_bytes: int  # all threads together
    threads: int
    bandwidth_bytes_per_s: float
    repeats: int


@dataclass(frozen=True)
class Plateau:
    """A run of working sets with about the same bandwidth (bytes/s, median of the run)."""

    first_bytes: int
    last_bytes: int
    bandwidth_bytes_per_s: float
    points: int


def sweep_sizes_bytes(llc_bytes: int | None, quick: bool) -> list[int]:
    """Working sets from 16 KiB to ≥ 4× the last-level cache (8× in full mode), geometric."""
    top = max(64 << 20, (4 if quick else 8) * (llc_bytes or (32 << 20)))
    per_octave = 1 if quick else 3
    steps = math.ceil(math.log2(top / (16 << 10)) * per_octave)
    sizes = {round((16 << 10) * 2 ** (i / per_octave) / 4096) * 4096 for i in range(steps + 1)}
    return sorted(sizes)


def _task(kernel: str, per_thread_bytes: int, target_bytes: int, pool: torch.Tensor) -> Callable[[], object]:
    """One thread's work for one repeat: touches about ``target_bytes`` of slices of ``pool``.

    ``pool`` (fp32, at least ``per_thread_bytes``, touched once before the sweep) holds the
    buffers: a fresh allocation per point would pay its page faults again at every size, which
    on a VM costs more than the whole sweep (~0.2 GB/s first touch seen here).
    """
    n = max(1024, per_thread_bytes // (FP32_BYTES * _STREAMS[kernel]))
    if kernel == "read":
        rows = max(1, target_bytes // (n * FP32_BYTES))
        view = pool[:n].expand(rows, n)
        return lambda: view.sum(dim=1)
    calls = max(1, target_bytes // (n * FP32_BYTES * _STREAMS[kernel]))
    a, b, c = pool[:n], pool[n:2 * n], pool[2 * n:3 * n]
    if kernel == "copy":
        def copy() -> None:
            for _ in range(calls):
                b.copy_(a)
        return copy

    def triad() -> None:
        for _ in range(calls):
            torch.add(b, c, alpha=3.0, out=a)
    return triad


def _bytes_per_repeat(kernel: str, per_thread_bytes: int, target_bytes: int) -> int:
    n = max(1024, per_thread_bytes // (FP32_BYTES * _STREAMS[kernel]))
    per_call = n * FP32_BYTES * _STREAMS[kernel]
    if kernel == "read":
        return max(1, target_bytes // (n * FP32_BYTES)) * per_call
    return max(1, target_bytes // per_call) * per_call


def sweep(threads: int, llc_bytes: int | None, quick: bool = False,
          progress: Callable[[float], None] | None = None) -> list[SweepPoint]:
    """Bandwidth of every kernel at every working set, all threads.

    The host is shared: each point is the best of ``passes`` × ``repeats`` runs, the passes
    spread over the whole sweep so that a burst of someone else's load spoils one pass only.
    """
    sizes = sweep_sizes_bytes(llc_bytes, quick)
    passes, repeats = (1, 2) if quick else (3, 3)
    target = (8 << 20) if quick else (96 << 20)
    best: dict[tuple[str, int], float] = {}
    steps = passes * len(sizes) * len(KERNELS)
    done = 0
    pool_elements = max(sizes) // threads // FP32_BYTES + 3 * 1024
    with torch_threads(1), ThreadPoolExecutor(threads) as pool:
        buffers = list(pool.map(lambda _: torch.ones(pool_elements), range(threads)))  # first touch, once
        for _ in range(passes):
            for size in sizes:
                per_thread = size // threads
                for kernel in KERNELS:
                    tasks = [_task(kernel, per_thread, target, buffers[t]) for t in range(threads)]
                    for task in tasks:
                        task()  # warm-up: cache fill and lazy allocations out of the timing
                    seconds = parallel_best_of_s(tasks, repeats, pool)
                    rate = _bytes_per_repeat(kernel, per_thread, target) * threads / seconds
                    best[(kernel, size)] = max(best.get((kernel, size), 0.0), rate)
                    del tasks
                    done += 1
                    if progress:
                        progress(done / steps)
    return [SweepPoint(kernel, size, threads, best[(kernel, size)], passes * repeats)
            for size in sizes for kernel in KERNELS]


def first_touch_bandwidth(threads: int, quick: bool = False) -> tuple[float, str]:
    """Bytes/s of ``torch.empty(n).fill_(1)`` on a fresh 64 MiB buffer (page faults + kernel zeroing).

    Above glibc's mmap threshold (≤ 32 MiB) every out-of-place op's output is a fresh mapping,
    so a large elementwise op pays this on its output on top of the streaming cost.
    """
    n = (64 << 20) // FP32_BYTES
    repeats = 3 if quick else 7
    with torch_threads(threads):
        seconds = best_of_s(lambda: torch.empty(n).fill_(1.0), repeats)
    return n * FP32_BYTES / seconds, (f"torch.empty(64 MiB).fill_(1.0), {threads} torch threads, best of {repeats}: "
                                      "writing a fresh allocation (page faults and zeroing included)")


def per_thread_capacity_bytes(cache: CacheInfo, threads: int) -> float:
    """The share of one cache instance that one of ``threads`` running threads can count on."""
    return cache.size_bytes / max(1, min(cache.shared_cpus, threads))


def level_windows(caches: Sequence[CacheInfo], threads: int) -> list[tuple[str, float, float]]:
    """(level name, lowest, highest) per-thread working set that exercises each level, innermost first.

    A level owns working sets above 1.5× the level inside it and below half its own per-thread
    capacity; DRAM owns those above 4× the last level's.
    """
    windows: list[tuple[str, float, float]] = []
    low = 0.0
    for cache in caches:
        capacity = per_thread_capacity_bytes(cache, threads)
        windows.append((cache.name, low, 0.5 * capacity))
        low = 1.5 * capacity
    if caches:  # without cache sizes, DRAM is the last plateau (``plateaus``)
        windows.append(("DRAM", low / 1.5 * 4, math.inf))
    return windows


def level_bandwidths(points: Sequence[SweepPoint], caches: Sequence[CacheInfo], threads: int,
                     kernel: str = "read") -> dict[str, tuple[float, int]]:
    """Per level: the median bandwidth (bytes/s) of the sweep points in its window, and how many."""
    found: dict[str, tuple[float, int]] = {}
    rows = [p for p in points if p.kernel == kernel]
    for name, low, high in level_windows(caches, threads):
        inside = [p.bandwidth_bytes_per_s for p in rows if low <= p.working_set_bytes / threads <= high]
        if inside:
            found[name] = (statistics.median(inside), len(inside))
    return found


def plateaus(points: Sequence[SweepPoint], kernel: str = "read", tolerance: float = 0.25) -> list[Plateau]:
    """Split the curve where bandwidth leaves the running median by more than ``tolerance``.

    Works without any cache sizes: the first plateau is L1, the last DRAM; single points
    between plateaus (transitions) are dropped.
    """
    rows = sorted((p for p in points if p.kernel == kernel), key=lambda p: p.working_set_bytes)
    runs: list[list[SweepPoint]] = []
    for point in rows:
        if runs:
            level = statistics.median(p.bandwidth_bytes_per_s for p in runs[-1])
            if abs(point.bandwidth_bytes_per_s / level - 1.0) <= tolerance:
                runs[-1].append(point)
                continue
        runs.append([point])
    kept = [run for run in runs if len(run) >= 2] or runs
    return [Plateau(run[0].working_set_bytes, run[-1].working_set_bytes,
                    statistics.median(p.bandwidth_bytes_per_s for p in run), len(run)) for run in kept]
