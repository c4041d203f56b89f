"""The models page: a bundled LLM config estimated on a device (``perfmodel.graph.estimate_model``), drawn as a
sunburst or treemap of time by layer → op and a timeline of ops per pipeline stage and stream."""

from __future__ import annotations

import dataclasses
import html
from dataclasses import dataclass, field
from typing import Any, Literal

import plotly.graph_objects as go  # type: ignore[import-untyped]
from markupsafe import Markup

from perfmodel.graph.ir import GraphError
from perfmodel.graph.llm_build import LlmWorkload
from perfmodel.graph.llm_config import bundled_names
from perfmodel.graph.loader import estimate_model
from perfmodel.graph.parallel import Parallelism
from perfmodel.hardware import Hardware
from perfmodel.ops import OpError
from perfmodel.specs import SpecError
from perfmodel.units import format_bytes, format_time_s
from web.plotting import PALETTE, base_layout, esc, figure_json

PHASES = ("prefill", "decode")
CHARTS = ("sunburst", "treemap")
MODEL_DTYPES = ("bf16", "fp16", "fp8_e4m3", "fp32")
WEIGHT_DTYPES = ("", "int8", "int4", "fp8_e4m3")  # "": the activation dtype
STREAM_WORDS = {"compute": "compute", "comm": "comm (blocking)", "comm_overlap": "comm (overlapped)"}
LIMITS = {"devices": 4096, "tp": 4096, "pp": 512, "batch": 65_536, "prompt_tokens": 1 << 21, "kv_len": 1 << 23}
MEMORY_PARTS = (("weights_bytes", "Weights"), ("kv_cache_bytes", "KV cache"), ("activations_bytes", "Activations"),
                ("gradients_bytes", "Gradients"), ("optimizer_bytes", "Optimizer state"))
Errors = (GraphError, OpError, SpecError)
OTHER_OP = "#b0b7bf"
BREAKDOWN_HEIGHT = 560
LEGEND_WIDTH_PX = 520  # the plot area of a chart in half of the page's width, less the lane labels
LEGEND_CHARS = 24  # longer op names are cut in the legend (hover has them whole)


@dataclass(frozen=True)
class ModelQuery:
    """What the form asked for, checked; hashable, so it keys the view cache."""

    model: str = "llama-3-8b"
    devices: int = 1
    tp: int | None = None  # None: devices / pp
    pp: int = 1
    batch: int = 8
    prompt_tokens: int = 2048
    kv_len: int | None = None  # None: prompt_tokens + 1
    dtype: str = "bf16"
    weight_dtype: str = ""
    phase: Literal["prefill", "decode"] = "decode"
    chart: str = "sunburst"


class FormError(ValueError):
    """A form field that does not parse: names the field."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field


def _count(form: dict[str, str], name: str, optional: bool = False) -> int | None:
    text = form.get(name, "").strip()
    if not text and optional:
        return None
    if not text.isdigit() or len(text) > 9 or not 1 <= int(text) <= LIMITS[name]:
        raise FormError(name, f"expected a whole number from 1 to {LIMITS[name]:,}, got {text[:40]!r}")
    return int(text)


def _choice(form: dict[str, str], name: str, choices: tuple[str, ...] | list[str]) -> str:
    value = form.get(name, "")
    if value not in choices:
        raise FormError(name, f"{value[:60]!r} is not one of {', '.join(c or '(none)' for c in choices)}")
    return value


def parse_query(form: dict[str, str]) -> ModelQuery:
    """The form's strings → a ``ModelQuery``; a bad field raises ``FormError`` naming it."""
    phase = _choice(form, "phase", PHASES)
    return ModelQuery(
        model=_choice(form, "model", bundled_names()), devices=_count(form, "devices") or 1,
        tp=_count(form, "tp", optional=True), pp=_count(form, "pp") or 1, batch=_count(form, "batch") or 1,
        prompt_tokens=_count(form, "prompt_tokens") or 1, kv_len=_count(form, "kv_len", optional=True),
        dtype=_choice(form, "dtype", MODEL_DTYPES), weight_dtype=_choice(form, "weight_dtype", WEIGHT_DTYPES),
        phase="prefill" if phase == "prefill" else "decode", chart=_choice(form, "chart", CHARTS))


