"""Whole models: a bundled LLM estimated on a device (``/models``) and the stored design-space sweeps
(``/sweeps``, ``/sweeps/{id}``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from perfmodel.graph.llm_config import bundled_names
from web.access import app_state, can_read, device
from web.access import devices as all_devices
from web.advice_view import advice_view
from web.models_view import CHARTS, MODEL_DTYPES, PHASES, WEIGHT_DTYPES, ModelQuery, estimate_view, parse_query
from web.pages_analysis import DEFAULT_DEVICE, int_or_none, token_page, view_cache
from web.sweeps_view import ROWS_PER_PAGE, SORTS, axis_heading, summarize, sweep_view, table_page
from web.templating import render
from web.training_view import PRECISIONS, TrainingQuery, parse_training_query, training_view

router = APIRouter(include_in_schema=False)
SWEEPS_PER_PAGE = 50
# the models page's file form posts to these REST routes (by route name, so a renamed path follows): file
# extension -> route; a config.json goes to POST /graphs/estimate as {"config": ...}
FILE_ROUTES = {"onnx": "estimate_onnx", "tflite": "estimate_tflite", "stablehlo": "estimate_stablehlo",
               "config": "estimate_graph"}


def file_form(request: Request) -> dict[str, Any]:
    """The upload form's endpoints and byte limits: the REST uploads' own (PERFMODEL_MAX_UPLOAD_BYTES for the
    files, PERFMODEL_MAX_BODY_BYTES for a config.json sent as a JSON body)."""
    settings = app_state(request).settings
    return {"endpoints": {kind: request.app.url_path_for(name) for kind, name in FILE_ROUTES.items()},
            "max_upload_bytes": settings.max_upload_bytes, "max_body_bytes": settings.max_body_bytes}


@router.get("/models", response_class=HTMLResponse)
def models_page(request: Request, model: str = ModelQuery.model, hardware: str = DEFAULT_DEVICE,
                devices: str = "1", tp: str = "", pp: str = "1", batch: str = str(ModelQuery.batch),
                prompt_tokens: str = str(ModelQuery.prompt_tokens), kv_len: str = "", dtype: str = ModelQuery.dtype,
                weight_dtype: str = "", phase: str = ModelQuery.phase, chart: str = ModelQuery.chart,
                advice: str = "") -> HTMLResponse:
    """Numbers arrive as strings so that a bad one is a message on the page, not FastAPI's JSON 422."""
    state = app_state(request)
    form = {"model": model, "devices": devices, "tp": tp, "pp": pp,
            "batch": batch, "prompt_tokens": prompt_tokens, "kv_len": kv_len, "dtype": dtype,
            "weight_dtype": weight_dtype, "phase": phase, "chart": chart}
    context: dict[str, Any] = {"devices": all_devices(state), "hardware": hardware, "form": form,
                               "models": bundled_names(), "phases": PHASES, "charts": CHARTS,
                               "dtypes": MODEL_DTYPES, "weight_dtypes": WEIGHT_DTYPES,
                               "file_form": file_form(request)}
    hw = device(state, hardware)
    if hw is None:
        return render(request, "models.html", status_code=404, error=f"unknown hardware {hardware!r}", **context)
    try:
        query = parse_query(form)
        key = ("model", hw.content_hash, dataclasses.astuple(query))
        view = view_cache(request).get(key, lambda: estimate_view(hw, query))
        tips = view_cache(request).get(("advice", *key[1:]), lambda: advice_view(hw, query)) if advice else None
    except ValueError as exc:  # a bad field, a model that does not fit, tp x pp that does not make the devices...
        return render(request, "models.html", status_code=422, error=str(exc), hw=hw, **context)
    return render(request, "models.html", hw=hw, view=view, advice=tips, **context)


@router.get("/models/training", response_class=HTMLResponse)
def training_page(request: Request, model: str = TrainingQuery.model, hardware: str = DEFAULT_DEVICE,
                  devices: str = str(TrainingQuery.devices), global_batch: str = str(TrainingQuery.global_batch),
                  seq_len: str = str(TrainingQuery.seq_len), precision: str = TrainingQuery.precision) -> HTMLResponse:
    """Training layouts ranked by step time; a bad field or a space with no layout is a message on the page."""
    state = app_state(request)
    form = {"model": model, "devices": devices, "global_batch": global_batch, "seq_len": seq_len,
            "precision": precision}
    context: dict[str, Any] = {"devices": all_devices(state), "hardware": hardware, "form": form,
                               "models": bundled_names(), "precisions": PRECISIONS}
    hw = device(state, hardware)
    if hw is None:
        return render(request, "training.html", status_code=404, error=f"unknown hardware {hardware!r}", **context)
    try:
        query = parse_training_query(form)
        key = ("training", hw.content_hash, dataclasses.astuple(query))
        view = view_cache(request).get(key, lambda: training_view(hw, query))
    except ValueError as exc:
        return render(request, "training.html", status_code=422, error=str(exc), hw=hw, **context)
    return render(request, "training.html", hw=hw, view=view, **context)


@router.get("/sweeps", response_class=HTMLResponse)
def sweeps_page(request: Request, offset: str = "0") -> HTMLResponse:
    if not can_read(request):
        return token_page(request)
    start = int_or_none(offset) or 0
    rows = app_state(request).store.list_sweeps(limit=SWEEPS_PER_PAGE + 1, offset=start)
    sweeps = [summarize(r) for r in rows[:SWEEPS_PER_PAGE]]
    return render(request, "sweeps.html", sweeps=sweeps, offset=start, per_page=SWEEPS_PER_PAGE,
                  more=len(rows) > SWEEPS_PER_PAGE)


@router.get("/sweeps/{sweep_id}", response_class=HTMLResponse)
def sweep_page(request: Request, sweep_id: str, sort: str = "workload", page: str = "1") -> HTMLResponse:
    if not can_read(request):
        return token_page(request)
    number = int_or_none(sweep_id)
    row = app_state(request).store.get_sweep(number) if number is not None else None
    if row is None:
        return render(request, "not_found.html", status_code=404, what=f"sweep {sweep_id!r}", back="/sweeps")
    key = ("sweep", row.id, row.created_at.isoformat())  # stored sweeps never change
    view = view_cache(request).get(key, lambda: sweep_view(row))
    order, shown_page, rows = table_page(view, sort, int_or_none(page) or 1)
    return render(request, "sweep.html", view=view, sort=order, sorts=SORTS, page=shown_page, page_rows=rows,
                  page_size=ROWS_PER_PAGE, headings={a: axis_heading(a) for a in view.axes if a != "devices"},
                  pareto_points=sum(1 for r in view.rows if r["pareto"]))
