"""Trace upload, the tiling explorer, what-if, and the dashboard's one JSON endpoint (what-if, not stored)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import HTMLResponse, JSONResponse

from perfmodel.ops import OpError
from perfmodel.specs import SpecError
from web.access import app_state, can_read, device, devices
from web.cache import data_version
from web.pages_analysis import DEFAULT_DEVICE, token_page, view_cache, workload_for
from web.plotting import figure_json
from web.templating import render
from web.tiling_view import tiling
from web.whatif_view import FACTOR_RANGE, KNOBS, what_if
from web.workloads import PRESETS

router = APIRouter(include_in_schema=False)
DTYPES = ("bf16", "fp16", "fp8_e4m3", "fp32", "tf32", "int8")


@router.get("/upload", response_class=HTMLResponse)
def upload_page(request: Request, hardware: str = DEFAULT_DEVICE) -> HTMLResponse:
    state = app_state(request)
    uploads = list(reversed(state.store.list_trace_uploads()))[:20] if can_read(request) else []
    ids = tuple(u.id for u in uploads)
    # an aggregate over every kernel row of those traces (~0.1 s CPU at 100,000 kernels): once per data version
    totals = view_cache(request).get(("trace_totals", ids, data_version(state.store)),
                                     lambda: state.store.trace_totals(ids))
    launches = {upload_id: t.kernels for upload_id, t in totals.items()}
    return render(request, "upload.html", devices=devices(state), hardware=hardware, uploads=uploads,
                  launches=launches)


@router.get("/tiling", response_class=HTMLResponse)
def tiling_page(request: Request, hardware: str = DEFAULT_DEVICE, m: int = 4096, n: int = 4096, k: int = 4096,
                batch: int = 1, dtype: str = "bf16", op: str = "") -> HTMLResponse:
    state = app_state(request)
    context: dict[str, Any] = {"devices": devices(state), "hardware": hardware, "m": m, "n": n, "k": k,
                               "batch": batch, "dtype": dtype, "op": op, "dtypes": DTYPES}
    hw = device(state, hardware)
    if hw is None:
        return render(request, "tiling.html", status_code=404, error=f"unknown hardware {hardware!r}", **context)
    try:
        raw = json.loads(op) if op.strip() else {"kind": "matmul", "m": m, "n": n, "k": k, "batch": batch,
                                                  "dtype": dtype}
        if not isinstance(raw, dict):
            raise ValueError("op: expected a JSON object with a 'kind'")
        key = ("tiling", hw.content_hash, json.dumps(raw, sort_keys=True))

        def compute() -> dict[str, Any]:
            view = tiling(hw, raw)
            figures = {name: figure_json(fig) for name in ("heatmap", "footprint", "pareto")
                       if (fig := getattr(view, name)) is not None}
            return {"view": view, "figures": figures}

        built = view_cache(request).get(key, compute)
    except (ValueError, OpError, SpecError) as exc:  # json errors are ValueErrors
        return render(request, "tiling.html", status_code=422, error=str(exc), **context)
    return render(request, "tiling.html", hw=hw, **built, **context)


@router.get("/whatif", response_class=HTMLResponse)
def whatif_page(request: Request, hardware: str = DEFAULT_DEVICE, workload: str = "llama3-8b-decode",
                ops: str = "", trace: str = "") -> HTMLResponse:
    if workload in ("trace", "runs") and not can_read(request):
        return token_page(request)
    state = app_state(request)
    context: dict[str, Any] = {"devices": devices(state), "hardware": hardware, "workload": workload, "ops": ops,
                               "trace": trace, "presets": PRESETS, "knobs": KNOBS, "factor_range": FACTOR_RANGE}
    hw = device(state, hardware)
    if hw is None:
        return render(request, "whatif.html", status_code=404, error=f"unknown hardware {hardware!r}", **context)
    try:
        result = what_if(hw, workload_for(request, hardware, workload, ops, trace), {}, f"{hw.id}-whatif")
    except (ValueError, SpecError) as exc:
        return render(request, "whatif.html", status_code=422, error=str(exc), hw=hw, **context)
    return render(request, "whatif.html", hw=hw, result=result, **context)


@router.post("/ui/api/whatif")
def whatif_api(request: Request, body: dict[str, Any] = Body(...)) -> JSONResponse:  # noqa: B008
    """``{"hardware", "workload", "ops", "trace", "factors": {"hbm", "sram", "flops", "clock"}}`` → the
    workload's time on the base and on the variant, per op. Nothing is stored."""
    workload = str(body.get("workload", "llama3-8b-decode"))
    if workload in ("trace", "runs") and not can_read(request):
        return JSONResponse({"detail": "a valid token is required to read stored runs"}, status_code=401)
    hardware = str(body.get("hardware", DEFAULT_DEVICE))
    hw = device(app_state(request), hardware)
    if hw is None:
        return JSONResponse({"detail": f"unknown hardware {hardware!r}", "field": "hardware"}, status_code=404)
    factors = body.get("factors", {})
    if not isinstance(factors, dict):
        return JSONResponse({"detail": "factors: expected an object", "field": "factors"}, status_code=422)
    try:
        work = workload_for(request, hardware, workload, str(body.get("ops", "")), str(body.get("trace", "")))
        variant_id = str(body.get("variant_id") or f"{hw.id}-whatif")
        return JSONResponse(_finite(what_if(hw, work, factors, variant_id)))
    except (ValueError, SpecError) as exc:
        return JSONResponse({"detail": str(exc), "field": getattr(exc, "field", None)}, status_code=422)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
