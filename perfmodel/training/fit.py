"""The smallest change that makes a layout fit: each single change (a higher ZeRO stage, more
recomputation, a smaller micro-batch, tp or pp doubled with dp halved, optimizer offload) is
costed with the layout search's model; those that fit are ranked by the step time they give."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from perfmodel.graph.ir import GraphError
from perfmodel.graph.llm_config import LlmConfig
from perfmodel.hardware import Hardware
from perfmodel.training.layout import RECOMPUTE_MODES, Layout, TrainingSetup
from perfmodel.training.no_fit import does_not_fit
from perfmodel.training.search import SearchResult, SearchSpace, search_layouts


def evaluate(cfg: LlmConfig, hardware: Hardware, layout: Layout, setup: TrainingSetup) -> SearchResult:
    """The search's model on exactly one layout."""
    space = SearchSpace(tp=(layout.tp,), pp=(layout.pp,), cp=(layout.cp,), ep=(layout.ep,), zero=(layout.zero,),
                        recompute=(layout.recompute,), micro_batch=(layout.micro_batch,),
                        virtual_stages=(layout.virtual_stages,), schedules=(layout.schedule,))
    result = search_layouts(cfg, hardware, layout.devices, setup, space)
    if result.count != 1:
        raise GraphError("layout", f"{layout} is not a layout of {layout.devices} devices")
    return result


def _changes(layout: Layout) -> list[tuple[str, Layout, bool]]:
    """(what changed, the new layout, offload the optimizer) for every single change that saves memory and
    makes a valid layout."""
    out: list[tuple[str, Layout, bool]] = []

    def add(what: str, offload: bool = False, **change: Any) -> None:
        with contextlib.suppress(GraphError):  # e.g. tp doubled past an expert degree that must equal it
            out.append((what, replace(layout, **change), offload))

    for zero in range(layout.zero + 1, 4):
        add(f"ZeRO stage {layout.zero} -> {zero}", zero=zero)
    at = RECOMPUTE_MODES.index(layout.recompute)
    for mode in RECOMPUTE_MODES[at + 1:]:
        add(f"recompute {layout.recompute} -> {mode}", recompute=mode)
    mb = layout.micro_batch
    while mb > 1:
        mb //= 2
        add(f"micro-batch {layout.micro_batch} -> {mb}", micro_batch=mb)
    if layout.dp % 2 == 0:
        add(f"tp {layout.tp} -> {layout.tp * 2} (dp {layout.dp} -> {layout.dp // 2})", tp=layout.tp * 2,
            dp=layout.dp // 2)
        add(f"pp {layout.pp} -> {layout.pp * 2} (dp {layout.dp} -> {layout.dp // 2})", pp=layout.pp * 2,
            dp=layout.dp // 2)
    add("offload the optimizer state to the host", offload=True)
    return out


def make_it_fit(cfg: LlmConfig, hardware: Hardware, layout: Layout, setup: TrainingSetup) -> dict[str, Any]:
    """The layout's own row, and when it does not fit, every single change that makes it fit, fastest first."""
    base = evaluate(cfg, hardware, layout, setup).row(0)
    fixes: list[dict[str, Any]] = []
    if not base["fits"]:
        for what, changed, offload in _changes(layout):
            trial = replace(setup, offload="optimizer") if offload else setup
            try:
                row = evaluate(cfg, hardware, changed, trial).row(0)
            except GraphError:
                continue
            if row["fits"]:
                fixes.append({"change": what, **row})
        fixes.sort(key=lambda r: r["step_s"])
    out: dict[str, Any] = {"layout": base, "fixes": fixes}
    if not base["fits"] and not fixes:  # no single change: the search's best layout, or why none fits at all
        result = search_layouts(cfg, hardware, layout.devices, setup)
        ranked = result.ranked()
        out["best_layout"] = result.row(ranked[0]) if ranked else None
        if not ranked:
            out["does_not_fit"] = does_not_fit(cfg, hardware, result)
    return out
