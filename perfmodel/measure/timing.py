"""Small timing helpers: best-of-N wall clock and a parallel region over Python threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch


def best_of_s(fn: Callable[[], object], repeats: int) -> float:
    """Shortest of ``repeats`` wall-clock runs of ``fn`` (seconds); the host is shared, so the minimum."""
    best = float("inf")
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def parallel_best_of_s(tasks: Sequence[Callable[[], object]], repeats: int, pool: ThreadPoolExecutor) -> float:
    """Best-of-N wall time (seconds) of all ``tasks`` started together on their own Python threads.

    One repeat spans from the first thread's start to the last thread's end (a barrier lines
    them up). Torch releases the GIL inside an op, so the threads run in parallel.
    """
    if len(tasks) == 1:
        return best_of_s(tasks[0], repeats)
    best = float("inf")
    for _ in range(max(1, repeats)):
        barrier = threading.Barrier(len(tasks))

        def run(task: Callable[[], object], barrier: threading.Barrier = barrier) -> tuple[float, float]:
            barrier.wait()
            start = time.perf_counter()
            task()
            return start, time.perf_counter()

        spans = list(pool.map(run, tasks))
        best = min(best, max(end for _, end in spans) - min(start for start, _ in spans))
    return best


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run the block with ``torch.set_num_threads(count)``; restore the previous setting after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
