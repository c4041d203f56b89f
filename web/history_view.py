"""The trace-history view: per op, its median time across stored traces (chosen by ids or by tags, oldest first)
with the model's prediction beside it and change points flagged (``POST /api/v1/trace-diffs/history``'s answer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]
from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup
from pydantic import ValidationError

from api.routers.trace_diffs import HistoryIn, post_history
from perfmodel.store import StoreError
from perfmodel.store.tags import parse_tags, tag_line
from web.access import app_state
from web.plotting import base_layout, esc, figure_json
from web.templating import render

MAX_CHARTS = 8  # ops charted: those with the most change points first


@dataclass
class SeriesView:
    series: dict[str, Any]
    chart: Markup


def trace_label(label: dict[str, Any]) -> str:
    """``#12 commit=3f2a9c1 environment=silicon`` (the file name where a trace has no tags)."""
    return f"#{label['id']} {tag_line(label['tags']) or label['filename']}"


def _chart(series: dict[str, Any], trace_labels: list[str]) -> Markup:
    # one category per position (a trace may come back later in the history: '1. #4 …', '3. #4 …')
    labels = [f"{i + 1}. {label}" for i, label in enumerate(trace_labels)]
    fig = go.Figure()
    measured = [None if m is None else m * 1e6 for m in series["median_s"]]
    predicted = [None if p is None else p * 1e6 for p in series["predicted_s"]]
    fig.add_trace(go.Scatter(x=labels, y=measured, mode="lines+markers", name="measured median",
                             line={"color": "#1f5fa8"}, hovertemplate="%{x}: %{y:.2f} µs<extra></extra>"))
    if any(p is not None for p in predicted):
        fig.add_trace(go.Scatter(x=labels, y=predicted, mode="lines+markers", name="model",
                                 line={"color": "#8a929b", "dash": "dash"},
                                 hovertemplate="%{x}: model %{y:.2f} µs<extra></extra>"))
    points = series["change_points"]
    if points:
        fig.add_trace(go.Scatter(
            x=[labels[p["index"]] for p in points], y=[measured[p["index"]] for p in points], mode="markers",
            name="change point", marker={"color": "#d1492e", "size": 13, "symbol": "x"},
            text=[f"{p['verdict']} {p['change_pct']:+.1f}%" if p.get("change_pct") is not None else p["verdict"]
                  for p in points], hovertemplate="%{x}: %{text}<extra></extra>"))
    base_layout(fig, esc(f"{series['name']} ({series['kind']})", 70), "trace (oldest first)",
                "median per call [µs]", log=False, height=320)
    # linear: no point drawn; ticks read '1. #4' (the traces' names are listed above the charts: slanted under a
    # half-width chart they ran over the axis title)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels, tickmode="array", tickvals=labels,
                     ticktext=[" ".join(label.split(" ", 2)[:2]) for label in labels])
    return figure_json(fig)


def _request(tags: str, traces: str, changed_only: bool) -> HistoryIn | str:
    """The history request the form describes, or what is wrong with it."""
    try:
        ids = [int(t) for t in traces.replace(",", " ").split()] if traces.strip() else None
        wanted = parse_tags([tags]) if tags.strip() else None
        return HistoryIn(traces=ids, tags=wanted, changed_only=changed_only)
    except ValueError as exc:  # a pydantic ValidationError is a ValueError
        if isinstance(exc, ValidationError):
            return "; ".join(str(e["msg"]) for e in exc.errors())
        return f"traces: expected stored trace ids separated by commas ({exc})"
    except StoreError as exc:
        return str(exc)


def page(request: Request, tags: str, traces: str, changed_only: bool) -> HTMLResponse:
    """GET /trace-history: the form (tags or ids) and, once given, one chart per changed op."""
    state = app_state(request)
    context: dict[str, Any] = {"tags": tags, "traces": traces, "changed_only": changed_only, "data": None,
                               "charts": []}
    if not tags.strip() and not traces.strip():
        return render(request, "trace_history.html", **context)
    body = _request(tags, traces, changed_only)
    if isinstance(body, str):
        return render(request, "trace_history.html", status_code=422, error=body, **context)
    try:
        data = post_history(body, state)
    except HTTPException as exc:
        return render(request, "trace_history.html", status_code=exc.status_code, error=str(exc.detail), **context)
    labels = [trace_label(label) for label in data["labels"]]
    context["data"], context["labels"] = data, labels
    context["charts"] = [SeriesView(s, _chart(s, labels)) for s in data["series"][:MAX_CHARTS]]
    return render(request, "trace_history.html", **context)
