"""Jobs in the store: lifecycle, a bounded claim, progress, atomic finish, cancel, interrupted (SQLite and PG)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import update

from perfmodel.store import Store
from perfmodel.store.models import JobModel, utcnow

REQUEST = {"hardware": "dev", "filter": {"source": "s"}}


def test_lifecycle_queued_running_succeeded_with_its_calibration(store: Store) -> None:
    job_id = store.add_job("calibration", REQUEST, "host:1:a")
    job = store.get_job(job_id)
    assert job is not None and (job.status, job.progress, job.request, job.done) == ("queued", 0.0, REQUEST, False)
    assert store.claim_job(job_id, "host:1:a", max_running=1) is True
    assert store.claim_job(job_id, "host:1:a", max_running=1) is None  # no longer queued
    assert store.report_progress(job_id, "classes", 0.4)
    assert store.report_progress(job_id, "classes", 7.0)  # clipped to 1
    running = store.get_job(job_id)
    assert running is not None and (running.status, running.stage, running.progress) == ("running", "classes", 1.0)
    assert running.started_at is not None
    calibration_id = store.finish_calibration_job(job_id, "dev", {"p": 1}, {"runs": 3}, "n")
    assert calibration_id is not None
    done = store.get_job(job_id)
    assert done is not None and (done.status, done.result_id, done.progress, done.done) == (
        "succeeded", calibration_id, 1.0, True)
    assert done.finished_at is not None and store.get_calibration(calibration_id) is not None
    assert not store.finish_job(job_id, "failed", "late")  # an ended job stays as it ended
    assert store.get_job(job_id).status == "succeeded"  # type: ignore[union-attr]


def test_a_cancelled_job_stores_no_calibration(store: Store) -> None:
    job_id = store.add_job("calibration", REQUEST, "o")
    assert store.claim_job(job_id, "o", 1)
    cancelled = store.cancel_job(job_id)
    assert cancelled is not None and cancelled.status == "cancelled" and cancelled.error
    assert not store.report_progress(job_id, "trees", 0.6)  # the worker learns it was cancelled
    assert store.finish_calibration_job(job_id, "dev", {"p": 1}, {}, None) is None
    assert store.list_calibrations() == []
    assert store.cancel_job(10**12) is None and store.get_job(0) is None


def test_failed_job_keeps_the_reason(store: Store) -> None:
    job_id = store.add_job("calibration", REQUEST, "o")
    assert store.finish_job(job_id, "failed", "filter: no stored runs")
    job = store.get_job(job_id)
    assert job is not None and (job.status, job.error) == ("failed", "filter: no stored runs")
    with pytest.raises(ValueError, match="succeeded"):
        store.finish_job(job_id, "succeeded")


def test_claims_are_bounded_even_when_racing(store: Store) -> None:
    ids = [store.add_job("calibration", REQUEST, "o") for _ in range(8)]
    results: list[bool | None] = []
    lock = threading.Lock()

    def claim(job_id: int) -> None:
        got = store.claim_job(job_id, "o", max_running=2)
        with lock:
            results.append(got)

    threads = [threading.Thread(target=claim, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 2 and results.count(False) == 6
    assert len(store.list_jobs(status="running")) == 2 and len(store.list_jobs(status="queued")) == 6
    assert store.count_jobs("calibration") == 8 and store.count_jobs("other") == 0


def test_interrupted_by_owner_and_by_stale_heartbeat(store: Store) -> None:
    gone = store.add_job("calibration", REQUEST, "host:1:dead")
    stale = store.add_job("calibration", REQUEST, "host:2:alive")
    fresh = store.add_job("calibration", REQUEST, "host:2:alive")
    with store.engine.begin() as conn:
        conn.execute(update(JobModel).where(JobModel.id == stale).values(heartbeat_at=utcnow() - timedelta(hours=1)))
    store.beat([fresh])
    assert store.active_owners() == {"host:1:dead", "host:2:alive"}
    assert store.interrupt_jobs("restarted", owners=["host:1:dead"], stale_after_s=60) == 2
    statuses = {j.id: (j.status, j.error) for j in store.list_jobs()}
    assert statuses == {gone: ("interrupted", "restarted"), stale: ("interrupted", "restarted"),
                        fresh: ("queued", None)}
    assert [j.id for j in store.list_jobs(kind="calibration", status="queued")] == [fresh]
    with pytest.raises(ValueError, match="status"):
        store.list_jobs(status="bogus")
