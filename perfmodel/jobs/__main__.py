"""``python -m perfmodel.jobs``: a worker process of ``JobPool``. Its first stdin line is its config
(``{"database_url", "memory_bytes"}``); then one ``{"job_id"}`` line per job, answered by one stdout line
once the job's outcome is recorded. It retires (exits) after ``MAX_JOBS`` jobs, or when its RSS has grown
past half the memory cap; the pool starts a fresh one for the next job."""

from __future__ import annotations

import json
import os
import sys

import perfmodel.calibration.stored  # noqa: F401  (the code is loaded before the cap: the cap is for the fit's data)
from perfmodel.jobs.run import cap_memory, run_calibration_job
from perfmodel.store import Store

MAX_JOBS = 50  # then a fresh worker: whatever one fit leaves in the heap does not add up without bound


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main() -> int:
    config = json.loads(sys.stdin.readline())
    memory_bytes = config.get("memory_bytes")
    store = Store(config["database_url"])
    try:
        store.count_jobs("calibration")  # connect first: the driver's own mappings are not the fit's
        cap_memory(memory_bytes)
        for _ in range(MAX_JOBS):
            line = sys.stdin.readline()
            if not line:
                break  # the pool closed the pipe (or its process ended)
            job_id = int(json.loads(line)["job_id"])
            status = run_calibration_job(store, job_id, memory_bytes=memory_bytes)
            sys.stdout.write(json.dumps({"job_id": job_id, "status": status}) + "\n")
            sys.stdout.flush()
            if memory_bytes and _rss_bytes() > memory_bytes // 2:
                break  # a heap grown past half the cap (a large or failed fit): the next job gets a fresh worker
    finally:
        store.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
