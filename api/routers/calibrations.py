"""POST /calibrations (a job fitting stored runs; each fit a new version, never overwritten),
GET /calibrations[/{id}]."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from api.deps import get_state, require_read, require_write
from api.routers.jobs import JobOut, job_out, job_url
from api.schemas import ErrorOut, Notes, Versioned
from api.state import AppState
from perfmodel.calibration.stored import MAX_FIT_RUNS
from perfmodel.jobs import CALIBRATION, QueueFull
from perfmodel.store.tags import MAX_TAGS

router = APIRouter(tags=["calibration"])
CALIBRATION_ID = Path(ge=1, le=2**31 - 1)


class RunFilter(BaseModel):
    """Which stored runs of the device to fit on (every given field must hold)."""

    model_config = ConfigDict(extra="forbid")
    op_kind: str | None = None
    source: str | None = None
    tags: dict[str, str] = Field(default_factory=dict, max_length=MAX_TAGS,
                                 description=f"at most {MAX_TAGS}: a run holds no more")
    created_after: datetime | None = None
    created_before: datetime | None = None
    trace_upload_id: int | None = Field(default=None, ge=1, le=2**31 - 1)


class CalibrationCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hardware: str
    filter: RunFilter = Field(default_factory=RunFilter)
    base_calibration: int | None = Field(
        default=None, ge=1, le=2**31 - 1,
        description="a calibration of a related device (same vendor/family) that seeds classes without data")
    folds: int = Field(default=5, ge=2, le=20)
    notes: Notes | None = None  # a NUL is a 422 here (it was a 202, a whole fit, then "failed: storing notes")


class CalibrationOut(Versioned):
    id: int
    hardware: str
    created_at: datetime
    runs_used: int
    filter: dict[str, Any]
    report: dict[str, Any]
    notes: str | None


class CalibrationList(Versioned):
    items: list[CalibrationOut]


def _out(row: Any) -> dict[str, Any]:
    return {"id": row.id, "hardware": row.hardware_id, "created_at": row.created_at,
            "runs_used": int(row.fit_report.get("runs_used", 0)), "filter": row.fit_report.get("filter", {}),
            "report": row.fit_report, "notes": row.notes}


@router.post("/calibrations", response_model=JobOut, status_code=202, dependencies=[Depends(require_write)],
             responses={429: {"model": ErrorOut, "description": "too many calibrations queued or running"}})
def create_calibration(body: CalibrationCreate, response: Response,
                       state: AppState = Depends(get_state)) -> dict[str, Any]:
    """Queue a fit of the device's model to the stored runs the filter selects: 202 with the job (``Location``:
    its URL). ``GET /api/v1/jobs/{id}`` shows its stage and progress; once ``succeeded``, ``result`` names the
    calibration, stored as a new version. Checked at once: the device, the base calibration, that runs match."""
    hardware, _ = state.hardware(body.hardware)
    if body.base_calibration is not None and state.store.get_calibration(body.base_calibration) is None:
        raise HTTPException(404, f"no calibration {body.base_calibration}")
    chosen = {k: v for k, v in body.filter.model_dump().items() if v not in (None, {}, "")}
    _, total = state.store.list_runs(hardware_id=hardware.id, limit=0, **chosen)
    if total == 0 and body.base_calibration is None:
        raise HTTPException(422, f"filter: no stored runs of {hardware.id!r} match; store runs or upload a trace "
                                 "first, or seed from a related device with a base calibration")
    if total > MAX_FIT_RUNS:
        raise HTTPException(422, f"filter: {total} runs; a calibration fits at most {MAX_FIT_RUNS}")
    try:
        job_id = state.jobs.submit(CALIBRATION, {**body.model_dump(mode="json"), "hardware": hardware.id})
    except QueueFull as exc:
        raise HTTPException(429, str(exc), headers={"Retry-After": "30"}) from exc
    job = state.store.get_job(job_id)
    assert job is not None
    response.headers["Location"] = job_url(job_id)
    return job_out(job)


@router.get("/calibrations", response_model=CalibrationList, dependencies=[Depends(require_read)])
def list_calibrations(state: AppState = Depends(get_state),
                      hardware: str | None = Query(default=None)) -> dict[str, Any]:
    return {"items": [_out(r) for r in state.store.list_calibrations(hardware)]}


@router.get("/calibrations/{calibration_id}", response_model=CalibrationOut, dependencies=[Depends(require_read)])
def get_calibration(calibration_id: int = CALIBRATION_ID, state: AppState = Depends(get_state)) -> dict[str, Any]:
    row = state.store.get_calibration(calibration_id)
    if row is None:
        raise HTTPException(404, f"no calibration {calibration_id}")
    return _out(row)
