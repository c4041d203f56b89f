"""POST /calibrations (fit on stored runs, versioned, never overwritten), GET /calibrations[/{id}]."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from api.deps import get_state, require_read, require_write
from api.schemas import Versioned
from api.state import AppState
from perfmodel.calibration.stored import NoSuchCalibration, fit_stored

router = APIRouter(tags=["calibration"])
CALIBRATION_ID = Path(ge=1, le=2**31 - 1)


class RunFilter(BaseModel):
    """Which stored runs of the device to fit on (every given field must hold)."""

    model_config = ConfigDict(extra="forbid")
    op_kind: str | None = None
    source: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
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
    notes: str | None = Field(default=None, max_length=10_000)


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


@router.post("/calibrations", response_model=CalibrationOut, status_code=201, dependencies=[Depends(require_write)])
def create_calibration(body: CalibrationCreate, state: AppState = Depends(get_state)) -> dict[str, Any]:
    """Fit the device's model to the stored runs the filter selects; stored as a new version."""
    hardware, _ = state.hardware(body.hardware)
    try:
        calibration_id = fit_stored(state.store, hardware, body.filter.model_dump(), folds=body.folds,
                                    base_calibration=body.base_calibration, notes=body.notes)
    except NoSuchCalibration as exc:
        raise HTTPException(404, str(exc)) from exc
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    return _out(state.store.get_calibration(calibration_id))


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
