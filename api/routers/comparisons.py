"""GET /comparisons: every stored run with its prediction and error, and a summary per op kind."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from fastapi import APIRouter, Depends, HTTPException, Query

from api.deps import get_state, require_read
from api.schemas import ComparisonsOut
from api.state import AppState, UnknownHardware
from perfmodel.calibration import apply_calibration
from perfmodel.roofline import predict_many

router = APIRouter(tags=["comparisons"], dependencies=[Depends(require_read)])
MAX_COMPARED_RUNS = 100_000


class ComparedRun(NamedTuple):
    """What ``compare`` reads of a stored run (a ``RunRow`` has these and more): the dashboard passes these,
    built from the runs' columns it holds in memory, instead of reading every run with its tags again."""

    id: int
    hardware_id: str
    op_kind: str
    source: str
    measured_time_s: float
    op: dict[str, Any]


@router.get("/comparisons", response_model=ComparisonsOut)
def comparisons(
    state: AppState = Depends(get_state),
    hardware: str | None = None,
    calibration: str | None = None,
    op_kind: str | None = None,
    source: str | None = None,
    limit: int = Query(default=10_000, ge=1, le=MAX_COMPARED_RUNS),
) -> dict[str, Any]:
    """Predicted vs measured for the stored runs (vectorised per device): error = predicted / measured − 1.

    ``calibration``: an id (its device's runs), ``latest`` (each device's newest calibration) or none.
    """
    return compare(state, hardware, calibration, op_kind, source, limit)


def compare(state: AppState, hardware: str | None, calibration: str | None, op_kind: str | None = None,
            source: str | None = None, limit: int = 10_000,
            runs: Sequence[ComparedRun] | None = None) -> dict[str, Any]:
    """What GET /comparisons answers (the dashboard calls it directly). ``HTTPException`` for an unknown or
    mismatched calibration, ``ValueError`` for one this version cannot read. ``runs``: the runs the filters
    select (at most ``limit``, by id), already read; else they are read from the store."""
    if calibration not in (None, "", "none", "latest"):
        if not calibration.isdigit():
            raise HTTPException(422, f"calibration: expected an id, 'latest' or none, got {calibration!r}")
        chosen = state.store.get_calibration(int(calibration))
        if chosen is None:
            raise HTTPException(404, f"no calibration {calibration}")
        if hardware not in (None, chosen.hardware_id):
            raise HTTPException(422, f"calibration {calibration} was fitted for {chosen.hardware_id!r}, "
                                     f"not {hardware!r}")
        hardware = chosen.hardware_id
    rows: Sequence[Any] = runs if runs is not None else state.store.list_runs(
        hardware_id=hardware, op_kind=op_kind, source=source, limit=limit, offset=0)[0]
    by_device: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        by_device[row.hardware_id].append(i)
    out: list[dict[str, Any]] = []
    for device, idx in by_device.items():
        try:
            hw, _ = state.hardware(device)
        except UnknownHardware:
            continue
        calibration_id, fitted = state.calibrations.resolve(device, calibration)
        batch = predict_many(hw, [rows[i].op for i in idx],
                             space=fitted.space if fitted is not None else "compact")
        if fitted is not None:
            batch = apply_calibration(fitted, batch)
        for j, i in enumerate(idx):
            run = rows[i]
            predicted = float(batch.time_s[j])
            out.append({"run_id": run.id, "hardware": device, "op_kind": run.op_kind, "source": run.source,
                        "measured_time_s": run.measured_time_s, "predicted_time_s": predicted,
                        "error_percent": (predicted / run.measured_time_s - 1.0) * 100.0,
                        "bound": str(batch.bound[j]), "calibration": calibration_id})
    out.sort(key=lambda r: r["run_id"])
    kinds: dict[str, list[float]] = defaultdict(list)
    for r in out:
        kinds[r["op_kind"]].append(r["error_percent"])
    summary = [{"op_kind": kind, "count": len(errors),
                "median_abs_error_percent": float(np.median(np.abs(errors))),
                "p90_abs_error_percent": float(np.percentile(np.abs(errors), 90)),
                "bias_percent": float(np.median(errors))} for kind, errors in sorted(kinds.items())]
    return {"hardware": hardware, "calibration": calibration, "rows": out, "summary": summary}
