"""Plotly conventions shared by every chart, and roofline ceilings (as Nsight Compute and Intel Advisor draw
them: log-log, bandwidth diagonals up to the highest peak, compute roofs from their DRAM ridge point on)."""

from __future__ import annotations

import html
import math
from typing import Any

import plotly.graph_objects as go  # type: ignore[import-untyped]
from markupsafe import Markup

from perfmodel.hardware import Hardware
from perfmodel.units import format_rate
from web.ceilings import memory_roofs, merged_roofs
from web.templating import script_safe

X_AXIS = "Arithmetic intensity [FLOP/byte]"
Y_AXIS = "Performance [FLOP/s]"
PALETTE = ("#1f5fa8", "#d1492e", "#2e8b57", "#8a4fbf", "#c28a00", "#00838f", "#6d4c41", "#ad1457")
LEVEL_DASH = ("solid", "dash", "dot", "dashdot", "longdash")
BOUND_COLOURS = {"latency": "#7f7f7f", "interconnect": "#8a4fbf", "none": "#bbbbbb"}
CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}


MAX_LABEL = 120  # C++ kernel names run to kilobytes


def esc(text: object, limit: int = MAX_LABEL) -> str:
    """User text for plotly labels: plotly reads a subset of HTML, so markup must arrive as entities."""
    value = str(text)
    return html.escape(value if len(value) <= limit else value[: limit - 1] + "…", quote=False)


def figure_json(fig: go.Figure) -> Markup:
    """Figure JSON safe inside a ``<script type="application/json">`` block."""
    text = fig.to_json(validate=False, engine="orjson")
    return Markup(script_safe(text))


