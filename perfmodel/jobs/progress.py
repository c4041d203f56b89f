"""A job's progress written to the store at a bounded rate; a job cancelled meanwhile stops the work."""

from __future__ import annotations

import time
from collections.abc import Callable

from perfmodel.store import Store

MIN_WRITE_INTERVAL_S = 0.5  # at most 2 progress writes per second per job


class JobCancelled(Exception):
    """The job no longer runs (cancelled by a request, or marked interrupted): stop, store nothing."""


class StoredProgress:
    """``progress(stage, fraction)`` for ``fit_calibration``: records the stage and fraction (0..1) of job
    ``job_id``: each new stage at once (a fit has a handful), within a stage at most once per ``min_interval_s``;
    raises ``JobCancelled`` when the store says the job no longer runs."""

    def __init__(self, store: Store, job_id: int, min_interval_s: float = MIN_WRITE_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store, self.job_id, self.min_interval_s, self.clock = store, job_id, min_interval_s, clock
        self.writes = 0
        self._last_s: float | None = None
        self._stage: str | None = None

    def __call__(self, stage: str, fraction: float) -> None:
        now_s = self.clock()
        if stage == self._stage and self._last_s is not None and now_s - self._last_s < self.min_interval_s:
            return
        self._last_s, self._stage = now_s, stage
        self.writes += 1
        if not self.store.report_progress(self.job_id, stage, fraction):
            raise JobCancelled(f"job {self.job_id} no longer runs")
