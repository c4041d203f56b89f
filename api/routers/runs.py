"""Measured runs: POST /runs, POST /runs/bulk, GET /runs (filters, pages), GET/DELETE /runs/{id}."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Path, Query

from api.deps import get_state, require_read, require_write
from api.schemas import RunCreate, RunIds, RunOut, RunPage
from api.state import AppState
from perfmodel.ops import make_op
from perfmodel.store import RunIn, RunRow
from perfmodel.store.tags import MAX_TAGS

router = APIRouter(tags=["runs"])
MAX_BULK_RUNS = 10_000
RUN_ID = Path(ge=1, le=2**63 - 1, description="run id")


def run_json(row: RunRow) -> dict[str, Any]:
    return {"id": row.id, "hardware": row.hardware_id, "op_kind": row.op_kind, "dtype": row.dtype, "op": row.op,
            "measured_time_s": row.measured_time_s, "source": row.source, "tags": row.tags,
            "created_at": row.created_at}


def _to_store(state: AppState, run: RunCreate, where: str = "") -> RunIn:
    state.hardware(run.hardware)  # unknown hardware -> 404 before anything is written
    try:
        op = make_op(run.op)
    except ValueError as exc:
        raise HTTPException(422, f"{where}op: {exc}") from exc
    canonical = op.to_dict()
    dtype = canonical.get("dtype") or canonical.get("from_dtype")
    return RunIn(hardware_id=run.hardware, op=canonical, measured_time_s=run.measured_time_s, source=run.source,
                 tags=run.tags, dtype=str(dtype) if dtype else None)


@router.post("/runs", response_model=RunOut, status_code=201, dependencies=[Depends(require_write)])
def add_run(body: RunCreate, state: AppState = Depends(get_state)) -> dict[str, Any]:
    run_id = state.store.add_run(_to_store(state, body))
    row = state.store.get_run(run_id)
    assert row is not None
    return run_json(row)


@router.post("/runs/bulk", response_model=RunIds, status_code=201, dependencies=[Depends(require_write)])
def add_runs(body: list[RunCreate], state: AppState = Depends(get_state)) -> dict[str, Any]:
    """All or nothing: one bad run and none is stored."""
    if len(body) > MAX_BULK_RUNS:
        raise HTTPException(422, f"{len(body)} runs: at most {MAX_BULK_RUNS} per request")
    runs = [_to_store(state, run, f"[{i}].") for i, run in enumerate(body)]
    return {"ids": state.store.add_runs(runs)}


@router.get("/runs", response_model=RunPage, dependencies=[Depends(require_read)])
def list_runs(
    state: AppState = Depends(get_state),
    hardware: str | None = None,
    op_kind: str | None = None,
    source: str | None = None,
    tag: list[str] = Query(default=[], description="key:value, repeatable; all must match"),
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
    offset: int = Query(default=0, ge=0, le=10**9),
) -> dict[str, Any]:
    tags: dict[str, str] = {}
    for item in tag:
        key, sep, value = item.partition(":")
        if not sep or not key:
            raise HTTPException(422, f"tag {item!r}: expected key:value")
        tags[key] = value
    if len(tags) > MAX_TAGS:  # a run holds at most MAX_TAGS, so more match nothing (4,000 were a 500 on SQLite)
        raise HTTPException(422, f"tag: {len(tags)} distinct tag keys; a run holds at most {MAX_TAGS}")
    rows, total = state.store.list_runs(hardware_id=hardware, op_kind=op_kind, source=source, tags=tags or None,
                                        created_after=created_after, created_before=created_before,
                                        limit=limit, offset=offset)
    return {"items": [run_json(r) for r in rows], "total": total, "limit": limit, "offset": offset}


@router.get("/runs/{run_id}", response_model=RunOut, dependencies=[Depends(require_read)])
def get_run(run_id: int = RUN_ID, state: AppState = Depends(get_state)) -> dict[str, Any]:
    row = state.store.get_run(run_id)
    if row is None:
        raise HTTPException(404, f"no run {run_id}")
    return run_json(row)


@router.delete("/runs/{run_id}", status_code=204, dependencies=[Depends(require_write)])
def delete_run(run_id: int = RUN_ID, state: AppState = Depends(get_state)) -> None:
    if not state.store.delete_run(run_id):
        raise HTTPException(404, f"no run {run_id}")
