"""Sweep executors: local processes (``ProcessPoolExecutor``) or a Dask distributed cluster.

Each task is ``sweep.run_chunk`` on a list of variants; results stream back as tasks finish, so
progress is per chunk.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TYPE_CHECKING, Any

from perfmodel.graph.sweep import run_chunk

if TYPE_CHECKING:
    from perfmodel.graph.sweep import Progress, SweepSpec

Chunks = list[list[tuple[int, dict[str, Any]]]]


def run_processes(spec: SweepSpec, chunks: Chunks, workers: int, progress: Progress | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_chunk, spec.base, chunk, spec.workloads, spec.space) for chunk in chunks]
        for done, future in enumerate(as_completed(futures), start=1):
            rows.extend(future.result())
            if progress:
                progress(done, len(chunks))
    return rows


def run_dask(spec: SweepSpec, chunks: Chunks, scheduler: str | None, client: Any,
             progress: Progress | None) -> list[dict[str, Any]]:
    """Submit one task per chunk to ``client`` (or a new client on ``scheduler``, closed afterwards)."""
    from distributed import Client
    from distributed import as_completed as dask_completed

    own = client is None
    if own:
        client = Client(scheduler, timeout=30)  # type: ignore[no-untyped-call]
    try:
        futures = [client.submit(run_chunk, spec.base, chunk, spec.workloads, spec.space, pure=False)
                   for chunk in chunks]
        rows: list[dict[str, Any]] = []
        for done, future in enumerate(dask_completed(futures), start=1):  # type: ignore[no-untyped-call]
            rows.extend(future.result())
            if progress:
                progress(done, len(chunks))
        return rows
    finally:
        if own:
            client.close()
