"""A bounded pool running jobs in worker processes: a queue, at most ``workers`` fits at once (counted in the
store, so across every service process sharing it), an address-space cap per fit, cancellation, heartbeats.

A fit is CPU-bound numpy: in a separate process (one BLAS thread) it leaves the service's own threads and
the GIL to the requests. A job whose owner stops beating (a process killed, a restart) is marked
``interrupted`` with the reason, by the next pool that starts or sweeps.
"""

from __future__ import annotations

import logging
import os
import queue
import secrets
import socket
import threading
import time
from typing import Any

from perfmodel.jobs.worker import WorkerDied, WorkerProcess
from perfmodel.store import Store

log = logging.getLogger(__name__)

DEFAULT_MEMORY_BYTES = 2 * 2**30  # address space per fit (numpy, the store's driver, the runs)
RESTARTED = "the service restarted: a previous process left this job queued or running"
STOPPED = "the service stopped before the job finished"
DEAD = "the service process that ran it ended (killed or restarted) before the job finished"
STALE = "no heartbeat from the service process that ran it for {:.0f} s (killed, or its machine restarted)"


class QueueFull(Exception):
    """Too many jobs of this kind are queued or running; try again later."""


def owner_id(token: str) -> str:
    """``host:pid:token``: who runs a job (a pool of one process; the token tells a restarted pid apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{token}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def dead_owner(owner: str, me: str) -> bool:
    """Whether ``owner`` is a pool on this host that no longer exists (its process gone, or its pid now ours)."""
    host, _, rest = owner.partition(":")
    pid_text, _, _token = rest.partition(":")
    my_host, _, my_rest = me.partition(":")
    if host != my_host or not pid_text.isdigit() or owner == me:
        return False
    return int(pid_text) == int(my_rest.partition(":")[0]) or not _alive(int(pid_text))


class JobPool:
    """``submit`` queues a job and returns its id; ``workers`` threads each run one job at a time in their warm
    worker process (``WorkerProcess``: started at the first job, stopped after ``idle_s`` idle), capped at
    ``memory_bytes`` of address space (None: no cap)."""

    def __init__(self, store: Store, *, workers: int = 1, memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
                 max_active: int = 32, heartbeat_s: float = 2.0, stale_after_s: float = 30.0,
                 poll_s: float = 0.2, idle_s: float = 600.0) -> None:
        if workers < 1 or max_active < 1:
            raise ValueError(f"workers ({workers}) and max_active ({max_active}) must be at least 1")
        self.store, self.workers, self.memory_bytes, self.max_active = store, workers, memory_bytes, max_active
        self.heartbeat_s, self.stale_after_s, self.poll_s, self.idle_s = heartbeat_s, stale_after_s, poll_s, idle_s
        self.owner = owner_id(secrets.token_hex(4))
        self._queue: queue.Queue[int] = queue.Queue()
        self._mine: set[int] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    # --- life cycle ---
    def start(self) -> None:
        """Mark jobs a dead process left as interrupted, start the workers and the heartbeat (idempotent)."""
        with self._lock:
            if self._threads:
                return
            self._stopping.clear()
            try:
                self.sweep(RESTARTED)
            except Exception:  # a database this process cannot write must not stop the service from starting
                log.exception("marking jobs left by a previous process interrupted")
            self._threads = [threading.Thread(target=self._work, name=f"job-worker-{i}", daemon=True)
                             for i in range(self.workers)]
            self._threads.append(threading.Thread(target=self._beat, name="job-heartbeat", daemon=True))
            for thread in self._threads:
                thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the workers (a running fit is terminated) and mark this pool's unfinished jobs interrupted."""
        self._stopping.set()
        with self._lock:
            threads, self._threads = self._threads, []
        for thread in threads:
            thread.join(timeout_s)
        try:
            self.store.interrupt_jobs(STOPPED, owners=[self.owner])
        except Exception:
            log.exception("marking this pool's unfinished jobs interrupted")

    def sweep(self, reason: str | None = None) -> int:
        """Mark interrupted the unfinished jobs of dead pools on this host (``reason``, else DEAD) and those
        without a heartbeat for ``stale_after_s`` (``reason``, else STALE); how many."""
        dead = [o for o in self.store.active_owners() if dead_owner(o, self.owner)]
        count = self.store.interrupt_jobs(reason or DEAD, owners=dead) if dead else 0
        return count + self.store.interrupt_jobs(reason or STALE.format(self.stale_after_s),
                                                 stale_after_s=self.stale_after_s)

    # --- jobs ---
    def submit(self, kind: str, request: dict[str, Any]) -> int:
        """Store a queued job and hand it to a worker; QueueFull when ``max_active`` are queued or running."""
        active = self.store.count_jobs(kind)
        if active >= self.max_active:
            raise QueueFull(f"{active} {kind} jobs are queued or running (at most {self.max_active}): "
                            "try again when one has finished")
        self.start()
        job_id = self.store.add_job(kind, request, self.owner)
        with self._lock:
            self._mine.add(job_id)
        self._queue.put(job_id)
        return job_id

    def _work(self) -> None:
        worker = WorkerProcess(self.store.url, self.memory_bytes)
        try:
            while not self._stopping.is_set():
                try:
                    job_id = self._queue.get(timeout=self.poll_s)
                except queue.Empty:
                    if worker.running and time.monotonic() - worker.last_used_s > self.idle_s:
                        worker.stop()  # an idle worker gives its memory back
                    continue
                try:
                    self._run(worker, job_id)
                except Exception:  # a store error must not kill the pool's thread
                    log.exception("job %s", job_id)
                    worker.stop()
                finally:
                    with self._lock:
                        self._mine.discard(job_id)
        finally:
            worker.stop()

    def _claim(self, job_id: int) -> bool:
        """Wait for a free slot; False if the job no longer waits (cancelled) or the pool stops."""
        while not self._stopping.is_set():
            claimed = self.store.claim_job(job_id, self.owner, self.workers)
            if claimed is not None:
                if claimed:
                    return True
                self._stopping.wait(self.poll_s * 5)
                continue
            return False
        return False

    def _run(self, worker: WorkerProcess, job_id: int) -> None:
        if not self._claim(job_id):
            return
        try:
            worker.send(job_id)
        except WorkerDied:
            outcome = "died"
        else:
            outcome = self._watch(job_id, worker)
        if outcome == "recorded":
            written = worker.new_errors()
            if written.strip():  # a traceback of the job's internal error: into the service's log
                log.warning("job %d: the fit process wrote:\n%s", job_id, written.rstrip())
            return
        # the worker died, or is stopped (cancelled, the pool stopping); a job it left running ends here
        reason = worker.crash_reason() if outcome == "died" else "stopped"
        worker.stop()
        job = self.store.get_job(job_id)
        if job is not None and job.status == "running":
            if self._stopping.is_set():
                self.store.finish_job(job_id, "interrupted", STOPPED)
            else:
                self.store.finish_job(job_id, "failed", f"the fit process ended without a result ({reason})")

    def _watch(self, job_id: int, worker: WorkerProcess) -> str:
        """Until the worker says the job is recorded (``recorded``) or dies (``died``), or is to be stopped
        (``stop``): the job was cancelled (in any process), or the pool stops."""
        next_check_s = time.monotonic() + 1.0
        while not self._stopping.is_set():
            done = worker.wait_done(self.poll_s)
            if done is not False:
                return "recorded" if done else "died"
            if time.monotonic() >= next_check_s:
                next_check_s = time.monotonic() + 1.0
                job = self.store.get_job(job_id)
                if job is None or job.status != "running":
                    return "stop"
        return "stop"

    def _beat(self) -> None:
        sweep_every = max(1, int(self.stale_after_s / self.heartbeat_s / 3))
        ticks = 0
        while not self._stopping.wait(self.heartbeat_s):
            ticks += 1
            try:
                with self._lock:
                    mine = list(self._mine)
                self.store.beat(mine)
                if ticks % sweep_every == 0:
                    self.sweep()
            except Exception:
                log.exception("job heartbeat")
