"""Sweep executors: local processes (``ProcessPoolExecutor``) or a Dask distributed cluster.

Each task is ``sweep.run_chunk`` on a list of variants: a few chunks per local worker process (a slow worker
still leaves work to the others), one per Dask worker thread (Dask's per-task cost, a few ms of scheduler,
worker and client CPU, is paid once per worker; the base device and the workloads are scattered once);
results stream back as tasks finish, so progress is per chunk. A Dask worker samples its running task's stack
every 10 ms (``distributed.worker.profile``); for these CPU-bound tasks that is ~6 % more worker CPU, so a
cluster kept for sweeps may turn it off, with the other periodic work in ``SWEEP_CLUSTER_CONFIG``
(``benchmarks/model_speed.py`` starts its cluster under it).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any

from perfmodel.graph.sweep import run_chunk
from perfmodel.specs import load_hardware

if TYPE_CHECKING:
    from perfmodel.graph.sweep import Progress, SweepSpec
    from perfmodel.hardware import Hardware

Chunks = list[list[tuple[int, dict[str, Any]]]]

# Dask settings for a cluster started for sweeps (``dask.config.set(SWEEP_CLUSTER_CONFIG)`` around its start):
# each process's event loop otherwise wakes every 20 ms (the blocked-loop monitor), each worker polls its memory
# every 100 ms and the scheduler balances every 100 ms, a cost per second of wall clock (~0.1 s of CPU per
# second on the benchmark's two workers) that is not per task; the stack sampler adds ~6 % to the task itself.
# With one task per worker thread there is nothing to steal. Results do not depend on any of these.
SWEEP_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s", "distributed.worker.memory.monitor-interval": "1s",
    "distributed.scheduler.work-stealing": False}


# CPU seconds of the task threads in this process (``run_chunk_compiled``, each task's own thread time): what a
# benchmark sets against the worker process's whole CPU to tell the sweep's work from Dask's (``task_cpu_s``).
_TASK_CPU_S = [0.0]


def task_cpu_s() -> float:
    """CPU seconds spent in ``run_chunk_compiled`` in this process so far (read on workers with ``client.run``)."""
    return _TASK_CPU_S[0]


def run_chunk_compiled(base_id: str | Hardware, chunk: list[tuple[int, dict[str, Any]]],
                       workloads: list[dict[str, Any]], space: str = "compact") -> list[dict[str, Any]]:
    """``run_chunk`` in a worker process, with the compiled schedule kernels loaded (once per process, as in
    any long-running process: the same answers as the numpy path, several times faster per search)."""
    from perfmodel.search import gemm_kernel

    start = time.thread_time()
    try:
        gemm_kernel.load()
        return run_chunk(base_id, chunk, workloads, space)
    finally:
        _TASK_CPU_S[0] += time.thread_time() - start


def _worker_context() -> multiprocessing.context.BaseContext:
    """Workers start from a fresh interpreter (``forkserver``, else ``spawn``), never by ``fork``: a fork
    copies locks that another thread of the caller holds at that moment (numba's compiler lock, a logging
    handler's) into a child that can then never take them, and the sweep hangs."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def run_processes(spec: SweepSpec, chunks: Chunks, workers: int, progress: Progress | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=_worker_context()) as pool:
        futures = [pool.submit(run_chunk_compiled, spec.base, chunk, spec.workloads, spec.space) for chunk in chunks]
        for done, future in enumerate(as_completed(futures), start=1):
            rows.extend(future.result())
            if progress:
                progress(done, len(chunks))
    return rows


def run_dask(spec: SweepSpec, split: Callable[[int], Chunks], scheduler: str | None, client: Any,
             progress: Progress | None) -> list[dict[str, Any]]:
    """One task per chunk on ``client`` (or a new client on ``scheduler``, closed afterwards); ``split(lanes)``
    makes the chunks for the cluster's worker threads (``run_sweep``: one chunk per thread by default). The base
    device and the workloads are scattered to every worker once and the tasks refer to them; chunk k asks for
    the k-th worker thread."""
    from distributed import Client
    from distributed import as_completed as dask_completed

    own = client is None
    if own:
        client = Client(scheduler, timeout=30)  # type: ignore[no-untyped-call]
    try:
        lanes = [address for address, threads in sorted(client.nthreads().items()) for _ in range(threads)]
        chunks = split(len(lanes))
        base, workloads = client.scatter([load_hardware(spec.base), spec.workloads], broadcast=True, hash=False)
        # chunk k asks for the k-th worker thread (round robin), any other worker if that one is gone: left to
        # itself the scheduler once put both chunks of the benchmark's sweep on one of two idle workers (with the
        # scattered futures kept across sweeps), and with work stealing off (SWEEP_CLUSTER_CONFIG) the other one
        # sat idle; the placement no longer rests on the scheduler's tie-breaks
        futures = [client.submit(run_chunk_compiled, base, chunk, workloads, spec.space, pure=False,
                                 workers=[lanes[k % len(lanes)]] if lanes else None, allow_other_workers=True)
                   for k, chunk in enumerate(chunks)]
        rows: list[dict[str, Any]] = []
        # results gathered as tasks finish, in batches (one transfer for the chunks done together, not one
        # round trip each)
        done = 0
        for batch in dask_completed(futures, with_results=True).batches():  # type: ignore[no-untyped-call]
            for _, chunk_rows in batch:
                rows.extend(chunk_rows)
                done += 1
                if progress:
                    progress(done, len(chunks))
        return rows
    finally:
        if own:
            client.close()
