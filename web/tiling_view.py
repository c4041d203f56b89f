"""The tiling explorer: every candidate tile (M x N) of a GEMM-like op by predicted time, its on-chip
footprint, the Pareto front of time vs footprint, and the chosen schedule in words."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import plotly.graph_objects as go  # type: ignore[import-untyped]

from perfmodel.hardware import Hardware
from perfmodel.machine import tables
from perfmodel.ops import make_op
from perfmodel.ops.base import DTYPES
from perfmodel.roofline import work_of
from perfmodel.search.engine import SearchResult, search
from perfmodel.search.gemm_cost import gemm_costs, launch_overhead_s
from perfmodel.search.gemm_space import full_space
from perfmodel.units import format_bytes, format_time_s
from web.plotting import base_layout, si_ticks

MAX_PARETO_CLOUD = 4000


@dataclass
class TilingView:
    result: SearchResult
    heatmap: go.Figure | None = None
    footprint: go.Figure | None = None
    pareto: go.Figure | None = None
    notes: list[str] = field(default_factory=list)


def _grid(values: np.ndarray[Any, Any], footprint: np.ndarray[Any, Any], bm: np.ndarray[Any, Any],
          bn: np.ndarray[Any, Any], rows: list[float], cols: list[float],
          ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The fastest candidate per (tile M, tile N) cell: its time and index (-1 where none fits). Candidates
    often tie (stages or K-step change nothing once compute-bound): of those, the smallest footprint."""
    best = np.full((len(rows), len(cols)), np.inf)
    which = np.full((len(rows), len(cols)), -1)
    for r, m in enumerate(rows):
        for c, n in enumerate(cols):
            idx = np.nonzero((bm == m) & (bn == n) & np.isfinite(values))[0]
            if idx.size:
                fastest = values[idx].min()
                tied = idx[values[idx] <= fastest * (1 + 1e-9)]
                k = int(tied[np.argmin(footprint[tied])])
                best[r, c], which[r, c] = values[k], k
    return best, which


def tiling(hw: Hardware, raw_op: dict[str, Any]) -> TilingView:
    op = make_op(raw_op)
    result = search(hw, op, top_k=8)
    view = TilingView(result)
    t = tables(hw)
    work = work_of([op], float(hw.dram.access_granularity_bytes or 1))
    if not (work.gemm_batch[0].sum() > 0 and work.flops_matrix[0] > 0):
        view.notes.append(f"{op.kind} is not GEMM-like: no tile M × tile N grid; its own schedule space is "
                          "ranked below" if result.top_k else f"{op.kind} has a fixed schedule: nothing to tile")
        if result.pareto:
            view.pareto = _pareto_figure(result, None, None)
        return view
    slot = int(np.argmax(work.gemm_batch[0] * work.gemm_m[0] * work.gemm_n[0] * work.gemm_k[0]))
    b, m, n, k = (float(getattr(work, f)[0, slot]) for f in ("gemm_batch", "gemm_m", "gemm_n", "gemm_k"))
    elem = DTYPES[int(work.matrix_dtype[0])].bytes
    space = full_space(t)
    one = np.ones(1)
    costs = gemm_costs(t, space, one * b, one * m, one * n, one * k, one * elem,
                       one * t.matrix_peak[int(work.matrix_dtype[0])], one * float(work.dram_bytes[0]))
    judged = costs.judged_s[0] + launch_overhead_s(t, work)  # the times search's rows and predict report
    footprint = np.broadcast_to(costs.footprint_bytes, costs.judged_s.shape)[0]
    rows = sorted(set(space.bm.tolist()))
    cols = sorted(set(space.bn.tolist()))
    best, which = _grid(judged, footprint, space.bm, space.bn, rows, cols)
    chosen = result.top_k[0] if result.top_k else None
    if chosen and chosen["tile_m"] in rows and chosen["tile_n"] in cols:
        cell = which[rows.index(chosen["tile_m"]), cols.index(chosen["tile_n"])]
        if cell >= 0 and footprint[cell] < chosen["footprint_bytes"]:
            view.notes.append(f"the chosen {chosen['tile_m']:g}×{chosen['tile_n']:g} schedule uses "
                              f"{format_bytes(chosen['footprint_bytes'])} on chip; the same time is reachable with "
                              f"{format_bytes(float(footprint[cell]))} (fewer stages or a shorter K-step), which "
                              "the footprint map shows")
    view.heatmap = _heatmap(best, which, footprint, rows, cols, result, hw)
    view.footprint = _footprint_map(best, which, footprint, rows, cols, t.scratchpad_bytes_per_unit)
    valid = np.isfinite(judged)
    view.pareto = _pareto_figure(result, judged[valid], footprint[valid])
    if slot or work.gemm_batch[0].astype(bool).sum() > 1:
        view.notes.append(f"the op runs several GEMMs: the grid shows the largest ({b:g} × {m:g} × {n:g} × {k:g})")
    return view


