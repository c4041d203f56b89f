"""``python -m perfmodel.jobs``: a worker process of ``JobPool``. Its first stdin line is its config
(``{"database_url", "memory_bytes"}``); then one ``{"job_id"}`` line per job, answered by one stdout line
once the job's outcome is recorded."""

from __future__ import annotations

import json
import sys

import perfmodel.calibration.stored  # noqa: F401  (the code is loaded before the cap: the cap is for the fit's data)
from perfmodel.jobs.run import cap_memory, run_calibration_job
from perfmodel.store import Store


def main() -> int:
    config = json.loads(sys.stdin.readline())
    memory_bytes = config.get("memory_bytes")
    store = Store(config["database_url"])
    try:
        store.count_jobs("calibration")  # connect first: the driver's own mappings are not the fit's
        cap_memory(memory_bytes)
        while line := sys.stdin.readline():
            job_id = int(json.loads(line)["job_id"])
            status = run_calibration_job(store, job_id, memory_bytes=memory_bytes)
            sys.stdout.write(json.dumps({"job_id": job_id, "status": status}) + "\n")
            sys.stdout.flush()
    finally:
        store.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
