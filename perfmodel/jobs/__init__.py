"""Long work as a job: a row in the store (``Store.add_job`` ...), run by a bounded pool of worker processes
(``JobPool``), with its stage, progress and result recorded as it goes. Calibration fits are the first kind."""

from perfmodel.jobs.pool import JobPool, QueueFull, owner_id
from perfmodel.jobs.progress import JobCancelled, StoredProgress
from perfmodel.jobs.run import CALIBRATION, run_calibration_job

__all__ = ["CALIBRATION", "JobCancelled", "JobPool", "QueueFull", "StoredProgress", "owner_id",
           "run_calibration_job"]
