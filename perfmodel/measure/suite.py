"""Time the host suite (``cases.py``) under the PyTorch profiler and export its Kineto Chrome trace."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from perfmodel.measure.cases import SuiteCase, suite_cases
from perfmodel.measure.sysinfo import usable_threads
from perfmodel.measure.timing import torch_threads

TRACE_NAME = "host_suite.pt.trace.json"
CPU = [ProfilerActivity.CPU]


@contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send fd 2 to /dev/null for the block: each collection toggle logs a C++ warning about GPU tracks."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _collect(prof: profile, enable: bool) -> None:
    with _quiet_stderr():
        prof.toggle_collection_dynamic(enable, CPU)


def runs_of(case: SuiteCase, quick: bool) -> int:
    """Profiled calls per case: 7 for sub-millisecond ops, 5 otherwise (2 quick): the loop keeps the
    fastest, and on a shared host a slow neighbour spoils several calls in a row."""
    if quick:
        return 2
    return 7 if case.cost_s < 1e-3 else 5


def run_suite(out_dir: Path, progress: Callable[[str, float], None] | None = None, quick: bool = False) -> Path:
    """Run every case a few times inside ``torch.profiler.profile`` (CPU, shapes recorded).

    Allocation and one warm-up call per case happen with collection switched off, so the trace
    holds only the timed calls: ``aten::*`` ``cpu_op`` events with ``Input Dims``/``Input type``.
    Returns ``out_dir / host_suite.pt.trace.json``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / TRACE_NAME
    cases = suite_cases(quick)
    with torch.no_grad(), torch_threads(usable_threads()), profile(activities=CPU, record_shapes=True) as prof:
        for i, case in enumerate(cases):
            _collect(prof, False)
            call = case.make()
            call()
            _collect(prof, True)
            for _ in range(runs_of(case, quick)):
                call()
            del call
            if progress:
                progress("suite", (i + 1) / len(cases))
    prof.export_chrome_trace(str(path))
    return path
