"""``python -m perfmodel.jobs``: the worker process of ``JobPool`` (one job; its config as JSON on stdin)."""

from __future__ import annotations

import json
import sys

import perfmodel.calibration.stored  # noqa: F401  (the code is loaded before the cap: the cap is for the fit's data)
from perfmodel.jobs.run import cap_memory, run_calibration_job
from perfmodel.store import Store


def main() -> int:
    """stdin: ``{"database_url": ..., "job_id": ..., "memory_bytes": ...}``; exit 0 once the job is recorded."""
    config = json.loads(sys.stdin.read())
    memory_bytes = config.get("memory_bytes")
    store = Store(config["database_url"])
    try:
        store.get_job(int(config["job_id"]))  # connect first: the driver's own mappings are not the fit's
        cap_memory(memory_bytes)
        run_calibration_job(store, int(config["job_id"]), memory_bytes=memory_bytes)
    finally:
        store.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
