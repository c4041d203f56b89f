"""Runs and calibration: predicted vs measured for stored runs, error per op class, kernels to fix first."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go  # type: ignore[import-untyped]
from markupsafe import Markup

from api.state import AppState
from perfmodel.store import RunRow
from perfmodel.units import format_time_s
from web.access import device
from web.metrics import op_metrics
from web.plotting import PALETTE, base_layout, esc, figure_json
from web.workloads import run_name

MAX_RUNS = 100_000
GL_THRESHOLD = 2000  # WebGL above this many points (SVG scatter slows down past a few thousand)
TOP_KERNELS = 25


@dataclass
class Compared:
    """Runs that could be predicted, as columns."""

    run_id: list[int] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    hardware: list[str] = field(default_factory=list)
    measured: list[float] = field(default_factory=list)
    predicted: list[float] = field(default_factory=list)
    roof: list[float] = field(default_factory=list)
    bound: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)


def compare(state: AppState, runs: list[RunRow]) -> Compared:
    """Predict every run on its device (vectorised per device); runs that cannot be predicted are counted."""
    out = Compared()
    by_device: dict[str, list[RunRow]] = defaultdict(list)
    for run in runs:
        by_device[run.hardware_id].append(run)
    for hardware_id, group in by_device.items():
        hw = device(state, hardware_id)
        if hw is None:
            out.skipped[f"unknown device {hardware_id}"] = len(group)
            continue
        m = op_metrics(hw, [r.op for r in group])
        if m.errors:
            out.skipped[f"ops the model rejects on {hardware_id}"] = len(m.errors)
        for j, i in enumerate(m.index):
            run = group[i]
            out.run_id.append(run.id)
            out.name.append(run_name(run))
            out.kind.append(run.op_kind)
            out.hardware.append(hardware_id)
            out.measured.append(run.measured_time_s)
            out.predicted.append(float(m.predicted_s[j]))
            out.roof.append(float(m.roof_s[j]))
            out.bound.append(m.bound[j])
    return out


def error_percent(c: Compared) -> np.ndarray[Any, np.dtype[np.float64]]:
    ratio: np.ndarray[Any, np.dtype[np.float64]] = np.asarray(c.predicted, dtype=float) / np.asarray(c.measured)
    return (ratio - 1.0) * 100.0


def summary(kinds: list[str], errors: np.ndarray[Any, Any]) -> list[dict[str, Any]]:
    """Per op class: count, median and p90 absolute error, bias (median signed error; > 0: model slower)."""
    groups: dict[str, list[float]] = defaultdict(list)
    for kind, err in zip(kinds, errors.tolist(), strict=True):
        groups[kind].append(err)
    if len(groups) > 1:
        groups["all"] = errors.tolist()
    rows = []
    for kind, errs in sorted(groups.items(), key=lambda kv: (kv[0] == "all", kv[0])):
        a = np.asarray(errs)
        rows.append({"op_kind": kind, "count": a.size, "median_abs_error_percent": float(np.median(np.abs(a))),
                     "p90_abs_error_percent": float(np.percentile(np.abs(a), 90)), "bias_percent": float(np.median(a))})
    return rows


def fix_first(c: Compared) -> list[dict[str, Any]]:
    """Kernels by measured time × headroom to their roof, i.e. the time a kernel at its roof would save."""
    measured, roof = np.asarray(c.measured), np.asarray(c.roof)
    saved = np.maximum(measured - roof, 0.0)
    total = float(measured.sum()) or 1.0
    order = np.argsort(-saved, kind="stable")[:TOP_KERNELS]
    return [{"run_id": c.run_id[i], "name": c.name[i], "kind": c.kind[i], "hardware": c.hardware[i],
             "measured_s": c.measured[i], "predicted_s": c.predicted[i], "bound": c.bound[i],
             "pct_roof": 100.0 * roof[i] / measured[i], "headroom_s": float(saved[i]),
             "share": 100.0 * measured[i] / total} for i in order.tolist()]


def scatter_figure(c: Compared, errors: np.ndarray[Any, Any]) -> go.Figure:
    """Predicted vs measured, log-log, with y = x and ±10 % / ±25 % bands; WebGL for many points."""
    fig = go.Figure()
    measured, predicted = np.asarray(c.measured), np.asarray(c.predicted)
    lo = float(min(measured.min(), predicted.min())) / 1.5
    hi = float(max(measured.max(), predicted.max())) * 1.5
    for band, alpha in ((0.25, 0.10), (0.10, 0.16)):
        fig.add_trace(go.Scatter(x=[lo, hi, hi, lo, lo], y=[lo * (1 - band), hi * (1 - band), hi * (1 + band),
                                                             lo * (1 + band), lo * (1 - band)],
                                 fill="toself", mode="lines", line={"width": 0}, fillcolor=f"rgba(46,139,87,{alpha})",
                                 name=f"±{band:.0%}".replace(" ", ""), hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x (exact)",
                             line={"color": "#333", "width": 1.2}, hoverinfo="skip"))
    trace = go.Scattergl if len(measured) > GL_THRESHOLD else go.Scatter
    kinds = sorted(set(c.kind))
    kind_arr = np.asarray(c.kind)
    for k, kind in enumerate(kinds):
        idx = np.nonzero(kind_arr == kind)[0]
        hover = [f"run {c.run_id[i]}: {esc(c.name[i])}<br>{esc(c.hardware[i])}<br>measured "
                 f"{format_time_s(c.measured[i])}, predicted {format_time_s(c.predicted[i])}<br>error "
                 f"{errors[i]:+.1f} %, bound {esc(c.bound[i])}" for i in idx.tolist()]
        fig.add_trace(trace(x=measured[idx], y=predicted[idx], mode="markers", name=esc(kind), hovertext=hover,
                            hoverinfo="text", marker={"size": 5, "color": PALETTE[k % len(PALETTE)], "opacity": 0.7}))
    base_layout(fig, "Predicted vs measured", "Measured time", "Predicted time", x_unit="s", y_unit="s")
    fig.update_xaxes(range=[np.log10(lo), np.log10(hi)])
    fig.update_yaxes(range=[np.log10(lo), np.log10(hi)], scaleanchor="x", scaleratio=1)
    return fig


def histogram_figure(errors: np.ndarray[Any, Any]) -> go.Figure:
    clipped = np.clip(errors, -100.0, 200.0)
    fig = go.Figure(go.Histogram(x=clipped, xbins={"start": -100, "end": 200, "size": 5}, name="runs",
                                 marker={"color": "#1f5fa8"}, hovertemplate="%{x} %: %{y} runs<extra></extra>"))
    for x, dash in ((-25, "dot"), (-10, "dash"), (0, "solid"), (10, "dash"), (25, "dot")):
        fig.add_vline(x=x, line={"color": "#2e8b57" if x else "#333", "dash": dash, "width": 1})
    base_layout(fig, "Error distribution (predicted / measured − 1; clipped to −100…200 %)",
                "Error [%]", "Runs", log=False, height=520)
    return fig


def unmodelled_share(state: AppState, hardware_id: str | None, trace_id: int | None) -> float | None:
    """Share of kernel time in uploaded traces (the last 50, or one) that no modelled op accounts for, in %
    (None without traces)."""
    store = state.store
    ids = [trace_id] if trace_id is not None else [u.id for u in store.list_trace_uploads(hardware_id)][-50:]
    totals = store.trace_totals(ids).values()
    total = sum(t.total_s for t in totals)
    unmatched = sum(t.total_s - t.matched_s for t in totals)
    return 100.0 * unmatched / total if total > 0 else None


def build(state: AppState, hardware_id: str | None, op_kind: str | None, source: str | None,
          trace_id: int | None) -> dict[str, Any]:
    """Everything the runs page shows (figures as JSON), computed once per data version and filter."""
    runs, total = state.store.list_runs(hardware_id=hardware_id, op_kind=op_kind, source=source,
                                        trace_upload_id=trace_id, limit=MAX_RUNS)
    c = compare(state, runs)
    out: dict[str, Any] = {"total": total, "shown": len(c.run_id), "skipped": c.skipped,
                           "unmodelled": unmodelled_share(state, hardware_id, trace_id)}
    if not c.run_id:
        return out
    errors = error_percent(c)
    scatter: Markup = figure_json(scatter_figure(c, errors))
    out.update(scatter=scatter, histogram=figure_json(histogram_figure(errors)), summary=summary(c.kind, errors),
               kernels=fix_first(c), webgl=len(c.run_id) > GL_THRESHOLD,
               within10=float(np.mean(np.abs(errors) <= 10) * 100), within25=float(np.mean(np.abs(errors) <= 25) * 100))
    return out
