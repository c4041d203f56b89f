"""GET /jobs[/{id}] (status, stage, progress, result, error of long work), DELETE /jobs/{id} (cancel)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Query
from pydantic import BaseModel

from api.deps import get_state, require_read, require_write
from api.schemas import Versioned
from api.state import AppState
from perfmodel.store import JobRow

router = APIRouter(tags=["jobs"])
JOB_ID = Path(ge=1, le=2**31 - 1)
API_PREFIX = "/api/v1"
JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled", "interrupted"]


class JobResult(BaseModel):
    calibration_id: int
    url: str


class JobOut(Versioned):
    id: int
    kind: str
    status: JobStatus
    stage: str | None
    progress: float
    request: dict[str, Any]
    result: JobResult | None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    url: str


class JobList(Versioned):
    items: list[JobOut]


def job_url(job_id: int) -> str:
    return f"{API_PREFIX}/jobs/{job_id}"


def job_out(job: JobRow) -> dict[str, Any]:
    result = None if job.result_id is None else {
        "calibration_id": job.result_id, "url": f"{API_PREFIX}/calibrations/{job.result_id}"}
    return {"id": job.id, "kind": job.kind, "status": job.status, "stage": job.stage, "progress": job.progress,
            "request": job.request, "result": result, "error": job.error, "created_at": job.created_at,
            "started_at": job.started_at, "finished_at": job.finished_at, "url": job_url(job.id)}


@router.get("/jobs", response_model=JobList, dependencies=[Depends(require_read)])
def list_jobs(state: AppState = Depends(get_state), kind: str | None = Query(default=None, max_length=40),
              status: JobStatus | None = Query(default=None), limit: int = Query(default=100, ge=1, le=1000),
              offset: int = Query(default=0, ge=0, le=2**31 - 1)) -> dict[str, Any]:
    """Newest first."""
    return {"items": [job_out(j) for j in state.store.list_jobs(kind, status, limit=limit, offset=offset)]}


@router.get("/jobs/{job_id}", response_model=JobOut, dependencies=[Depends(require_read)])
def get_job(job_id: int = JOB_ID, state: AppState = Depends(get_state)) -> dict[str, Any]:
    job = state.store.get_job(job_id)
    if job is None:
        raise HTTPException(404, f"no job {job_id}")
    return job_out(job)


@router.delete("/jobs/{job_id}", response_model=JobOut, dependencies=[Depends(require_write)],
               responses={409: {"description": "the job had already ended"}})
def cancel_job(job_id: int = JOB_ID, state: AppState = Depends(get_state)) -> dict[str, Any]:
    """Cancel a queued or running job: a running fit is stopped within about a second and stores nothing."""
    job = state.store.cancel_job(job_id)
    if job is None:
        raise HTTPException(404, f"no job {job_id}")
    if job.status != "cancelled":
        raise HTTPException(409, f"job {job_id} had already ended: {job.status}")
    return job_out(job)
