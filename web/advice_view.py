"""The models page's "Compiler advice" section: where quantization pays and, when the device declares its op
support, which ops fall back to the host (``perfmodel.advice``) for the model, phase and batch of the form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfmodel.advice.partition import partition
from perfmodel.advice.precision import precision_advice
from perfmodel.advice.source import advice_graph
from perfmodel.hardware import Hardware
from web.models_view import ModelQuery

FALLBACK_HOST = "intel-xeon-platinum-8480"
TOP_OPS = 8


@dataclass
class AdviceView:
    """Per scheme the step's time and gain; the ops that gain most under the best scheme; the partition."""

    graph_time_s: float
    schemes: list[dict[str, Any]]
    best_scheme: str | None
    top_ops: list[dict[str, Any]]
    partition: dict[str, Any] | None  # None: the device declares no supported_ops
    fallback_host: str


def advice_view(hw: Hardware, q: ModelQuery) -> AdviceView:
    """Precision advice (and partition advice where the spec declares ``supported_ops``) on one device."""
    graph = advice_graph(q.model, q.phase, q.batch, q.prompt_tokens, q.dtype)
    report = precision_advice(graph, hw)
    schemes: list[dict[str, Any]] = [{"scheme": name, **total} for name, total in report.totals.items()]
    best = max(schemes, key=lambda s: s["gain_s"]) if schemes else None
    best_name = best["scheme"] if best and best["gain_s"] > 0 else None
    top: list[dict[str, Any]] = []
    if best_name is not None:
        merged: dict[str, dict[str, Any]] = {}
        for row in report.ops:  # repeated layers: one row per op name within a layer, summed
            value = row["schemes"][best_name]
            if not value["applies"]:
                continue
            name = row["node"].split(".")[-1]
            slot = merged.setdefault(name, {"op": name, "count": 0, "base_time_s": 0.0, "gain_s": 0.0,
                                            "quantize_time_s": 0.0})
            slot["count"] += 1
            slot["base_time_s"] += row["base_time_s"]
            slot["gain_s"] += value["gain_s"]
            slot["quantize_time_s"] += value["quantize_time_s"]
        top = sorted(merged.values(), key=lambda r: -r["gain_s"])[:TOP_OPS]
    placed = partition(graph, hw, FALLBACK_HOST).to_json() if hw.supported_ops is not None else None
    return AdviceView(report.graph_time_s, schemes, best_name, top, placed, FALLBACK_HOST)
