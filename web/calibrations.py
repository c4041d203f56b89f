"""Per-op-class error of each stored calibration: what GET /api/v1/comparisons answers, computed in process."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from fastapi import HTTPException

from api.routers.comparisons import MAX_COMPARED_RUNS, ComparedRun, compare
from api.state import AppState
from web.stored_runs import stored_runs

MAX_SHOWN = 5


def device_runs(state: AppState, hardware_id: str, limit: int = MAX_COMPARED_RUNS) -> list[ComparedRun]:
    """The device's first ``limit`` runs by id (those ``compare`` would read), from the columns the dashboard
    holds in memory (``web/stored_runs.py``): no ORM row, no tags. Read once for all the device's calibrations
    (each ``compare`` read them again with their tags: 2.6 s of a 3.0 s first ``/runs?hardware=`` over 16,176
    A100 runs with one calibration; issue 27, pages14)."""
    snap = stored_runs(state.store).read(state.store)
    code = snap.code_of["hardware_id"].get(hardware_id, -1)
    rows = np.nonzero(snap.text["hardware_id"].code == code)[0][:limit]
    kinds, sources, texts = (snap.text[name][rows].tolist() for name in ("op_kind", "source", "op_text"))
    parsed: dict[str, dict[str, Any]] = {}  # a trace repeats its shapes: each distinct op text parsed once
    return [ComparedRun(int(run_id), hardware_id, kind, source, float(measured),
                        parsed[text] if text in parsed else parsed.setdefault(text, json.loads(text)))
            for run_id, kind, source, measured, text in zip(snap.run_id[rows].tolist(), kinds, sources,
                                                            snap.measured_s[rows].tolist(), texts, strict=True)]


def calibration_summaries(state: AppState, hardware_id: str) -> tuple[list[dict[str, Any]], str | None]:
    """(the device's newest calibrations with their per-class summaries, a message if one cannot be applied)."""
    out: list[dict[str, Any]] = []
    calibrations = state.store.list_calibrations(hardware_id)[-MAX_SHOWN:]
    runs = device_runs(state, hardware_id) if calibrations else []
    for calibration in calibrations:
        try:
            compared = compare(state, hardware_id, str(calibration.id), limit=MAX_COMPARED_RUNS, runs=runs)
        except HTTPException as exc:
            return out, f"calibration {calibration.id}: {exc.detail}"
        except ValueError as exc:
            return out, f"calibration {calibration.id}: {exc}"
        out.append({"id": calibration.id, "created_at": calibration.created_at, "notes": calibration.notes,
                    "summary": compared["summary"]})
    return out, None
