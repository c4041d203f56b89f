"""The roofline explorer: every op of a workload as a point per memory level, predicted and measured."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.graph_objects as go  # type: ignore[import-untyped]

from perfmodel.hardware import Hardware
from perfmodel.traces.measured_roofline import LEVEL_LABELS, CounterPoint, counter_points, time_by_headroom
from perfmodel.traces.roof import counter_levels
from perfmodel.units import format_bytes, format_rate, format_time_s
from web.ceilings import memory_roofs
from web.metrics import OpMetrics, op_metrics
from web.plotting import bound_colour, esc, roofline_figure
from web.workloads import Workload

LEVEL_SYMBOLS = ("circle", "square", "diamond", "triangle-up", "pentagon")


@dataclass
class ExplorerView:
    figure: go.Figure
    rows: list[dict[str, Any]]
    predicted_total_s: float  # the model's time of the whole workload (every op, repeats counted)
    measured_total_s: float | None  # the measured time of the ops that have a measurement
    undrawn: int
    problems: list[str]
    counter_points: list[CounterPoint]  # a trace's kernels with profiler counters (by name, longest first)
    counter_split: dict[str, float]  # their time at / near / far below a roof


def _hover(name: str, kind: str, level: str, time_s: float, share: float, moved: float, flops: float,
           pct: float, headroom: float, what: str) -> str:
    return (f"<b>{esc(name)}</b> ({esc(kind)}, {what})<br>level {esc(level)}: {format_bytes(moved)}, "
            f"{flops:.3g} FLOP<br>time {format_time_s(time_s)} ({share:.1f} % of the workload)<br>"
            f"{pct:.0f} % of its roof, headroom {format_time_s(headroom)}")


def explorer(hw: Hardware, work: Workload) -> ExplorerView:
    m = op_metrics(hw, work.ops)
    problems = list(work.problems) + [f"{work.names[i]}: {msg}" for i, msg in sorted(m.errors.items())][:20]
    counts = np.array([work.counts[i] for i in m.index], dtype=float)
    measured = np.array([work.measured_s[i] if work.measured_s[i] else np.nan for i in m.index], dtype=float)
    has_measured = ~np.isnan(measured)
    time_s = np.where(has_measured, measured, m.predicted_s) * counts
    total = float(time_s.sum()) or 1.0
    share = 100.0 * time_s / total
    rows = _rows(work, m, counts, measured, share)
    dtypes = _dtypes(work, m)
    points = counter_points(hw, work.counter_kernels)
    fig = roofline_figure([hw], dtypes, f"{hw.name}: {work.label}", per_engine=True,
                          y_min=_lowest_rate(m, measured, points))
    bandwidth = {r.level for r in memory_roofs(hw)}
    levels = [lv for lv in m.bytes_by_level if lv in bandwidth]
    drawable = m.flops > 0
    sizes = 7.0 + 26.0 * np.sqrt(share / 100.0)
    bounds = sorted(set(m.bound))
    colour_of = {b: bound_colour(b, i) for i, b in enumerate(bounds)}
    colours = [colour_of[b] for b in m.bound]
    names = [work.names[i] for i in m.index]
    kinds = [str(work.ops[i].get("kind", "?")) for i in m.index]
    for j, level in enumerate(levels):
        x = m.intensity(level)
        for what, per_op_s, mask in (("predicted", m.predicted_s, drawable),
                                     ("measured", measured, drawable & has_measured)):
            idx = np.nonzero(mask & np.isfinite(x) & (x > 0))[0]
            if idx.size == 0:
                continue
            pct = m.percent_of_roof(per_op_s)
            head = m.headroom_s(per_op_s) * counts
            hover = [_hover(names[i], kinds[i], level, float(per_op_s[i] * counts[i]), float(share[i]),
                            float(m.bytes_by_level[level][i]), float(m.flops[i]), float(pct[i]), float(head[i]), what)
                     for i in idx]
            symbol = LEVEL_SYMBOLS[j % len(LEVEL_SYMBOLS)] + ("-open" if what == "predicted" else "")
            fig.add_trace(go.Scatter(
                x=x[idx], y=m.flops[idx] / per_op_s[idx], mode="markers", name=esc(f"{level} · {what}"),
                hovertext=hover, hoverinfo="text",
                marker={"symbol": symbol, "size": sizes[idx], "color": [colours[i] for i in idx],
                        "line": {"width": 1.5, "color": [colours[i] for i in idx]}, "opacity": 0.85}))
    _joins(fig, m, measured, levels, drawable & has_measured)
    _counter_traces(fig, hw, points)
    for b in bounds:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=esc(f"bound: {b}"),
                                 marker={"color": colour_of[b], "size": 10}, hoverinfo="skip"))
    undrawn = int((~drawable).sum())
    measured_total = float((measured * counts)[has_measured].sum()) if has_measured.any() else None
    predicted_total = float((m.predicted_s * counts).sum())
    return ExplorerView(fig, rows, predicted_total, measured_total, undrawn, problems, points,
                        time_by_headroom(points) if points else {})


COUNTER_COLOUR = "#222222"


def _lowest_rate(m: OpMetrics, measured: np.ndarray[Any, Any], points: list[CounterPoint]) -> float | None:
    """The lowest FLOP/s the chart draws: predicted, measured and counted points (None without any)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = np.concatenate([m.flops / m.predicted_s, m.flops / measured,
                                [p.flops / p.time_s for p in points if p.flops > 0 and p.time_s > 0]])
    rates = rates[np.isfinite(rates) & (rates > 0)]
    return float(rates.min()) if rates.size else None