@dataclass
class ModelView:
    """What the template shows; the figures are JSON already (cacheable, no plotly objects)."""

    query: ModelQuery
    data: dict[str, Any]  # the chosen phase's estimate JSON, without the per-op rows
    parallelism: dict[str, Any]
    other: dict[str, Any] | None  # the other phase's llm metrics (TTFT next to TPOT)
    other_error: str | None
    op_colours: dict[str, str]  # per op type: the breakdown, the timeline and the op-types table
    figures: dict[str, Markup] = field(default_factory=dict)
    memory_rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def llm(self) -> dict[str, Any]:
        llm: dict[str, Any] = self.data.get("llm") or {}
        return llm

    def metric(self, key: str) -> float | None:
        """TTFT or TPOT from whichever phase carries it."""
        for source in (self.llm, self.other or {}):
            if key in source:
                value: float = source[key]
                return value
        return None


def estimate_view(hw: Hardware, q: ModelQuery) -> ModelView:
    """Estimate the chosen phase (with per-op detail) and the other phase (summary only); a model that does
    not fit, a parallelism that does not divide or a bad dtype raise a ``ValueError`` with the reason."""
    par = Parallelism.for_devices(q.devices, tp=q.tp, pp=q.pp)
    workload = LlmWorkload(batch=q.batch, prompt_tokens=q.prompt_tokens, kv_len=q.kv_len or q.prompt_tokens + 1,
                           dtype=q.dtype, weight_dtype=q.weight_dtype or None)
    result = estimate_model(q.model, hw, workload, par, q.phase, detail=True)
    other_phase: Literal["prefill", "decode"] = "decode" if q.phase == "prefill" else "prefill"
    other: dict[str, Any] | None = None
    other_error = None
    try:
        other = estimate_model(q.model, hw, dataclasses.replace(workload, phase=other_phase), par, other_phase,
                               detail=False)[other_phase].get("llm")
    except Errors as exc:
        other_error = f"{other_phase}: {exc}"
    return build_view(q, result[q.phase], result.get("parallelism") or {}, other, other_error)


def build_view(q: ModelQuery, data: dict[str, Any], parallelism: dict[str, Any], other: dict[str, Any] | None = None,
               other_error: str | None = None) -> ModelView:
    """The page's view of one ``Estimate.to_json(detail=True)`` (any graph, LLM or imported)."""
    rows: list[dict[str, Any]] = data.get("ops") or []
    op_colours = op_type_colours(data.get("op_types") or [])
    summary = {k: v for k, v in data.items() if k not in ("ops", "hierarchy")}
    view = ModelView(q, summary, parallelism, other, other_error, op_colours)
    key = "op" if (data.get("meta") or {}).get("kind") == "llm" else "source_op"
    hierarchy = data.get("hierarchy")
    if hierarchy:
        types = {(str(r["layer"]), str(r["op"])): str(r.get(key)) for r in rows}
        view.figures["breakdown"] = figure_json(breakdown_figure(hierarchy, op_colours, q.chart, types))
    if rows:
        view.figures["timeline"] = figure_json(timeline_figure(rows, op_colours, key))
    view.memory_rows = memory_rows(data.get("memory") or {})
    return view


def op_type_name(group: dict[str, Any]) -> str:
    """``op_types`` rows are keyed by ``op`` (LLM graphs: the op's name in its layer) or ``source_op``."""
    return str(group.get("op", group.get("source_op")))


