"""A warm worker process (``python -m perfmodel.jobs``) that fits jobs one at a time.

Importing numpy, the store and the fit costs 1-6 s of CPU on a busy machine: a worker pays it once and then
takes job ids on stdin, answering a line on stdout when each is recorded. Stopping it (a cancel, the pool
stopping, a crash) is killing it; the next job starts a fresh one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from typing import IO

CHILD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class WorkerProcess:
    """The parent's handle on one worker process (used by one pool thread only)."""

    def __init__(self, database_url: str, memory_bytes: int | None) -> None:
        self.database_url, self.memory_bytes = database_url, memory_bytes
        self._child: subprocess.Popen[bytes] | None = None
        self._errors: IO[bytes] | None = None
        self._errors_read = 0  # how much of the worker's stderr ``new_errors`` has handed on
        self.last_used_s = time.monotonic()

    @property
    def running(self) -> bool:
        return self._child is not None and self._child.poll() is None

    def send(self, job_id: int) -> None:
        """Hand ``job_id`` (claimed: running) to the worker, starting one if none is alive."""
        message = json.dumps({"job_id": job_id}).encode() + b"\n"
        for _attempt in range(2):
            if not self.running:
                self.stop()
                try:
                    self._start()
                except BrokenPipeError:  # it died before it could read its configuration
                    raise WorkerDied(self.crash_reason()) from None
            assert self._child is not None and self._child.stdin is not None
            try:
                self._child.stdin.write(message)
                self._child.stdin.flush()
                break
            except BrokenPipeError:  # it was just retiring (MAX_JOBS, memory: exit 0): start another
                if self._child.wait() != 0:
                    raise WorkerDied(self.crash_reason()) from None
        self.last_used_s = time.monotonic()

    def wait_done(self, timeout_s: float) -> bool | None:
        """True once the worker says the job is recorded, False after ``timeout_s`` without, None if it died."""
        assert self._child is not None and self._child.stdout is not None
        readable, _, _ = select.select([self._child.stdout], [], [], timeout_s)
        if not readable:
            return False
        line = self._child.stdout.readline()
        self.last_used_s = time.monotonic()
        return True if line else None

    def new_errors(self, limit: int = 20_000) -> str:
        """What the worker wrote to its stderr since the last call (its last ``limit`` bytes): a job's traceback
        (``run_calibration_job`` prints one for an internal error) that would otherwise stay in its temp file."""
        if self._errors is None:
            return ""
        self._errors.seek(0, os.SEEK_END)
        end = self._errors.tell()
        start = max(self._errors_read, end - limit)
        self._errors.seek(start)
        text = self._errors.read(end - start).decode("utf-8", "replace")
        self._errors_read = end
        return text

    def crash_reason(self) -> str:
        """Why the worker ended: its exit status and the exception line of its stderr."""
        code = self._child.wait() if self._child is not None else None
        why = ("killed by the system (out of memory?)" if code is not None and code < 0 else f"exit code {code}")
        last = ""
        if self._errors is not None:
            self._errors.seek(0)
            last = last_error(self._errors.read()[-20_000:].decode("utf-8", "replace"))
        return why + (f": {last}" if last else "")

    def stop(self, grace_s: float = 3.0) -> None:
        """Terminate the worker (killed after ``grace_s``) and forget it."""
        child, errors = self._child, self._errors
        self._child, self._errors = None, None
        if child is not None:
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(grace_s)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            for stream in (child.stdin, child.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):  # a pipe to a killed worker may not flush
                        stream.close()
        if errors is not None:
            errors.close()

    def _start(self) -> None:
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the worker; closed by stop)
        self._errors_read = 0
        self._child = subprocess.Popen([sys.executable, "-m", "perfmodel.jobs"], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=self._errors, env={**os.environ, **CHILD_ENV})
        assert self._child.stdin is not None
        config = {"database_url": self.database_url, "memory_bytes": self.memory_bytes}
        self._child.stdin.write(json.dumps(config).encode() + b"\n")
        self._child.stdin.flush()


class WorkerDied(RuntimeError):
    """The worker process ended before it took the job; the message says why (its exit status, its error)."""


def last_error(stderr: str) -> str:
    """The exception line of a traceback on ``stderr`` (``ValueError: ...``), else its last line; at most 500
    characters."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b", line)]
    return (errors or lines or [""])[-1][:500]