def _counter_traces(fig: go.Figure, hw: Hardware, points: list[CounterPoint]) -> None:
    """Each kernel with counted FLOPs at each level it counted bytes for: x its measured intensity there, y its
    measured FLOP/s (Nsight Compute's hierarchical roofline); black, one symbol per level."""
    drawn = [p for p in points if p.flops > 0]
    for j, (key, level) in enumerate(counter_levels(hw).items()):
        label = LEVEL_LABELS[key]
        chosen = [p for p in drawn if p.bytes_by_level.get(label, 0.0) > 0]
        if level is None or not chosen:
            continue
        hover = [f"<b>{esc(p.name)}</b> (profiler counters)<br>{p.launches} launches, {format_time_s(p.time_s)}<br>"
                 f"level {esc(level.name)}: {format_bytes(p.bytes_by_level[label])}, {p.flops:.3g} FLOP<br>"
                 f"{100 * p.share_of_roof.get(label, 0.0):.0f} % of its bandwidth roof; nearest roof: {p.nearest}"
                 for p in chosen]
        fig.add_trace(go.Scatter(
            x=[p.flops / p.bytes_by_level[label] for p in chosen], y=[p.flops / p.time_s for p in chosen],
            mode="markers", name=esc(f"{level.name} · kernel counters"), hovertext=hover, hoverinfo="text",
            marker={"symbol": LEVEL_SYMBOLS[j % len(LEVEL_SYMBOLS)], "size": 9, "color": COUNTER_COLOUR,
                    "opacity": 0.8}))


def _joins(fig: go.Figure, m: OpMetrics, measured: np.ndarray[Any, Any], levels: list[str],
           mask: np.ndarray[Any, Any]) -> None:
    """A grey segment from each op's predicted point to its measured one (outermost level)."""
    if not levels or not mask.any():
        return
    x = m.intensity(levels[0])
    xs: list[float | None] = []
    ys: list[float | None] = []
    for i in np.nonzero(mask & np.isfinite(x))[0]:
        xs += [float(x[i]), float(x[i]), None]
        ys += [float(m.flops[i] / m.predicted_s[i]), float(m.flops[i] / measured[i]), None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name="predicted ↔ measured", hoverinfo="skip",
                             line={"color": "rgba(90,90,90,0.45)", "width": 1}))


def _dtypes(work: Workload, m: OpMetrics) -> list[str]:
    found = {str(work.ops[i].get("dtype") or work.ops[i].get("from_dtype") or "") for i in m.index}
    return sorted(d for d in found if d) or ["bf16", "fp32"]


def _rows(work: Workload, m: OpMetrics, counts: np.ndarray[Any, Any], measured: np.ndarray[Any, Any],
          share: np.ndarray[Any, Any]) -> list[dict[str, Any]]:
    outer = next(iter(m.bytes_by_level), None)
    rows = []
    for j, i in enumerate(m.index):
        t = measured[j] if not math.isnan(measured[j]) else m.predicted_s[j]
        attained = m.flops[j] / t if t > 0 else 0.0
        rows.append({
            "name": work.names[i], "kind": work.ops[i].get("kind", "?"), "count": int(counts[j]),
            "predicted_s": float(m.predicted_s[j]),
            "measured_s": None if math.isnan(measured[j]) else float(measured[j]),
            "bound": m.bound[j], "share": float(share[j]),
            "intensity": float(m.intensity(outer)[j]) if outer else None,
            "attained": format_rate(float(attained), "FLOP/s"),
            "pct_roof": float(100.0 * m.roof_s[j] / t) if t > 0 else None,
            "headroom_s": float(max(t - m.roof_s[j], 0.0) * counts[j]),
        })
    rows.sort(key=lambda r: -r["share"])
    return rows
