"""The trace-diff view: two stored traces compared (``POST /api/v1/trace-diffs``'s answer), a waterfall of the
change by op kind and the regressed / most changed ops on the new device's roofline, arrows before -> after."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]
from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from api.routers.trace_diffs import TraceDiffIn, trace_diff
from api.state import AppState, UnknownHardware
from perfmodel.compare import CompareError
from perfmodel.compare.load import parse_threshold
from perfmodel.roofline import predict_many
from web.access import app_state
from web.cache import ViewCache, data_version
from web.plotting import PALETTE, base_layout, esc, figure_json, roofline_figure
from web.templating import render

MAX_ARROWS = 12  # ops drawn on the roofline: the regressions first, then the largest changes
MAX_BARS = 12  # op kinds in the waterfall (the rest summed)


@dataclass
class DiffView:
    data: dict[str, Any]
    waterfall: Markup
    roofline: Markup | None


def _waterfall(data: dict[str, Any]) -> Markup:
    kinds = data["kinds"]
    shown, rest = kinds[:MAX_BARS], kinds[MAX_BARS:]
    names = ["base", *(esc(k["name"], 40) for k in shown)]
    values = [data["base_total_s"] * 1e3, *(k["change_s"] * 1e3 for k in shown)]
    measures = ["absolute", *("relative" for _ in shown)]
    if rest:
        names.append(f"{len(rest)} other kinds")
        values.append(sum(k["change_s"] for k in rest) * 1e3)
        measures.append("relative")
    names.append("new")
    values.append(data["new_total_s"] * 1e3)
    measures.append("total")
    fig = go.Figure(go.Waterfall(x=names, y=values, measure=measures, connector={"line": {"color": "#8a929b"}},
                                 increasing={"marker": {"color": "#d1492e"}},
                                 decreasing={"marker": {"color": "#2e8b57"}},
                                 totals={"marker": {"color": "#1f5fa8"}},
                                 hovertemplate="%{x}: %{y:.3f} ms<extra></extra>"))
    base_layout(fig, "Device time by op kind, base → new (ms)", "", "device time [ms]", log=False, height=420)
    fig.update_xaxes(type="category")  # base_layout's linear x axis drew no bar for the kind names
    return figure_json(fig)


def _roofline(state: AppState, data: dict[str, Any]) -> Markup | None:
    groups = [g for g in data["groups"] if g["op"] is not None and g["new_bound"] is not None]
    chosen = [g for g in groups if g["verdict"] == "regression"]
    chosen += sorted((g for g in groups if g["verdict"] != "regression"),
                     key=lambda g: -abs(g["new_total_s"] - g["base_total_s"]))[: max(MAX_ARROWS - len(chosen), 0)]
    chosen = chosen[:MAX_ARROWS]
    if not chosen or data["new_hardware"] is None:
        return None
    try:
        hw, _ = state.hardware(data["new_hardware"])
    except UnknownHardware:
        return None
    batch = predict_many(hw, [g["op"] for g in chosen], timing="kernel")
    fig = roofline_figure([hw], None, f"Changed ops on {hw.id}: base ○ → new ●", labels=False, height=520)
    for i, g in enumerate(chosen):
        flops, bytes_ = float(batch.flops[i]), float(batch.compulsory_bytes[i])
        if flops <= 0 or bytes_ <= 0:
            continue
        intensity = flops / bytes_
        before, after = flops / g["base_median_s"], flops / g["new_median_s"]
        colour = "#d1492e" if g["verdict"] == "regression" else PALETTE[i % len(PALETTE)]
        label = esc(f"{g['name']} ({g['kind']}) {g['change_pct']:+.1f}% {g['verdict']}")
        fig.add_trace(go.Scatter(x=[intensity, intensity], y=[before, after], mode="markers", name=label,
                                 marker={"color": colour, "size": [9, 11], "symbol": ["circle-open", "circle"]},
                                 hovertemplate=label + "<br>%{y:.3s}FLOP/s<extra></extra>"))
        fig.add_annotation(x=math.log10(intensity), y=math.log10(after), ax=math.log10(intensity),
                           ay=math.log10(before), xref="x", yref="y", axref="x", ayref="y", showarrow=True,
                           arrowhead=2, arrowwidth=1.5, arrowcolor=colour, text="")
    return figure_json(fig)


def build(state: AppState, base_trace: int, new_trace: int, threshold_pct: float) -> DiffView:
    """The view of ``base_trace`` -> ``new_trace``; ``HTTPException`` as the API answers it."""
    data = trace_diff(state, TraceDiffIn(base_trace=base_trace, new_trace=new_trace, threshold_pct=threshold_pct))
    return DiffView(data, _waterfall(data), _roofline(state, data))


def page(request: Request, base: str, new: str, threshold: str) -> HTMLResponse:
    """GET /trace-diff: the form to pick two stored traces, and their comparison once both are chosen."""
    state = app_state(request)
    traces = [t for t in state.store.list_trace_uploads() if t.status != "failed"]
    context: dict[str, Any] = {"traces": traces, "base": base, "new": new, "threshold": threshold, "view": None}
    base_id, new_id = _int(base), _int(new)
    try:
        threshold_pct = parse_threshold(threshold or "5")
    except CompareError as exc:
        return render(request, "trace_diff.html", status_code=422, error=str(exc), **context)
    if base_id is None or new_id is None:
        return render(request, "trace_diff.html", **context)
    key = ("trace-diff", base_id, new_id, threshold_pct, data_version(state.store))
    cache: ViewCache = request.app.state.dashboard_cache
    try:
        view = cache.get(key, lambda: build(state, base_id, new_id, threshold_pct))
    except HTTPException as exc:
        return render(request, "trace_diff.html", status_code=exc.status_code, error=str(exc.detail), **context)
    context["view"] = view
    return render(request, "trace_diff.html", **context)


def _int(value: str) -> int | None:
    text = value.strip()
    return int(text) if text.isdigit() and len(text) < 10 else None
