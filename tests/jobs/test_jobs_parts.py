"""The job pool's parts: the address-space cap, progress written at a bounded rate (and a cancel noticed),
who counts as a dead owner, the reason a crashed worker gives."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from perfmodel.jobs import JobCancelled, StoredProgress, owner_id
from perfmodel.jobs.pool import dead_owner
from perfmodel.jobs.worker import last_error
from perfmodel.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'jobs.sqlite3'}")
    s.migrate()
    yield s
    s.dispose()


def test_the_cap_turns_a_large_allocation_into_a_memory_error() -> None:
    code = ("import numpy as np, resource\n"
            "from perfmodel.jobs.run import cap_memory\n"
            "used = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()\n"
            "cap_memory(used + 200 * 2**20)\n"
            "small = np.ones(2**20)\n"  # 8 MB fits under the cap
            "try:\n    np.ones(2**27)\nexcept MemoryError:\n    print('MemoryError')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "MemoryError", out.stderr  # 1 GiB refused


def test_progress_is_written_at_a_bounded_rate_and_a_cancel_stops_the_work(store: Store) -> None:
    job_id = store.add_job("calibration", {}, "o")
    assert store.claim_job(job_id, "o", 1)
    now = [0.0]
    progress = StoredProgress(store, job_id, min_interval_s=0.5, clock=lambda: now[0])
    for i in range(100):  # 100 calls over 10 s of one stage: at most 2 writes per second
        now[0] = i * 0.1
        progress("classes", i / 100)
    assert progress.writes == 20
    progress("trees", 0.995)  # a new stage is written at once
    job = store.get_job(job_id)
    assert job is not None and (job.stage, job.progress) == ("trees", 0.995) and progress.writes == 21
    store.cancel_job(job_id)
    now[0] += 1.0
    with pytest.raises(JobCancelled):
        progress("trees", 0.999)


def test_dead_owners() -> None:
    me = owner_id("mine")
    host = socket.gethostname()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    assert dead_owner(f"{host}:{int(gone.stdout)}:x", me)  # its process is gone
    assert dead_owner(f"{host}:{os.getpid()}:earlier", me)  # our pid, another pool: a restart reused the pid
    assert not dead_owner(me, me)
    assert not dead_owner(f"{host}:{os.getppid()}:x", me)  # alive
    assert not dead_owner(f"other-host:{int(gone.stdout)}:x", me)  # another machine: its heartbeat tells


def test_a_crashed_worker_names_its_exception() -> None:
    traceback = ('Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
                 "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) disk I/O error\n"
                 "(Background on this error at: https://sqlalche.me/e/21/e3q8)\n")
    assert last_error(traceback) == "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) disk I/O error"
    assert last_error("Killed\n") == "Killed" and last_error("") == ""


def test_a_worker_killed_before_it_takes_the_job_is_reported_not_raised_as_a_broken_pipe(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that dies while it is being started (killed between its spawn and its configuration) makes
    ``send`` raise WorkerDied with the reason, which the pool records as the job's failure; before, the
    BrokenPipeError escaped and ended the pool's thread with the job left running."""
    from perfmodel.jobs import worker as worker_module

    real_popen = subprocess.Popen

    def popen_that_dies(args: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        child = real_popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
                           **kwargs)  # type: ignore[call-overload]
        child.wait()  # dead before the pool writes its configuration
        return child  # type: ignore[no-any-return]

    monkeypatch.setattr(subprocess, "Popen", popen_that_dies)  # the module the worker calls it through
    process = worker_module.WorkerProcess("sqlite://", None)
    with pytest.raises(worker_module.WorkerDied, match="killed"):
        process.send(1)
    process.stop()  # closing pipes to a dead worker does not raise either
    assert not process.running


def test_an_internal_error_in_a_job_reaches_the_service_log(store: Store, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """A job that fails with an internal error has its traceback in the service's log, not only its one-line
    error (qa14: the worker printed it into its stderr temp file, which nobody read unless the worker died)."""
    import time

    from perfmodel.jobs.pool import JobPool

    (tmp_path / "sitecustomize.py").write_text(  # in the worker only: its fit raises an unexpected error
        "import perfmodel.calibration.stored as s\n"
        "def broken(*a, **k):\n    raise RuntimeError('qa14 injected')\n"
        "s.fit_selected = broken\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    pool = JobPool(store, workers=1, memory_bytes=None, poll_s=0.05)
    pool.start()
    try:
        job_id = pool.submit("calibration", {"hardware": "nvidia-a100-sxm4-80gb"})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            job = store.get_job(job_id)
            if job is not None and job.status not in ("queued", "running"):
                break
            time.sleep(0.2)
        time.sleep(0.5)  # the pool thread logs once the worker says the job is recorded
    finally:
        pool.stop()
    job = store.get_job(job_id)
    assert job is not None and job.status == "failed"
    assert job.error == "internal error in the fit: RuntimeError: qa14 injected"
    logged = [r.getMessage() for r in caplog.records if r.name == "perfmodel.jobs.pool"]
    assert any(f"job {job_id}: the fit process wrote:" in m and "Traceback" in m and "qa14 injected" in m
               for m in logged), logged
