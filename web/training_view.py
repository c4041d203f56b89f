"""The training-layouts page (``/models/training``): a bundled LLM, a device, a device count and a global batch
→ the fastest layouts that fit (``perfmodel.training.search``) and how many the others were ruled out by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfmodel.graph.llm_config import bundled, bundled_names
from perfmodel.hardware import Hardware
from perfmodel.training.layout import TrainingSetup
from perfmodel.training.no_fit import does_not_fit
from perfmodel.training.search import fastest, search_layouts
from web.models_view import FormError

PRECISIONS = ("bf16", "fp8")
LIMITS = {"devices": 65_536, "global_batch": 1 << 20, "seq_len": 1 << 20}
TOP = 10


@dataclass(frozen=True)
class TrainingQuery:
    """The form, checked; hashable for the view cache."""

    model: str = "llama-3-70b"
    devices: int = 64
    global_batch: int = 256
    seq_len: int = 8192
    precision: str = "bf16"


def _count(form: dict[str, str], name: str) -> int:
    text = form.get(name, "").strip()
    if not text.isdigit() or len(text) > 9 or not 1 <= int(text) <= LIMITS[name]:
        raise FormError(name, f"expected a whole number from 1 to {LIMITS[name]:,}, got {text[:40]!r}")
    return int(text)


def parse_training_query(form: dict[str, str]) -> TrainingQuery:
    """The form's strings → a ``TrainingQuery``; a bad field raises ``FormError`` naming it."""
    model, precision = form.get("model", ""), form.get("precision", "")
    if model not in bundled_names():
        raise FormError("model", f"{model[:60]!r} is not one of {', '.join(bundled_names())}")
    if precision not in PRECISIONS:
        raise FormError("precision", f"{precision[:20]!r} is not one of {', '.join(PRECISIONS)}")
    return TrainingQuery(model, _count(form, "devices"), _count(form, "global_batch"), _count(form, "seq_len"),
                         precision)


def training_view(hw: Hardware, q: TrainingQuery) -> dict[str, Any]:
    """Counts, reasons and the ``TOP`` fastest fitting layouts (rows of ``SearchResult.row``)."""
    setup = TrainingSetup(seq_len=q.seq_len, global_batch=q.global_batch,
                          precision="fp8" if q.precision == "fp8" else "bf16")
    cfg = bundled(q.model)
    result = search_layouts(cfg, hw, q.devices, setup)
    rows = fastest(result, TOP)
    return {"query": q, "count": result.count, "fit": len(result.ranked()),
            "ruled_out": sorted(result.reason_counts().items(), key=lambda kv: -kv[1]),
            "rows": rows, "does_not_fit": None if rows else does_not_fit(cfg, hw, result)}