def si_ticks(lo_exp: int = -12, hi_exp: int = 19, unit: str = "",
             mantissas: tuple[float, ...] = (1.0,)) -> dict[str, Any]:
    """Labelled ticks at ``mantissas`` × each decade, SI-prefixed ("1 T", "10 µs", "200 µs"): one per decade
    reads cleaner than plotly's minor labels on wide axes; (1, 2, 5) gives an axis spanning less than a decade
    more than one tick."""
    prefixes = {-12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
    vals, text = [], []
    for e in range(lo_exp, hi_exp):
        base = e - e % 3
        for mantissa in mantissas:
            vals.append(mantissa * 10.0**e)
            text.append(f"{mantissa * 10 ** (e - base):g} {prefixes[base]}{unit}".strip())
    return {"tickvals": vals, "ticktext": text}


def base_layout(fig: go.Figure, title: str, x: str, y: str, log: bool = True, height: int = 520,
                x_unit: str = "", y_unit: str = "", subtitle: str = "") -> go.Figure:
    """The house style; ``subtitle`` (a second, smaller title line) carries what would make the title too long
    for a half-width chart at 1400 px."""
    axis: dict[str, Any] = {"showgrid": True, "gridcolor": "#e4e7eb", "zeroline": False, "showline": True,
                            "linecolor": "#8a929b", "ticks": "outside", "exponentformat": "SI"}
    fig.update_layout(
        template="none", height=height,
        title={"text": esc(title), "x": 0.01, "font": {"size": 15},
               **({"subtitle": {"text": esc(subtitle), "font": {"size": 12, "color": "#5b6572"}}} if subtitle else {})},
        margin={"l": 70, "r": 20, "t": 64 if subtitle else 44, "b": 56}, paper_bgcolor="white", plot_bgcolor="white",
        font={"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 12},
        legend={"bgcolor": "rgba(255,255,255,0.85)", "bordercolor": "#d0d5db", "borderwidth": 1},
        hoverlabel={"align": "left"},
        xaxis={**axis, "title": {"text": x}, "type": "log" if log else "linear"},
        yaxis={**axis, "title": {"text": y}, "type": "log" if log else "linear"},
    )
    if log:
        fig.update_xaxes(**si_ticks(unit=x_unit))
        fig.update_yaxes(**si_ticks(unit=y_unit))
    return fig


def bound_colour(bound: str, index: int) -> str:
    return BOUND_COLOURS.get(bound, PALETTE[index % len(PALETTE)])


def add_ceilings(fig: go.Figure, devices: list[Hardware], dtypes: list[str] | None, x_range: tuple[float, float],
                 labels: bool, per_engine: bool = False, label_gap: float | None = None) -> None:
    """Every device's compute roofs (chosen dtypes) and memory roofs, with the DRAM ridge points marked;
    ``label_gap``: a roof label's height in log10 FLOP/s (``label_gap_decades``; default ``LABEL_GAP_DECADES``)."""
    lo, hi = x_range
    for d, hw in enumerate(devices):
        colour = PALETTE[d % len(PALETTE)] if len(devices) > 1 else "#334155"
        prefix = f"{hw.id} · " if len(devices) > 1 else ""
        roofs = merged_roofs(hw, dtypes, per_engine)
        levels = memory_roofs(hw)
        if not roofs or not levels:
            continue
        top = max(r.peak_flops_per_s for r in roofs)
        dram = levels[0].bandwidth_bytes_per_s if levels[0].kind == "dram" else hw.levels[0].bandwidth_bytes_per_s
        for j, level in enumerate(levels):
            end = top / level.bandwidth_bytes_per_s
            name = f"{prefix}{level.level} {format_rate(level.bandwidth_bytes_per_s, 'B/s')}"
            name += " (model default)" if level.assumed else ""
            fig.add_trace(go.Scatter(
                x=[lo, end], y=[lo * level.bandwidth_bytes_per_s, top], mode="lines",
                name=esc(name), legendgroup=esc(hw.id), line={"color": colour, "dash": LEVEL_DASH[j % 5], "width": 1.6},
                hovertemplate=f"{esc(name)}<br>%{{x:.3g}} FLOP/B → %{{y:.3s}}FLOP/s<extra></extra>"))
            if labels:  # above the top roof, where the diagonal ends: no line runs there
                fig.add_annotation(x=math.log10(end), y=math.log10(top), text=esc(name), showarrow=False,
                                   textangle=-MEMORY_LABEL_ANGLE, xanchor="left", yanchor="bottom", yshift=2,
                                   font={"color": colour, "size": 11}, bgcolor=LABEL_BACKGROUND)
        sides = label_sides([r.peak_flops_per_s for r in roofs], top_above=not labels,
                            gap=label_gap or LABEL_GAP_DECADES)
        for r, roof in enumerate(roofs):
            if len(devices) == 1:
                colour = PALETTE[(r + 1) % len(PALETTE)]
            ridge = roof.peak_flops_per_s / (dram or levels[0].bandwidth_bytes_per_s)
            name = f"{prefix}{roof.dtype} {roof.engine} {format_rate(roof.peak_flops_per_s, 'FLOP/s')}"
            fig.add_trace(go.Scatter(
                x=[ridge, hi], y=[roof.peak_flops_per_s] * 2, mode="lines",
                name=esc(name), legendgroup=esc(hw.id), line={"color": colour, "width": 2.2},
                hovertemplate=f"{esc(name)}<extra></extra>"))
            if labels:  # at the right edge, above the roof, or below it when the roof above is too close
                above, shift = sides[r]
                fig.add_annotation(x=math.log10(hi), y=math.log10(roof.peak_flops_per_s), text=esc(name),
                                   showarrow=False, xanchor="right", yanchor="bottom" if above else "top",
                                   yshift=2 if above else -2, xshift=-shift, font={"color": colour, "size": 11},
                                   bgcolor=LABEL_BACKGROUND)
            fig.add_trace(go.Scatter(
                x=[ridge], y=[roof.peak_flops_per_s], mode="markers", showlegend=False, legendgroup=esc(hw.id),
                marker={"symbol": "diamond", "size": 9, "color": colour, "line": {"color": "white", "width": 1}},
                name=esc(f"{prefix}ridge {roof.dtype}"),
                hovertemplate=(f"{esc(prefix)}ridge point {roof.dtype}: %{{x:.3g}} FLOP/byte<br>"
                               f"below it memory-bound, above it compute-bound<extra></extra>")))


MEMORY_LABEL_ANGLE = 35  # degrees above horizontal: neighbouring diagonals end ~0.5 decade apart
LABEL_GAP_DECADES = 0.25  # a roof label's least height in log10 FLOP/s (11 px at ~50 px per decade, with a margin)
LABEL_PX = 15  # a roof label's height on screen: 11 px text and its margin
PLOT_MARGIN_PX = 110  # a chart's height less its plot area's (base_layout's top and bottom margins, and some)
LABEL_SHIFT_PX = 240  # a label that finds no room at the right edge moves this far left
LABEL_HEADROOM_DECADES = 1.0  # room above the top roof for the memory labels
LABEL_BACKGROUND = "rgba(255,255,255,0.85)"  # a line passing behind a label does not cross its letters


def label_gap_decades(span_decades: float, height: int) -> float:
    """A roof label's height in log10 FLOP/s on a log axis spanning ``span_decades`` in a ``height`` px chart: a
    chart whose points reach down many decades has fewer px per decade (at 10 decades in 560 px, 0.33)."""
    return max(LABEL_GAP_DECADES, LABEL_PX * span_decades / (height - PLOT_MARGIN_PX))


def label_sides(peaks: list[float], top_above: bool = True, gap: float = LABEL_GAP_DECADES) -> list[tuple[bool, int]]:
    """Where each compute roof's label goes (peaks in descending order), as (above the line?, px to the left of
    the right edge): each label takes ``gap`` of height above or below its line, the first of
    above, below, then the same ``LABEL_SHIFT_PX`` further left, that no placed label overlaps. ``top_above``
    False keeps the top roof's label below it (the memory labels stand above the top roof)."""
    taken: list[tuple[float, float, int]] = []  # (low, high, shift) in log10 FLOP/s
    out = []
    for peak in peaks:
        y = math.log10(peak)
        for shift in range(0, LABEL_SHIFT_PX * len(peaks) + 1, LABEL_SHIFT_PX):
            near_top = math.log10(peaks[0]) - y < gap
            sides = (False,) if near_top and not top_above and shift == 0 else (True, False)
            free = [above for above in sides
                    if not any(s == shift and lo < hi_ and lo_ < hi for lo_, hi_, s in taken
                               for lo, hi in [(y, y + gap) if above else (y - gap, y)])]
            if free:
                above = free[0]
                taken.append(((y, y + gap) if above else (y - gap, y)) + (shift,))
                out.append((above, shift))
                break
    return out


def roofline_figure(devices: list[Hardware], dtypes: list[str] | None, title: str,
                    x_range: tuple[float, float] = (1e-2, 1e4), labels: bool = True, height: int = 560,
                    per_engine: bool = False, y_min: float | None = None) -> go.Figure:
    """Roofs of ``devices``; ``y_min``: the lowest FLOP/s of the points the caller will draw (the axis reaches
    down to them, so the roof labels need more decades of room)."""
    fig = go.Figure()
    tops = [r.peak_flops_per_s for hw in devices for r in merged_roofs(hw, dtypes, per_engine)]
    floors = [x_range[0] * r.bandwidth_bytes_per_s for hw in devices for r in memory_roofs(hw)]
    floors += [y_min] if y_min is not None and y_min > 0 else []
    gap = LABEL_GAP_DECADES
    if tops and floors:
        span = math.log10(max(tops)) + LABEL_HEADROOM_DECADES - math.log10(min(floors)) + 0.3  # marker padding
        gap = label_gap_decades(span, height)
    add_ceilings(fig, devices, dtypes, x_range, labels, per_engine, label_gap=gap)
    base_layout(fig, title, X_AXIS, Y_AXIS, height=height)
    fig.update_xaxes(range=[math.log10(x_range[0]), math.log10(x_range[1])])
    if labels and tops:
        fig.update_yaxes(autorange="min", range=[None, math.log10(max(tops)) + LABEL_HEADROOM_DECADES])
    return fig
