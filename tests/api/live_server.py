"""A real service for tests: uvicorn in a subprocess on 127.0.0.1 (several workers), stopped afterwards."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 180.0  # two busy cores: importing and migrating in every worker can take a while


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def live_server(database_url: str, token: str, workers: int = 2, **env: str) -> Iterator[str]:
    """The base URL of ``uvicorn --factory api.main:create_app`` serving ``database_url``; the process is
    terminated (then killed) on exit, so no worker or connection outlives the test."""
    port = free_port()
    environ = {**os.environ, "PERFMODEL_DATABASE_URL": database_url, "PERFMODEL_API_TOKEN": token,
               "PYTHONPATH": str(ROOT), **env}
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed below; a file, not a pipe that could fill and block
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "api.main:create_app", "--host", "127.0.0.1",
         "--port", str(port), "--workers", str(workers), "--log-level", "warning",
         "--http", "api.http_protocol:CombinedWritesProtocol"],
        cwd=ROOT, env=environ, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline_s = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"the server exited ({process.returncode}): {log.read().decode(errors='replace')}")
            try:
                if httpx.get(f"{base}/api/v1/health", timeout=2.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline_s:
                raise RuntimeError(f"the server did not answer within {STARTUP_TIMEOUT_S} s")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
        log.close()
