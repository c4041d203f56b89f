"""POST /predict, /predict/batch and /search.

/predict answers repeated questions from a cache of serialised responses without leaving the
event loop (a request whose exact bytes were answered before is replayed by ``api.response_cache`` before it gets
here); a miss is computed there too (a calibrated one in the thread pool). /predict/batch de-duplicates the ops (a
model's layers repeat), predicts the distinct ones vectorised and serialises with orjson.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool

from api.deps import READ_SCHEME, get_state, read_bearer, require_read
from api.response_cache import SCOPE_KEY
from api.routers.convert import cost_json, finite, json_bytes, json_response, op_key
from api.schemas import BatchOut, BatchRequest, CostOut, PredictRequest, SearchOut, SearchRequest
from api.state import AppState
from perfmodel import __version__
from perfmodel.calibration import Calibration, apply_calibration
from perfmodel.hardware import Hardware
from perfmodel.ops import Op, make_op
from perfmodel.roofline import predict_many
from perfmodel.search.engine import search

router = APIRouter(tags=["predict"])


# /predict is the hot path: no dependencies to solve (a third of a cached answer's CPU in FastAPI); the read check
# runs inline and the operation declares the same security as the routes that take require_read
@router.post("/predict", response_model=CostOut, openapi_extra={"security": [{READ_SCHEME: []}]})
async def predict_one(body: PredictRequest, request: Request) -> Response:
    """Predict one op: time, bound, per-level and per-engine breakdown, schedule."""
    state: AppState = request.app.state.perfmodel
    if state.settings.read_requires_token:
        await require_read(state, await read_bearer(request))
    bundled = state.bundled(body.hardware)
    hardware = bundled or (await run_in_threadpool(state.hardware, body.hardware))[0]
    calibration_id: int | None = None
    calibration: Calibration | None = None
    uncalibrated = body.calibration in (None, "", "none")
    if not uncalibrated:
        calibration_id, calibration = await run_in_threadpool(state.calibrations.resolve, hardware.id,
                                                              body.calibration)
    key = b"|".join((hardware.content_hash.encode(), op_key(body.op), body.timing.encode(),
                     b"warm" if body.warm_cache else b"cold", str(calibration_id).encode()))
    hit = state.cached(key)
    if hit is None:
        # one op is a millisecond or two of CPU: computed on the event loop (a thread-pool hand-off costs a
        # good share of that and, with one worker, buys no parallelism under the GIL); a calibrated one reads
        # its fitted model and goes to the pool
        hit = (_predict_bytes(hardware, body, None, None) if calibration is None
               else await run_in_threadpool(_predict_bytes, hardware, body, calibration_id, calibration))
        state.remember(key, hit)
    replay_key = request.scope.get(SCOPE_KEY)
    if replay_key is not None and bundled is not None and uncalibrated:
        # these bytes get this answer for as long as the process runs ("latest" may change): api.response_cache
        state.remember_response(replay_key, hit)
    return json_response(hit)


def _predict_bytes(hardware: Hardware, body: PredictRequest, calibration_id: int | None,
                   calibration: Calibration | None) -> bytes:
    # a calibration corrects the model in the GEMM space it was fitted on
    space = calibration.space if calibration is not None else "full"
    batch = predict_many(hardware, [make_op(body.op)], timing=body.timing, warm_cache=body.warm_cache,
                         space=space)
    if calibration is not None:
        batch = apply_calibration(calibration, batch)
    if not math.isfinite(batch[0].time_s):  # valid fields whose work overflows (1e308 FLOPs per element): no time
        raise HTTPException(422, f"op: the {batch[0].op_kind} op's work overflows a float64 (time "
                                 f"{batch[0].time_s}): not a real workload")
    out = batch[0].to_dict()
    out["calibration"] = calibration_id
    return json_bytes(out)


@router.post("/predict/batch", response_model=BatchOut, dependencies=[Depends(require_read)])
def predict_batch(body: BatchRequest, state: AppState = Depends(get_state)) -> Response:
    """Predict up to ``PERFMODEL_MAX_BATCH_OPS`` (10,000) ops at once, vectorised, in order."""
    limit = state.settings.max_batch_ops
    if len(body.ops) > limit:
        raise HTTPException(422, f"{len(body.ops)} ops: a batch holds at most {limit} (PERFMODEL_MAX_BATCH_OPS)")
    hardware, _ = state.hardware(body.hardware)
    calibration_id, calibration = state.calibrations.resolve(hardware.id, body.calibration)
    slots: dict[bytes, int] = {}
    inverse: list[int] = []
    distinct: list[Op] = []
    for index, raw in enumerate(body.ops):
        key = op_key(raw)
        slot = slots.get(key)
        if slot is None:
            try:
                distinct.append(make_op(raw))
            except ValueError as exc:
                raise HTTPException(422, f"ops[{index}]: {exc}") from exc
            slot = slots[key] = len(slots)
        inverse.append(slot)
    space = calibration.space if calibration is not None else body.space
    batch = predict_many(hardware, distinct, timing=body.timing, warm_cache=body.warm_cache,
                         space=space)
    if calibration is not None:
        batch = apply_calibration(calibration, batch)
    overflowing = np.flatnonzero(~np.isfinite(np.asarray(batch.time_s, dtype=float)))
    if overflowing.size:  # as /predict: valid fields whose work overflows have no time
        index = inverse.index(int(overflowing[0]))
        raise HTTPException(422, f"ops[{index}]: the op's work overflows a float64: not a real workload")
    out: dict[str, Any] = {"model_version": __version__, "hardware_id": hardware.id,
                           "hardware_hash": hardware.content_hash, "calibration": calibration_id,
                           "distinct_ops": len(distinct)}
    if body.layout == "columns":
        out["columns"] = batch.to_columns(inverse)
    else:
        rows = batch.to_dicts()
        out["results"] = [rows[slot] for slot in inverse]
    return json_response(json_bytes(out))


@router.post("/search", response_model=SearchOut, dependencies=[Depends(require_read)])
def search_one(body: SearchRequest, state: AppState = Depends(get_state)) -> dict[str, Any]:
    """The best schedule of one op, its top-k, the Pareto front (time vs on-chip footprint)."""
    hardware, _ = state.hardware(body.hardware)
    result = search(hardware, make_op(body.op), top_k=body.top_k, budget=body.budget, seed=body.seed)
    if not math.isfinite(result.best.time_s):  # as /predict (it was a 500: the response's times were null)
        raise HTTPException(422, f"op: the {result.best.op_kind} op's work overflows a float64: not a real workload")
    out: dict[str, Any] = finite(result.to_dict())
    out["best"] = cost_json(result.best)
    return out
