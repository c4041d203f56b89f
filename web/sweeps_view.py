"""Stored design-space sweeps (``perfmodel sweep``): the list, and one sweep's table and Pareto chart of step time
against the cost proxy (devices × DRAM bandwidth × matrix peak, base = 1)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]
from markupsafe import Markup

from perfmodel.graph.sweep import pareto
from perfmodel.store import SweepRow
from perfmodel.units import format_bytes, format_time_s
from web.plotting import PALETTE, base_layout, esc, figure_json

GL_THRESHOLD = 2000  # WebGL above this many points, as on the runs page
ROWS_PER_PAGE = 100  # the results table is paged on the server
REQUIRED = ("time_s", "cost_proxy")
# the table's server-side orders: key -> (heading, sort key of a row); missing numbers sort last
SORTS: dict[str, tuple[str, Callable[[dict[str, Any]], tuple[Any, ...]]]] = {
    "workload": ("workload, Pareto first, cost", lambda r: (r["label"], not r["pareto"], r["cost_proxy"], r["time_s"])),
    "time": ("step time", lambda r: (r["time_s"], r["cost_proxy"])),
    "cost": ("cost proxy", lambda r: (r["cost_proxy"], r["time_s"])),
    "tokens": ("tokens/s, most first", lambda r: (r["tokens_per_s"] is None, -(r["tokens_per_s"] or 0.0))),
    "memory": ("memory per device", lambda r: (r["memory_bytes"] is None, r["memory_bytes"] or 0.0)),
    "variant": ("variant", lambda r: (r["index"],)),
}
LEVEL_NAMES = {"dram": "DRAM", "l2": "L2", "l1": "L1", "smem": "shared memory", "hbm": "HBM"}
FIELD_NAMES = {"bandwidth_bytes_per_s": "bandwidth", "capacity_bytes": "capacity", "peak_flops_per_s": "peak FLOP/s",
               "latency_s": "latency", "clock_hz": "clock", "units": "units"}


def axis_heading(path: str) -> str:
    """A sweep axis (a spec override path) in words for a column heading: ``levels.dram.bandwidth_bytes_per_s``
    -> "DRAM bandwidth", ``engines.*.peak_flops_per_s`` -> "Peak FLOP/s (all engines)", ``devices`` -> "Devices"
    (the page shows that axis in its own Devices column, not twice)."""
    parts = path.split(".")
    field_name = FIELD_NAMES.get(parts[-1], parts[-1].replace("_", " "))
    if len(parts) == 3 and parts[0] == "levels":
        return f"{LEVEL_NAMES.get(parts[1].lower(), parts[1])} {field_name}"
    if len(parts) == 3 and parts[0] == "engines":
        engines = "all engines" if parts[1] == "*" else parts[1].replace("_", " ")
        return f"{field_name[:1].upper()}{field_name[1:]} ({engines})"
    text = " ".join(p.replace("_", " ") for p in parts if p != "*")
    return text[:1].upper() + text[1:]


@dataclass
class SweepSummary:
    """One line of the list: what was swept and how big it is."""

    id: int
    name: str
    created_at: datetime
    base: str
    workloads: list[str]
    axes: list[str]
    variants: int | None
    estimates: int
    executor: str
    elapsed_s: float | None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _label(w: Any) -> str:
    if not isinstance(w, dict):
        return str(w)
    return f"{w.get('model')}:{w.get('phase', 'decode')}:b{w.get('batch', 1)}"


def summarize(row: SweepRow) -> SweepSummary:
    spec, results = row.spec or {}, row.results or {}
    rows = results.get("rows")
    axes = spec.get("axes")
    workloads = spec.get("workloads")
    variants = results.get("variants")
    return SweepSummary(
        id=row.id, name=row.name, created_at=row.created_at, base=str(spec.get("base", "–")),
        workloads=[_label(w) for w in workloads] if isinstance(workloads, list) else [],
        axes=[str(a) for a in axes] if isinstance(axes, dict) else [],
        variants=variants if isinstance(variants, int) and not isinstance(variants, bool) else None,
        estimates=len(rows) if isinstance(rows, list) else 0, executor=str(results.get("executor", "–")),
        elapsed_s=_number(results.get("elapsed_s")))


@dataclass
class SweepView:
    summary: SweepSummary
    spec: dict[str, Any]
    axes: list[str]
    rows: list[dict[str, Any]]  # every drawable row (workload order), each with "index" and "pareto"
    total_rows: int
    fronts: dict[str, list[int]]
    figure: Markup | None
    notes: list[str] = field(default_factory=list)


def _clean_rows(raw: Any) -> tuple[list[dict[str, Any]], int]:
    """Rows with a finite time and cost (others are counted, not drawn), each keeping its stored index."""
    if not isinstance(raw, list):
        return [], 0
    rows, skipped = [], 0
    for i, r in enumerate(raw):
        if not isinstance(r, dict) or any(_number(r.get(k)) is None for k in REQUIRED):
            skipped += 1
            continue
        overrides = r.get("overrides") if isinstance(r.get("overrides"), dict) else {}
        rows.append({**r, "index": i, "variant": r.get("variant", i), "label": str(r.get("label", "–")),
                     "overrides": overrides, "devices": r.get("devices", "–"), "fits": r.get("fits") is not False,
                     "time_s": float(r["time_s"]), "cost_proxy": float(r["cost_proxy"]),
                     "tokens_per_s": _number(r.get("tokens_per_s")), "memory_bytes": _number(r.get("memory_bytes"))})
    return rows, skipped


def _fronts(results: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, list[int]]:
    """The stored Pareto front (indices into the stored rows), else one computed here from the rows."""
    stored = results.get("pareto")
    valid = {r["index"] for r in rows}
    if isinstance(stored, dict) and all(isinstance(v, list) and all(isinstance(i, int) and i in valid for i in v)
                                        for v in stored.values()):
        return {str(k): list(v) for k, v in stored.items()}
    fronts = pareto(rows)
    return {label: [rows[i]["index"] for i in idx] for label, idx in fronts.items()}


def sweep_view(row: SweepRow) -> SweepView:
    summary = summarize(row)
    results = row.results or {}
    raw = results.get("rows")
    rows, skipped = _clean_rows(raw)
    fronts = _fronts(results, rows)
    on_front = {i for front in fronts.values() for i in front}
    for r in rows:
        r["pareto"] = r["index"] in on_front
    axes = list(summary.axes)
    for r in rows:
        axes.extend(k for k in r["overrides"] if k not in axes)
    notes = []
    if skipped:
        notes.append(f"{skipped} stored rows have no finite time or cost proxy; they are left out")
    if not rows:
        notes.append("this sweep stored no rows to draw")
    ordered = sorted(rows, key=SORTS["workload"][1])
    figure = figure_json(pareto_figure(rows, fronts)) if rows else None
    return SweepView(summary, row.spec or {}, axes, ordered, len(rows), fronts, figure, notes)


def table_page(view: SweepView, sort: str, page: int) -> tuple[str, int, list[dict[str, Any]]]:
    """(the order used, the page shown, its rows): ``sort`` one of ``SORTS`` (else "workload"), ``page``
    clamped to 1..pages; ``ROWS_PER_PAGE`` rows a page."""
    order = sort if sort in SORTS else "workload"
    rows = view.rows if order == "workload" else sorted(view.rows, key=SORTS[order][1])
    pages = max(1, -(-len(rows) // ROWS_PER_PAGE))
    page = min(max(page, 1), pages)
    return order, page, rows[(page - 1) * ROWS_PER_PAGE: page * ROWS_PER_PAGE]


def overrides_text(overrides: dict[str, Any]) -> str:
    return "<br>".join(f"{esc(k)} = {esc(v)}" for k, v in overrides.items()) or "(the base device)"


def _hover(r: dict[str, Any]) -> str:
    tokens = _number(r.get("tokens_per_s"))
    memory = _number(r.get("memory_bytes"))
    parts = [f"<b>{esc(r['label'])}</b> · variant {esc(r['variant'])}"
             + (" · Pareto" if r.get("pareto") else "") + ("" if r["fits"] else " · does not fit"),
             overrides_text(r["overrides"]),
             f"time {format_time_s(r['time_s'])}, cost proxy {r['cost_proxy']:.3g}"]
    if tokens is not None:
        parts.append(f"{tokens:,.0f} tokens/s")
    if memory is not None:
        parts.append(f"{format_bytes(memory)} per device")
    return "<br>".join(parts)


def _log_axis(values: list[float], label: Callable[[float], str]) -> dict[str, Any]:
    """A log axis with 1-2-5 ticks labelled in words ("20 ms") when the values span 10× or more, else linear;
    plotly's own log ticks label every minor digit, which crowds a short axis."""
    positive = [v for v in values if v > 0]
    if len(positive) != len(values) or not positive or max(positive) / min(positive) < 10:
        return {"type": "linear"}
    lo, hi = min(positive), max(positive)
    ticks = [m * 10.0**e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
             for m in (1, 2, 5) if lo / 1.5 <= m * 10.0**e <= hi * 1.5]
    return {"type": "log", "tickvals": ticks, "ticktext": [label(t) for t in ticks]}


