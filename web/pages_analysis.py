"""Home, the roofline explorer and the runs/calibration page."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from web import runs_view
from web.access import app_state, can_read, device, devices
from web.cache import ViewCache, data_version
from web.calibrations import calibration_summaries
from web.explorer import explorer
from web.plotting import figure_json
from web.templating import render
from web.workloads import PRESETS, Workload, from_runs, parse_ops, preset

router = APIRouter(include_in_schema=False)
DEFAULT_DEVICE = "nvidia-h100-sxm5-80gb"
OPS_PAGE_SIZE = 50  # rows of the roofline explorer's op table per page


def view_cache(request: Request) -> ViewCache:
    cache: ViewCache = request.app.state.dashboard_cache
    return cache


def token_page(request: Request) -> HTMLResponse:
    return render(request, "token_required.html", status_code=401)


def int_or_none(value: str | None) -> int | None:
    return int(value) if value and value.strip().isdigit() and len(value.strip()) < 10 else None


@router.api_route("/", methods=["GET", "HEAD"], response_class=HTMLResponse)
def home(request: Request) -> HTMLResponse:
    state = app_state(request)
    stats: dict[str, Any] = {"devices": len(devices(state))}
    if can_read(request):
        _, stats["runs"] = state.store.list_runs(limit=1)
        uploads = state.store.list_trace_uploads()
        stats["traces"] = sum(t.status != "failed" for t in uploads)  # failed ones are a log of attempts
        stats["failed_traces"] = len(uploads) - stats["traces"]
        stats["calibrations"] = len(state.store.list_calibrations())
    return render(request, "home.html", stats=stats)


def workload_for(request: Request, hardware_id: str, workload: str, ops: str, trace: str | None) -> Workload:
    """The workload a form asked for: a preset, pasted ops, one stored trace, or the device's stored runs."""
    store = app_state(request).store
    trace_id = int_or_none(trace)
    if workload == "trace" and trace_id is not None:
        return from_runs(store, hardware_id, trace_id)
    if workload == "runs":
        return from_runs(store, hardware_id, None)
    if workload == "custom" and ops.strip():
        return parse_ops(ops)
    return preset(workload if workload in PRESETS else next(iter(PRESETS)))


@router.get("/roofline", response_class=HTMLResponse)
def roofline_page(request: Request, hardware: str = "", workload: str = "llama3-8b-decode",
                  ops: str = "", trace: str | None = None, page: str = "1") -> HTMLResponse:
    state = app_state(request)
    stored = workload in ("trace", "runs")
    if stored and not can_read(request):
        return token_page(request)
    hardware = hardware or trace_device(request, workload, trace) or DEFAULT_DEVICE
    hw = device(state, hardware)
    context: dict[str, Any] = {"devices": devices(state), "hardware": hardware, "workload": workload, "ops": ops,
                               "trace": trace or "", "presets": PRESETS,
                               "traces": [t for t in state.store.list_trace_uploads() if t.status != "failed"]
                               if can_read(request) else []}  # as /trace-diff: a failed upload has no runs
    if hw is None:
        return render(request, "roofline.html", status_code=404, error=f"unknown hardware {hardware!r}", **context)
    key = ("roofline", hw.content_hash, workload, ops, trace, data_version(state.store) if stored else None)

    def compute() -> dict[str, Any]:
        view = explorer(hw, workload_for(request, hardware, workload, ops, trace))
        return {"figure": figure_json(view.figure), "view": view}

    built = view_cache(request).get(key, compute)
    pages = max(1, -(-len(built["view"].rows) // OPS_PAGE_SIZE))
    return render(request, "roofline.html", hw=hw, page=min(int_or_none(page) or 1, pages) or 1,
                  page_size=OPS_PAGE_SIZE, **built, **context)


def trace_device(request: Request, workload: str, trace: str | None) -> str | None:
    """The device a stored trace was uploaded for, where the roofline explorer shows that trace and names no
    device (a link or a bookmark of ``/roofline?workload=trace&trace=N``: it drew the H100 with no runs)."""
    trace_id = int_or_none(trace)
    if workload != "trace" or trace_id is None:
        return None
    upload = app_state(request).store.get_trace_upload(trace_id)
    return upload.hardware_id if upload is not None else None


@router.get("/runs", response_class=HTMLResponse)
async def runs_page(request: Request, hardware: str = "", op_kind: str = "", source: str = "",
                    trace: str = "") -> HTMLResponse:
    if not can_read(request):
        return token_page(request)
    state = app_state(request)
    filters = (hardware or None, op_kind or None, source or None, int_or_none(trace))
    version = await run_in_threadpool(data_version, state.store)
    key = ("runs", filters, version)
    built = await run_in_threadpool(view_cache(request).get, key, lambda: runs_view.build(state, *filters))
    calibrations: list[dict[str, Any]] = []
    calibration_note = None
    if hardware:
        cal_key = ("calibrations", hardware, version)
        cached = view_cache(request).peek(cal_key)
        if cached is None:
            cached = await run_in_threadpool(calibration_summaries, state, hardware)
            view_cache(request).put(cal_key, cached)
        calibrations, calibration_note = cached
    return render(request, "runs.html", data=built, devices=devices(state), hardware=hardware, op_kind=op_kind,
                  source=source, trace=trace, calibrations=calibrations, calibration_note=calibration_note)


@router.get("/trace-diff", response_class=HTMLResponse)
async def trace_diff_page(request: Request, base: str = "", new: str = "", threshold: str = "5") -> HTMLResponse:
    """Two stored traces compared: ``web/compare_view.py``."""
    from web import compare_view

    if not can_read(request):
        return token_page(request)
    return await run_in_threadpool(compare_view.page, request, base, new, threshold)


@router.get("/trace-history", response_class=HTMLResponse)
async def trace_history_page(request: Request, tags: str = "", traces: str = "",
                             changed_only: bool = False) -> HTMLResponse:
    """Per op, its time across stored traces with the model beside it: ``web/history_view.py``."""
    from web import history_view

    if not can_read(request):
        return token_page(request)
    return await run_in_threadpool(history_view.page, request, tags, traces, changed_only)
