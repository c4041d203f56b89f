"""POST /schedules/rank: explicit candidate schedules of one op in, predicted time, rank and reason out.

For compilers that are not Python (TVM MetaSchedule, IREE, MLIR pipelines): the schedules are costed
vectorised by the search engine's costing functions (``perfmodel.tuners.ranking``); the answer is
deterministic for a model version and hardware hash (both in the response).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse

from api.deps import get_state, require_read
from api.routers.convert import json_bytes, json_response
from api.schedule_columns import Columns, OrjsonRoute, to_columns
from api.schedule_schemas import RankOut, RankRequest, ScheduleCandidate
from api.state import AppState
from perfmodel import __version__
from perfmodel.tuners.candidates import ScheduleError
from perfmodel.tuners.ranking import ScheduleRanking, rank_schedules

router = APIRouter(tags=["schedules"], dependencies=[Depends(require_read)], route_class=OrjsonRoute)
FIELDS = tuple(ScheduleCandidate.__annotations__)


@router.post("/schedules/rank", response_model=RankOut)
def rank(body: RankRequest, state: AppState = Depends(get_state)) -> Response:
    """Rank up to 100,000 explicit schedules of one GEMM-like or attention op on one device: per candidate
    the predicted time, rank (null where it cannot run), bound, waves, on-chip footprint and a reason.
    A malformed request (missing tile field, both or neither of candidates/columns) is a 422 naming the field."""
    hardware, _ = state.hardware(body.hardware)
    try:
        columns = _columns(body) if body.gathered is None else to_columns(body.gathered)
        ranking = rank_schedules(hardware, body.op, columns)
    except ScheduleError as exc:
        return JSONResponse({"detail": str(exc), "field": exc.field_name, "model_version": __version__},
                            status_code=422)
    return json_response(json_bytes(_body(ranking, body.layout)))


def _columns(body: RankRequest) -> Columns:
    if (body.candidates is None) == (body.columns is None):
        raise ScheduleError("candidates", "give the schedules either as candidates (objects) or as columns")
    if body.columns is not None:
        return {name: np.array(values, dtype=np.float64) for name, values in body.columns.items()}  # null: NaN
    rows = body.candidates or []
    present = set().union(*rows) if rows else set()
    return to_columns({name: [row.get(name) for row in rows] for name in FIELDS if name in present})


def _body(r: ScheduleRanking, layout: str) -> dict[str, Any]:
    ok = r.valid
    costed = np.array([not reason for reason in r.candidates.input_reason])

    def where(mask: np.ndarray[Any, Any], values: np.ndarray[Any, Any]) -> list[Any]:
        out: list[Any] = values.tolist()
        for i in np.nonzero(~mask)[0].tolist():
            out[i] = None
        return out

    columns: dict[str, list[Any]] = {
        "index": list(range(r.time_s.size)), "rank": where(ok, r.rank), "time_s": where(ok, r.time_s),
        "bound": where(ok, np.asarray(r.bound, dtype=object)),
        "waves": where(costed, r.waves), "tiles": where(costed, r.tiles), "resident": where(costed, r.resident),
        "footprint_bytes": where(costed, r.footprint_bytes), "reason": r.reasons,
    }
    out: dict[str, Any] = {
        "model_version": r.model_version, "hardware_id": r.hardware_id, "hardware_hash": r.hardware_hash,
        "family": r.family, "problem": r.problem, "sram_bytes_per_unit": r.sram_bytes_per_unit,
        "count": int(r.time_s.size), "valid": int(ok.sum()), "order": r.order.tolist(),
    }
    if layout == "columns":
        out["columns"] = columns
    else:
        # a dict display per row: a third of the CPU of dict(zip(names, row)) for 10,000 rows
        out["results"] = [
            {"index": index, "rank": rank, "time_s": time_s, "bound": bound, "waves": waves, "tiles": tiles,
             "resident": resident, "footprint_bytes": footprint, "reason": reason}
            for index, rank, time_s, bound, waves, tiles, resident, footprint, reason in zip(
                *columns.values(), strict=True)]
    return out