def pareto_figure(rows: list[dict[str, Any]], fronts: dict[str, list[int]]) -> go.Figure:
    """Per workload: every fitting variant (faint), the Pareto front (joined, as a staircase: at a given cost
    the best time is the front point to its left), and the variants that do not fit (grey crosses)."""
    scatter = go.Scattergl if len(rows) > GL_THRESHOLD else go.Scatter
    by_index = {r["index"]: r for r in rows}
    labels = list(dict.fromkeys(r["label"] for r in rows))
    fig = go.Figure()
    for n, label in enumerate(labels):
        colour = PALETTE[n % len(PALETTE)]
        mine = [r for r in rows if r["label"] == label and r["fits"] and not r["pareto"]]
        if mine:
            fig.add_trace(scatter(
                x=[r["cost_proxy"] for r in mine], y=[r["time_s"] for r in mine], mode="markers",
                name=f"{esc(label)} · variants", legendgroup=esc(label), hovertext=[_hover(r) for r in mine],
                hovertemplate="%{hovertext}<extra></extra>",
                marker={"size": 7, "color": colour, "opacity": 0.35}))
        front = sorted((by_index[i] for i in fronts.get(label, []) if i in by_index),
                       key=lambda r: (r["cost_proxy"], r["time_s"]))
        if front:
            fig.add_trace(scatter(
                x=[r["cost_proxy"] for r in front], y=[r["time_s"] for r in front], mode="lines+markers",
                name=f"{esc(label)} · Pareto front", legendgroup=esc(label), hovertext=[_hover(r) for r in front],
                hovertemplate="%{hovertext}<extra></extra>", line={"color": colour, "width": 2, "shape": "hv"},
                marker={"size": 12, "color": colour, "symbol": "diamond",
                        "line": {"color": "#1c2430", "width": 1.2}}))
    unfit = [r for r in rows if not r["fits"]]
    if unfit:
        fig.add_trace(scatter(
            x=[r["cost_proxy"] for r in unfit], y=[r["time_s"] for r in unfit], mode="markers",
            name="does not fit in memory", hovertext=[_hover(r) for r in unfit],
            hovertemplate="%{hovertext}<extra></extra>",
            marker={"size": 8, "color": "#8a929b", "symbol": "x-thin", "line": {"color": "#8a929b", "width": 1.5}}))
    base_layout(fig, "Step time vs cost: the Pareto front per workload", "Cost proxy [devices × DRAM bandwidth × "
                "matrix peak, base device = 1]", "Step time [s]", log=False, height=520)
    fig.update_xaxes(**_log_axis([r["cost_proxy"] for r in rows], lambda v: f"{v:g}"))
    y = _log_axis([r["time_s"] for r in rows], format_time_s)
    fig.update_yaxes(**(y if y["type"] == "log" else {**y, "ticksuffix": "s", "tickformat": "~s"}))
    return fig