def op_type_colours(op_types: list[dict[str, Any]]) -> dict[str, str]:
    """The op types that take most time get the palette, the rest one grey: more colours than that cannot be
    told apart."""
    ordered = sorted(op_types, key=lambda g: -float(g.get("time_s") or 0.0))
    return {op_type_name(g): PALETTE[i] if i < len(PALETTE) else OTHER_OP
            for i, g in enumerate(ordered)}


def _plain_layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    fig.update_layout(template="none", title={"text": esc(title), "x": 0.01, "font": {"size": 15}}, height=height,
                      margin={"l": 10, "r": 10, "t": 44, "b": 10}, paper_bgcolor="white",
                      font={"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 12},
                      hoverlabel={"align": "left"})
    return fig


def breakdown_figure(hierarchy: dict[str, Any], colours: dict[str, str], kind: str = "sunburst",
                     types: dict[tuple[str, str], str] | None = None) -> go.Figure:
    """model → layer → op; leaves sized by time and coloured by op type (``types``: (layer, op) → its type,
    by default the op's own name). ``branchvalues="remainder"`` with zero on
    the inner nodes: plotly sums the children itself, so rounding can never hide a layer."""
    ids, labels, parents, values, fills, hover = ["model"], [esc(hierarchy.get("name", "model"))], [""], [0.0], \
        ["#ffffff"], [""]
    total = 0.0
    for layer in hierarchy.get("children", []):
        layer_id = f"model/{layer['name']}"
        start = len(ids)
        ids.append(layer_id)
        labels.append(esc(layer["name"]))
        parents.append("model")
        values.append(0.0)
        fills.append("#e3e8ee")
        hover.append("")
        layer_time = 0.0
        seen: dict[str, int] = {}
        for op in layer.get("children", []):
            seen[op["name"]] = seen.get(op["name"], 0) + 1
            suffix = f"#{seen[op['name']]}" if seen[op["name"]] > 1 else ""
            t = max(float(op.get("value") or 0.0), 0.0)
            layer_time += t
            ids.append(f"{layer_id}/{op['name']}{suffix}")
            labels.append(esc(op["name"]))
            parents.append(layer_id)
            values.append(t)
            op_type = (types or {}).get((str(layer["name"]), str(op["name"])), str(op["name"]))
            fills.append(colours.get(op_type, OTHER_OP))
            hover.append(f"{esc(layer['name'])} · {esc(op['name'])}<br>{format_time_s(t)}, "
                         f"bound: {esc(op.get('bound'))}")
        total += layer_time
        hover[start] = f"{esc(layer['name'])}<br>{format_time_s(layer_time)}"
    hover[0] = f"{labels[0]}<br>{format_time_s(total)} of op time"
    common: dict[str, Any] = {"ids": ids, "labels": labels, "parents": parents, "values": values,
                              "branchvalues": "remainder", "hovertext": hover,
                              "marker": {"colors": fills, "line": {"color": "#ffffff", "width": 0.5}},
                              "hovertemplate": "%{hovertext}<br>%{percentRoot:.1%} of the model<extra></extra>"}
    if kind == "treemap":
        trace = go.Treemap(**common, maxdepth=3, tiling={"pad": 2}, textinfo="label")
    else:
        trace = go.Sunburst(**common, insidetextorientation="radial", textinfo="label")
    title = f"Time by layer → op ({'treemap' if kind == 'treemap' else 'sunburst'}; click a layer to zoom)"
    fig = _plain_layout(go.Figure(trace), title, BREAKDOWN_HEIGHT)
    fig.update_layout(uniformtext={"minsize": 10, "mode": "hide"})  # no label in a sector too small to read
    return fig


def _lane(row: dict[str, Any], stages: int) -> str:
    stream = STREAM_WORDS.get(str(row["stream"]), str(row["stream"]))
    return f"stage {row['stage']} · {stream}" if stages > 1 else stream


def timeline_figure(rows: list[dict[str, Any]], colours: dict[str, str], key: str = "op") -> go.Figure:
    """A Gantt chart: one lane per (pipeline stage, stream), one bar per op from its start to its end, one trace
    per op type (the legend; the types past the palette share one grey trace), overlaid rather than grouped so
    that every op sits in its own lane."""
    stages = len({r["stage"] for r in rows})
    lanes = sorted({(int(r["stage"]), str(r["stream"])) for r in rows},
                   key=lambda k: (k[0], list(STREAM_WORDS).index(k[1]) if k[1] in STREAM_WORDS else 9))
    names = [_lane({"stage": s, "stream": t}, stages) for s, t in lanes]
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        name = str(r.get(key))
        groups.setdefault(name if colours.get(name, OTHER_OP) != OTHER_OP else "", []).append(r)
    fig = go.Figure()
    for name in [*(n for n in colours if n in groups), ""]:
        mine = groups.get(name)
        if not mine:
            continue
        fig.add_trace(go.Bar(
            orientation="h", name=esc(name, LEGEND_CHARS) if name else "other ops", base=[r["start_s"] for r in mine],
            x=[max(float(r["end_s"]) - float(r["start_s"]), 0.0) for r in mine], y=[_lane(r, stages) for r in mine],
            marker={"color": colours.get(name, OTHER_OP), "line": {"width": 0}}, width=0.7,
            hovertext=[f"{esc(r['name'])} ({esc(r['kind'])})<br>{format_time_s(float(r['start_s']))} → "
                       f"{format_time_s(float(r['end_s']))}: {format_time_s(float(r['time_s']))}<br>"
                       f"bound: {esc(r['bound'])}; {format_bytes(float(r['dram_bytes']))} DRAM" for r in mine],
            hovertemplate="%{hovertext}<extra></extra>"))
    top = 48 + 19 * _legend_rows([t.name for t in fig.data], LEGEND_WIDTH_PX)
    base_layout(fig, "Timeline of one step, per stage and stream", "Time since the step started [s]", "", log=False,
                height=max(BREAKDOWN_HEIGHT, 150 + top + 40 * len(lanes)))
    fig.update_layout(barmode="overlay", bargap=0.25, margin={"l": 20, "r": 20, "t": top, "b": 56},
                      title={"yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 12}},
                      legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.01, "yanchor": "bottom",
                              "borderwidth": 0, "bgcolor": "rgba(0,0,0,0)", "font": {"size": 11}})  # under the title
    fig.update_xaxes(ticksuffix="s", tickformat="~s", rangemode="tozero")  # 200ms, 1.2s
    fig.update_yaxes(type="category", categoryorder="array", categoryarray=list(reversed(names)),
                     title={"text": ""}, showgrid=False, ticks="", automargin=True)
    return fig


def _legend_rows(names: list[str], width: float) -> int:
    """Rows a horizontal plotly legend needs at ``width`` px: when it wraps, plotly lays the entries out on a grid
    as wide as the widest entry (~7 px a character plus the symbol; generous, so that it never overlaps)."""
    if not names:
        return 0
    widest = max(56 + 7 * len(html.unescape(str(n))) for n in names)
    columns = max(1, int(width // widest))
    return -(-len(names) // columns)


def memory_rows(mem: dict[str, Any]) -> list[dict[str, Any]]:
    """Per device (the fullest pipeline stage): each part, its bytes and its share of the device's memory."""
    capacity = mem.get("capacity_bytes") or None
    out = []
    for key, label in MEMORY_PARTS:
        value = float(mem.get(key) or 0.0)
        if value > 0 or key in ("weights_bytes", "kv_cache_bytes", "activations_bytes"):
            out.append({"label": label, "bytes": value, "share": 100 * value / capacity if capacity else None})
    total = float(mem.get("total_bytes") or 0.0)
    out.append({"label": "Total", "bytes": total, "share": 100 * total / capacity if capacity else None,
                "total": True})
    return out
