"""POST /predict, /predict/batch and /search."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from api.deps import get_state, require_read
from api.routers.convert import cost_json, finite
from api.schemas import BatchOut, BatchRequest, CostOut, PredictRequest, SearchOut, SearchRequest
from api.state import AppState
from perfmodel.ops import make_op
from perfmodel.roofline import predict, predict_many
from perfmodel.search.engine import search

router = APIRouter(tags=["predict"], dependencies=[Depends(require_read)])


@router.post("/predict", response_model=CostOut)
def predict_one(body: PredictRequest, state: AppState = Depends(get_state)) -> dict[str, Any]:
    """Predict one op: time, bound, per-level and per-engine breakdown, schedule."""
    if body.calibration not in (None, "latest"):
        raise HTTPException(422, "calibrations arrive with the calibration issue: use null or 'latest'")
    hardware, _ = state.hardware(body.hardware)
    op = make_op(body.op)
    key = state.cache_key(hardware.content_hash, op.to_dict(), body.timing, body.warm_cache)
    hit = state.cached(key)
    if hit is not None:
        return hit
    result = cost_json(predict(hardware, op, timing=body.timing, warm_cache=body.warm_cache), body.calibration)
    state.remember(key, result)
    return result


@router.post("/predict/batch", response_model=BatchOut)
def predict_batch(body: BatchRequest, state: AppState = Depends(get_state)) -> dict[str, Any]:
    """Predict up to ``PERFMODEL_MAX_BATCH_OPS`` (10,000) ops at once, vectorised, in order."""
    limit = state.settings.max_batch_ops
    if len(body.ops) > limit:
        raise HTTPException(422, f"{len(body.ops)} ops: a batch holds at most {limit} (PERFMODEL_MAX_BATCH_OPS)")
    hardware, _ = state.hardware(body.hardware)
    ops = []
    for index, raw in enumerate(body.ops):
        try:
            ops.append(make_op(raw))
        except ValueError as exc:
            raise HTTPException(422, f"ops[{index}]: {exc}") from exc
    batch = predict_many(hardware, ops, timing=body.timing, warm_cache=body.warm_cache, space=body.space)
    return {"hardware_id": hardware.id, "hardware_hash": hardware.content_hash,
            "results": [cost_json(cost) for cost in batch]}


@router.post("/search", response_model=SearchOut)
def search_one(body: SearchRequest, state: AppState = Depends(get_state)) -> dict[str, Any]:
    """The best schedule of one op, its top-k, the Pareto front (time vs on-chip footprint)."""
    hardware, _ = state.hardware(body.hardware)
    result = search(hardware, make_op(body.op), top_k=body.top_k, budget=body.budget, seed=body.seed)
    out: dict[str, Any] = finite(result.to_dict())
    out["best"] = cost_json(result.best)
    return out