def _labels(rows: list[float], cols: list[float]) -> tuple[list[str], list[str]]:
    return [f"{r:g}" for r in rows], [f"{c:g}" for c in cols]


def _heatmap(best: np.ndarray[Any, Any], which: np.ndarray[Any, Any], footprint: np.ndarray[Any, Any],
             rows: list[float], cols: list[float], result: SearchResult, hw: Hardware) -> go.Figure:
    ylab, xlab = _labels(rows, cols)
    z = np.where(np.isfinite(best), best * 1e6, np.nan)
    text = [[(f"{format_time_s(best[r, c])}<br>footprint {format_bytes(footprint[which[r, c]])}"
              if which[r, c] >= 0 else "does not fit on chip") for c in range(len(cols))] for r in range(len(rows))]
    fig = go.Figure(go.Heatmap(z=z, x=xlab, y=ylab, colorscale="Viridis", reversescale=True, text=text,
                               hovertemplate="tile %{y} × %{x}<br>%{text}<extra></extra>",
                               colorbar={"title": {"text": "time [µs]"}}))
    s = result.best.schedule
    if "tile_m" in s:
        fig.add_trace(go.Scatter(x=[f"{s['tile_n']:g}"], y=[f"{s['tile_m']:g}"], mode="markers", name="chosen",
                                 marker={"symbol": "star", "size": 18, "color": "#d1492e",
                                         "line": {"color": "white", "width": 1.5}},
                                 hovertemplate="chosen schedule<extra></extra>"))
    base_layout(fig, f"Best time per tile on {hw.id}", "Tile N", "Tile M", log=False, height=480,
                subtitle="each cell: its fastest stages / K-step / split-K")
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="category")
    return fig


def _footprint_map(best: np.ndarray[Any, Any], which: np.ndarray[Any, Any], footprint: np.ndarray[Any, Any],
                   rows: list[float], cols: list[float], capacity: float) -> go.Figure:
    ylab, xlab = _labels(rows, cols)
    z = np.where(which >= 0, footprint[np.maximum(which, 0)] / 1024.0, np.nan)
    fig = go.Figure(go.Heatmap(z=z, x=xlab, y=ylab, colorscale="Blues", colorbar={"title": {"text": "KiB"}},
                               hovertemplate="tile %{y} × %{x}<br>%{z:.0f} KiB on chip<extra></extra>"))
    subtitle = "smallest among each cell's fastest schedules"
    if np.isfinite(capacity):
        subtitle += f"; capacity per unit {format_bytes(capacity)}"
    base_layout(fig, "On-chip footprint per tile", "Tile N", "Tile M", log=False, height=480, subtitle=subtitle)
    fig.update_xaxes(type="category")
    fig.update_yaxes(type="category")
    return fig


def _pareto_figure(result: SearchResult, times: np.ndarray[Any, Any] | None,
                   footprints: np.ndarray[Any, Any] | None) -> go.Figure:
    fig = go.Figure()
    if times is not None and footprints is not None and times.size:
        pick = np.random.default_rng(0).choice(times.size, size=min(times.size, MAX_PARETO_CLOUD), replace=False)
        fig.add_trace(go.Scatter(x=footprints[pick], y=times[pick], mode="markers", name="candidates",
                                 marker={"size": 4, "color": "rgba(31,95,168,0.25)"},
                                 hovertemplate="%{x:.3s}B, %{y:.3s}s<extra></extra>"))
    front = sorted(result.pareto, key=lambda r: r["footprint_bytes"])
    fig.add_trace(go.Scatter(x=[r["footprint_bytes"] for r in front], y=[r["time_s"] for r in front],
                             mode="lines+markers", name="Pareto front", line={"color": "#d1492e", "shape": "hv"},
                             hovertemplate="%{x:.3s}B on chip, %{y:.3s}s<extra></extra>"))
    if result.top_k:
        best = result.top_k[0]
        fig.add_trace(go.Scatter(x=[best["footprint_bytes"]], y=[best["time_s"]], mode="markers", name="chosen",
                                 marker={"symbol": "star", "size": 16, "color": "#d1492e"},
                                 hovertemplate="chosen: %{x:.3s}B, %{y:.3s}s<extra></extra>"))
    base_layout(fig, "Time vs on-chip footprint", "On-chip footprint per tile", "Predicted time", height=420,
                x_unit="B", y_unit="s")
    fig.update_yaxes(**si_ticks(unit="s", mantissas=(1.0, 2.0, 5.0)))  # times often span less than a decade
    fig.update_xaxes(**si_ticks(unit="B", mantissas=(1.0, 2.0, 5.0)))
    return fig
