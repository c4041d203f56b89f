"""Tests' client side of long work: POST /api/v1/calibrations answers 202 with a job; wait for its end.

    from job_client import calibrate, wait_for_job
"""

from __future__ import annotations

import time
from typing import Any, Protocol

DONE = ("succeeded", "failed", "cancelled", "interrupted")


class Response(Protocol):
    status_code: int
    headers: Any
    text: str

    def json(self) -> Any: ...


class Client(Protocol):
    def get(self, url: str, **kwargs: Any) -> Any: ...
    def post(self, url: str, **kwargs: Any) -> Any: ...


def wait_for_job(client: Client, url: str, timeout_s: float = 180.0, poll_s: float = 0.1) -> dict[str, Any]:
    """GET the job at ``url`` until it has ended; its last state (an AssertionError if it never ends)."""
    deadline_s = time.monotonic() + timeout_s
    while True:
        job: dict[str, Any] = client.get(url).json()
        if job["status"] in DONE:
            return job
        assert time.monotonic() < deadline_s, f"job still {job['status']} after {timeout_s} s: {job}"
        time.sleep(poll_s)


def calibrate(client: Client, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """POST a calibration, wait for its job to succeed, return the stored calibration (GET /calibrations/{id})."""
    queued = client.post("/api/v1/calibrations", json=body, headers=headers)
    assert queued.status_code == 202, queued.text
    job = wait_for_job(client, queued.headers["location"])
    assert job["status"] == "succeeded", job
    calibration: dict[str, Any] = client.get(job["result"]["url"]).json()
    return calibration
