"""A calibration job run in this process (``perfmodel calibrate``): the same job row, progress and outcome as one
the service's pool runs, so ``GET /api/v1/jobs`` lists it and ``DELETE`` cancels it."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from typing import Any

from perfmodel.jobs.pool import owner_id
from perfmodel.jobs.run import CALIBRATION, run_calibration_job
from perfmodel.store import JobRow, Store

HEARTBEAT_S = 2.0  # as the pool's: a sweep marks a job without a heartbeat for 30 s interrupted
UNBOUNDED = 2**31 - 1  # a command's own fit is not one of the service pool's slots


def run_calibration_here(store: Store, request: dict[str, Any],
                         observer: Callable[[str, float], None] | None = None,
                         heartbeat_s: float = HEARTBEAT_S) -> JobRow:
    """Store a calibration job for ``request`` (``hardware``, ``filter``, ``base_calibration``, ``folds``,
    ``notes``: the API's body), owned by this process, run it here with ``observer(stage, fraction)`` told each
    step and a heartbeat every ``heartbeat_s`` seconds, and return the ended job."""
    owner = owner_id("cli-" + secrets.token_hex(4))
    job_id = store.add_job(CALIBRATION, request, owner)
    store.claim_job(job_id, owner, UNBOUNDED)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(heartbeat_s):
            store.beat([job_id])

    beating = threading.Thread(target=beat, name=f"job-{job_id}-heartbeat", daemon=True)
    beating.start()
    try:
        run_calibration_job(store, job_id, observer=observer)
    finally:
        stop.set()
        beating.join()
    job = store.get_job(job_id)
    assert job is not None
    return job
