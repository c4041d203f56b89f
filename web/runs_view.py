"""Runs and calibration: predicted vs measured for stored runs, error per op class, kernels to fix first.

Built from columns (``web/run_columns.py``) and aggregated on the server: the histogram arrives as binned
counts, the per-class table as one row per class, the scatter as typed arrays (WebGL above a few thousand
points) with a hover template instead of one hover string per point."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go  # type: ignore[import-untyped]

from api.state import AppState
from web.plotting import PALETTE, base_layout, esc, figure_json
from web.run_columns import (
    Coded,
    FloatArray,
    RunColumns,
    RunPredictions,
    codes,
    predict_columns,
    read_run_columns,
    run_names,
)

GL_THRESHOLD = 3000  # WebGL above this many points (SVG scatter slows down past a few thousand); a default sample
# (SCATTER_MAX_POINTS, a few more where a class keeps its minimum: 2,002 of 3,023 demo runs) stays SVG
SCATTER_MAX_POINTS = 2000  # past this, a sample: SVG (<= GL_THRESHOLD) drew 2,000 points 2.5x faster than WebGL 8,000
SCATTER_MIN_PER_CLASS = 200  # every op class keeps this many points (or all it has) in the sample
TOP_KERNELS = 25
ERROR_BIN_PERCENT = 5.0
ERROR_RANGE_PERCENT = (-100.0, 200.0)  # the histogram's span; errors outside are counted in its end bins


def error_percent(predicted_s: FloatArray, measured_s: FloatArray) -> FloatArray:
    """Signed error in %: predicted / measured − 1 (> 0: the model is slower than the silicon)."""
    out: FloatArray = (predicted_s / measured_s - 1.0) * 100.0
    return out


def summary(kinds: Coded | np.ndarray[Any, Any], errors: FloatArray) -> list[dict[str, Any]]:
    """Per op class (and 'all' when there are several): count, median and p90 |error| [%], bias (median signed
    error [%]; > 0: model slower). Grouped by one sort, not a Python loop over runs."""
    names, inverse = codes(kinds)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(names) + 1))
    groups = sorted((str(name), errors[order[bounds[g]:bounds[g + 1]]]) for g, name in enumerate(names))
    if len(names) > 1:
        groups.append(("all", errors))
    return [{"op_kind": kind, "count": int(e.size), "median_abs_error_percent": float(np.median(np.abs(e))),
             "p90_abs_error_percent": float(np.percentile(np.abs(e), 90)), "bias_percent": float(np.median(e))}
            for kind, e in groups]


def fix_first(state: AppState, runs: RunColumns, pred: RunPredictions, errors: FloatArray) -> list[dict[str, Any]]:
    """The top kernels by the time each would save at its roof (measured − roof); names read for those only."""
    measured, roof = runs.measured_s, pred.roof_s
    saved = np.maximum(measured - roof, 0.0)
    total = float(measured.sum()) or 1.0
    count = min(TOP_KERNELS, saved.size)
    head = np.argpartition(-saved, count - 1)[:count] if count < saved.size else np.arange(saved.size)
    order = head[np.argsort(-saved[head], kind="stable")]
    names = run_names(state.store, [int(runs.run_id[i]) for i in order])
    rows = []
    for i in order.tolist():
        run_id = int(runs.run_id[i])
        rows.append({"run_id": run_id, "name": names.get(run_id, f"{runs.op_kind[i]} run {run_id}"),
                     "kind": runs.op_kind[i], "hardware": runs.hardware_id[i], "measured_s": float(measured[i]),
                     "predicted_s": float(pred.predicted_s[i]), "bound": pred.bound[i],
                     "pct_roof": 100.0 * float(roof[i] / measured[i]), "headroom_s": float(saved[i]),
                     "error_percent": float(errors[i]), "share": 100.0 * float(measured[i]) / total})
    return rows


HOVER = ("run %{customdata[0]:d} (%{fullData.name})<br>measured %{x:.3s}s, predicted %{y:.3s}s"
         "<br>error %{customdata[1]:+d} %<extra></extra>")


def scatter_sample(kind_of: np.ndarray[Any, np.dtype[np.intp]], limit: int | None = None,
                   seed: int = 0) -> np.ndarray[Any, np.dtype[np.intp]]:
    """Indices of the runs the scatter draws (ascending): all of them up to ``limit``, else a seeded random
    sample of each op class in proportion to its runs (at least ``SCATTER_MIN_PER_CLASS`` or all it has), so
    the sample keeps every class and the density of each. ``limit`` defaults to ``SCATTER_MAX_POINTS``."""
    n = kind_of.size
    limit = SCATTER_MAX_POINTS if limit is None else limit
    if n <= limit:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    picked = []
    for k in np.unique(kind_of):
        members = np.nonzero(kind_of == k)[0]
        take = min(members.size, max(SCATTER_MIN_PER_CLASS, round(members.size * limit / n)))
        picked.append(rng.choice(members, size=take, replace=False))
    return np.sort(np.concatenate(picked))


def scatter_figure(runs: RunColumns, predicted_s: FloatArray, errors: FloatArray,
                   shown: np.ndarray[Any, np.dtype[np.intp]] | None = None) -> go.Figure:
    """Predicted vs measured, log-log, with y = x and ±10 % / ±25 % bands; one trace per op class, sent as
    typed arrays; WebGL above ``GL_THRESHOLD`` points; only the runs ``shown`` (default: ``scatter_sample``,
    all up to ``SCATTER_MAX_POINTS``), the axes still spanning every run."""
    fig = go.Figure()
    measured = runs.measured_s
    lo = float(min(measured.min(), predicted_s.min())) / 1.5
    hi = float(max(measured.max(), predicted_s.max())) * 1.5
    kinds, kind_of = codes(runs.op_kind)
    shown = scatter_sample(kind_of) if shown is None else shown
    for band, alpha in ((0.25, 0.10), (0.10, 0.16)):
        fig.add_trace(go.Scatter(x=[lo, hi, hi, lo, lo], y=[lo * (1 - band), hi * (1 - band), hi * (1 + band),
                                                             lo * (1 + band), lo * (1 - band)],
                                 fill="toself", mode="lines", line={"width": 0}, fillcolor=f"rgba(46,139,87,{alpha})",
                                 name=f"±{band:.0%}".replace(" ", ""), hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x (exact)",
                             line={"color": "#333", "width": 1.2}, hoverinfo="skip"))
    trace = go.Scattergl if shown.size > GL_THRESHOLD else go.Scatter
    for k, kind in sorted(enumerate(kinds), key=lambda pair: str(pair[1])):
        idx = shown[kind_of[shown] == k]
        # float32 times (7 digits) and int32 (run id, error in whole %): a quarter of the JSON of float64 pairs
        custom = np.column_stack([runs.run_id[idx], np.round(errors[idx])]).astype(np.int32)
        fig.add_trace(trace(x=measured[idx].astype(np.float32), y=predicted_s[idx].astype(np.float32),
                            mode="markers", name=esc(kind), customdata=custom,
                            hovertemplate=HOVER,
                            marker={"size": 5, "color": PALETTE[k % len(PALETTE)], "opacity": 0.7}))
    subtitle = (f"{shown.size:,} of {runs.size:,} runs drawn (a random sample of each op class)"
                if shown.size < runs.size else "")
    base_layout(fig, "Predicted vs measured", "Measured time", "Predicted time", x_unit="s", y_unit="s",
                subtitle=subtitle)
    fig.update_layout(legend={"x": 0.01, "y": 0.99, "xanchor": "left", "yanchor": "top"})
    fig.update_xaxes(range=[np.log10(lo), np.log10(hi)])
    fig.update_yaxes(range=[np.log10(lo), np.log10(hi)], scaleanchor="x", scaleratio=1)
    return fig


def histogram_figure(errors: FloatArray) -> go.Figure:
    """Error histogram binned on the server (``ERROR_BIN_PERCENT`` bins); errors outside the range land in
    the end bins."""
    lo, hi = ERROR_RANGE_PERCENT
    edges = np.arange(lo, hi + ERROR_BIN_PERCENT, ERROR_BIN_PERCENT)
    counts, _ = np.histogram(np.clip(errors, lo, hi - 1e-9), bins=edges)
    fig = go.Figure(go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=counts, width=ERROR_BIN_PERCENT, name="runs",
                           marker={"color": "#1f5fa8", "line": {"width": 0}},
                           customdata=np.column_stack([edges[:-1], edges[1:]]),
                           hovertemplate="%{customdata[0]:.0f} to %{customdata[1]:.0f} %: %{y} runs<extra></extra>"))
    # the ±10/±25 % and exact lines as one list of shapes (five add_vline calls took ~60 ms of plotly validation)
    fig.update_layout(shapes=[{"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                               "line": {"color": "#2e8b57" if x else "#333", "dash": dash, "width": 1}}
                              for x, dash in ((-25, "dot"), (-10, "dash"), (0, "solid"), (10, "dash"), (25, "dot"))])
    base_layout(fig, "Error distribution (predicted / measured − 1; clipped to −100…200 %)",
                "Error [%]", "Runs", log=False, height=520)
    fig.update_layout(bargap=0)
    fig.update_xaxes(range=[lo, hi], dtick=25)
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
    every = read_run_columns(state.store, hardware_id, op_kind, source, trace_id)
    pred = predict_columns(state, every)
    runs = every.take(pred.ok)
    out: dict[str, Any] = {"total": every.size, "shown": runs.size, "skipped": pred.skipped,
                           "unmodelled": unmodelled_share(state, hardware_id, trace_id)}
    if not runs.size:
        return out
    predicted = pred.predicted_s[pred.ok]
    kept = RunPredictions(predicted, pred.roof_s[pred.ok], pred.bound[pred.ok], pred.ok[pred.ok])
    errors = error_percent(predicted, runs.measured_s)
    absolute = np.abs(errors)
    shown = scatter_sample(codes(runs.op_kind)[1])
    out.update(scatter=figure_json(scatter_figure(runs, predicted, errors, shown)),
               histogram=figure_json(histogram_figure(errors)), summary=summary(runs.op_kind, errors),
               kernels=fix_first(state, runs, kept, errors), webgl=shown.size > GL_THRESHOLD, drawn=int(shown.size),
               within10=float(np.mean(absolute <= 10) * 100), within25=float(np.mean(absolute <= 25) * 100))
    return out
