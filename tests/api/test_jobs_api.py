"""Calibration as a job over HTTP: 202 + Location, GET progress and result, a failure's reason, DELETE cancels,
the pool's bound, jobs left by a dead process marked interrupted at start-up (SQLite and PostgreSQL)."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from job_client import calibrate, wait_for_job

from api.main import create_app
from api.settings import Settings
from perfmodel.store import RunIn, Store

TOKEN = "job-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
H100 = "nvidia-h100-sxm5-80gb"
MI300X = "amd-mi300x"


def _client(url: str, **overrides: Any) -> TestClient:
    return TestClient(create_app(Settings(database_url=url, api_token=TOKEN, **overrides)))


def _runs(client: TestClient, hardware: str = H100, source: str = "synthetic", slower: float = 1.3) -> None:
    shapes = [(64 * i, 1024, 512 * j) for i in (1, 2, 4, 8) for j in (1, 2, 4)]
    ops = [{"kind": "matmul", "m": m, "n": n, "k": k, "dtype": "bf16"} for m, n, k in shapes]
    model = client.post("/api/v1/predict/batch", json={"hardware": hardware, "ops": ops}).json()["results"]
    runs = [{"hardware": hardware, "op": op, "measured_time_s": slower * r["time_s"], "source": source}
            for op, r in zip(ops, model, strict=True)]
    assert client.post("/api/v1/runs/bulk", json=runs, headers=AUTH).status_code == 201


def test_post_answers_202_and_the_job_reports_progress_then_the_calibration(database_url: str) -> None:
    with _client(database_url) as client:
        _runs(client)
        body = {"hardware": H100, "filter": {"source": "synthetic"}, "notes": "job test"}
        assert client.post("/api/v1/calibrations", json=body).status_code == 401
        queued = client.post("/api/v1/calibrations", json=body, headers=AUTH)
        assert queued.status_code == 202, queued.text
        job = queued.json()
        assert queued.headers["location"] == job["url"] == f"/api/v1/jobs/{job['id']}"
        assert (job["kind"], job["progress"], job["result"]) == ("calibration", 0.0, None)
        assert job["status"] in ("queued", "running")  # a free worker may have claimed it already
        assert job["request"]["filter"]["source"] == "synthetic"
        seen: list[tuple[str, str | None, float]] = []
        while True:
            now = client.get(job["url"]).json()
            seen.append((now["status"], now["stage"], now["progress"]))
            if now["status"] not in ("queued", "running"):
                break
            time.sleep(0.05)
        assert now["status"] == "succeeded", now
        assert now["progress"] == 1.0 and now["stage"] == "done" and now["finished_at"] >= now["started_at"]
        progress = [p for _, _, p in seen]
        assert progress == sorted(progress)  # never goes back
        calibration = client.get(now["result"]["url"]).json()
        assert calibration["id"] == now["result"]["calibration_id"] and calibration["notes"] == "job test"
        assert calibration["runs_used"] == 12
        listed = client.get("/api/v1/jobs", params={"kind": "calibration", "status": "succeeded"}).json()["items"]
        assert [j["id"] for j in listed] == [job["id"]]
        assert client.get("/api/v1/jobs", params={"status": "running"}).json()["items"] == []
        assert client.get("/api/v1/jobs", params={"status": "bogus"}).status_code == 422
        assert client.get("/api/v1/jobs/999").status_code == 404
        assert client.delete(job["url"], headers=AUTH).status_code == 409  # it had ended
        spec = client.get("/openapi.json").json()["paths"]
        assert "202" in spec["/api/v1/calibrations"]["post"]["responses"]
        assert {"get", "delete"} <= set(spec["/api/v1/jobs/{job_id}"])


def test_refusals_come_at_once_and_a_failed_fit_says_why(database_url: str) -> None:
    with _client(database_url) as client:
        _runs(client)
        empty = client.post("/api/v1/calibrations", json={"hardware": H100, "filter": {"source": "nothing"}},
                            headers=AUTH)
        assert empty.status_code == 422 and "no stored runs" in empty.json()["detail"]
        assert client.post("/api/v1/calibrations", json={"hardware": "no-such"}, headers=AUTH).status_code == 404
        unknown_base = client.post("/api/v1/calibrations", json={"hardware": H100, "base_calibration": 77},
                                   headers=AUTH)
        assert unknown_base.status_code == 404
        # a base calibration of another vendor's device: refused by the fit itself, the job fails with the reason
        _runs(client, MI300X, source="amd")
        amd = calibrate(client, {"hardware": MI300X, "filter": {"source": "amd"}}, AUTH)
        queued = client.post("/api/v1/calibrations", headers=AUTH,
                             json={"hardware": H100, "filter": {"source": "synthetic"}, "base_calibration": amd["id"]})
        assert queued.status_code == 202
        failed = wait_for_job(client, queued.headers["location"])
        assert failed["status"] == "failed" and failed["result"] is None
        assert "base" in failed["error"] and MI300X in failed["error"], failed["error"]
        assert [c["id"] for c in client.get("/api/v1/calibrations").json()["items"]] == [amd["id"]]


def test_delete_cancels_a_running_fit_and_nothing_is_stored(database_url: str) -> None:
    with _client(database_url) as client:
        _runs(client)
        queued = client.post("/api/v1/calibrations", json={"hardware": H100}, headers=AUTH).json()
        while (job := client.get(queued["url"]).json())["status"] == "queued":
            time.sleep(0.02)
        assert job["status"] == "running"
        cancelled = client.delete(queued["url"], headers=AUTH)
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        time.sleep(3.0)  # the pool stops the worker within about a second; give it time to store, if it wrongly would
        job = client.get(queued["url"]).json()
        assert job["status"] == "cancelled" and job["result"] is None
        assert client.get("/api/v1/calibrations").json()["items"] == []
        assert client.delete(queued["url"]).status_code == 401


def test_the_pool_runs_one_fit_at_a_time_and_queues_the_rest(database_url: str) -> None:
    with _client(database_url, job_workers=1, job_max_active=3) as client:
        _runs(client)
        urls = [client.post("/api/v1/calibrations", json={"hardware": H100}, headers=AUTH).headers["location"]
                for _ in range(3)]
        full = client.post("/api/v1/calibrations", json={"hardware": H100}, headers=AUTH)
        assert full.status_code == 429 and "at most 3" in full.json()["detail"]
        jobs = [wait_for_job(client, u) for u in urls]
        assert [j["status"] for j in jobs] == ["succeeded"] * 3
        # one at a time, in order: each started once the one before had finished
        for before, after in itertools.pairwise(jobs):
            assert datetime.fromisoformat(before["finished_at"]) <= datetime.fromisoformat(after["started_at"])
        assert [j["result"]["calibration_id"] for j in jobs] == sorted(j["result"]["calibration_id"] for j in jobs)


def test_jobs_left_by_a_dead_process_are_interrupted_at_start_up(database_url: str) -> None:
    store = Store(database_url)
    store.migrate()
    store.add_run(RunIn(H100, {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "bf16"}, 1e-5, "s"))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    dead_owner = f"{socket.gethostname()}:{int(gone.stdout)}:feed"
    running = store.add_job("calibration", {"hardware": H100}, dead_owner)
    assert store.claim_job(running, dead_owner, 1)
    queued = store.add_job("calibration", {"hardware": H100}, dead_owner)
    store.dispose()
    with _client(database_url) as client:
        for job_id in (running, queued):
            job = client.get(f"/api/v1/jobs/{job_id}").json()
            assert job["status"] == "interrupted" and "restarted" in job["error"], job
    # a service that stops marks its own unfinished jobs interrupted
    with _client(database_url, job_workers=1) as client:
        url = client.post("/api/v1/calibrations", json={"hardware": H100}, headers=AUTH).headers["location"]
    store = Store(database_url)
    try:
        job_id = int(url.rsplit("/", 1)[1])
        job = store.get_job(job_id)
        assert job is not None and job.status == "interrupted" and job.error and "stopped" in job.error, job
    finally:
        store.dispose()


def _worker_pids() -> list[int]:
    """This process's job worker processes (``python -m perfmodel.jobs``)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"perfmodel.jobs" in command:
            pids.append(int(proc.name))
    return pids


def test_a_worker_killed_mid_fit_fails_its_job_and_the_next_gets_a_fresh_one(database_url: str) -> None:
    with _client(database_url, job_workers=1) as client:
        _runs(client)
        url = client.post("/api/v1/calibrations", json={"hardware": H100}, headers=AUTH).headers["location"]
        while client.get(url).json()["status"] == "queued" or not _worker_pids():
            time.sleep(0.02)
        (pid,) = _worker_pids()
        os.kill(pid, signal.SIGKILL)
        job = wait_for_job(client, url)
        assert job["status"] == "failed" and "killed" in job["error"] and job["result"] is None, job
        assert client.get("/api/v1/calibrations").json()["items"] == []
        assert calibrate(client, {"hardware": H100}, AUTH)["runs_used"] == 12
        assert len(_worker_pids()) == 1  # the warm worker stays for the next job
