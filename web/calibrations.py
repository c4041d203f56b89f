"""Per-op-class error of each stored calibration: what GET /api/v1/comparisons answers, computed in process."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException

from api.routers.comparisons import MAX_COMPARED_RUNS, compare
from api.state import AppState

MAX_SHOWN = 5


def calibration_summaries(state: AppState, hardware_id: str) -> tuple[list[dict[str, Any]], str | None]:
    """(the device's newest calibrations with their per-class summaries, a message if one cannot be applied)."""
    out: list[dict[str, Any]] = []
    for calibration in state.store.list_calibrations(hardware_id)[-MAX_SHOWN:]:
        try:
            compared = compare(state, hardware_id, str(calibration.id), limit=MAX_COMPARED_RUNS)
        except HTTPException as exc:
            return out, f"calibration {calibration.id}: {exc.detail}"
        except ValueError as exc:
            return out, f"calibration {calibration.id}: {exc}"
        out.append({"id": calibration.id, "created_at": calibration.created_at, "notes": calibration.notes,
                    "summary": compared["summary"]})
    return out, None
