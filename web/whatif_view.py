"""What-if: a base device with scaled HBM bandwidth, SRAM, peak FLOP/s and clock, on a whole workload."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from perfmodel.hardware import Hardware
from perfmodel.specs import derive_variant
from web.metrics import op_metrics
from web.workloads import Workload

KNOBS: dict[str, tuple[str, str]] = {
    "hbm": ("HBM bandwidth", "levels.dram.bandwidth_bytes_per_s"),
    "sram": ("SRAM size", "levels.sram.capacity_bytes"),
    "flops": ("Peak FLOP/s", "engines.*.peak_flops_per_s"),
    "clock": ("Clock", "clock_hz"),
}
FACTOR_RANGE = (0.1, 10.0)


def overrides(factors: dict[str, float]) -> dict[str, str]:
    """``derive_variant`` overrides for the factors that differ from 1 (each clamped to 0.1–10)."""
    out: dict[str, str] = {}
    for key, (_, path) in KNOBS.items():
        value = factors.get(key, 1.0)
        if not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{key}: expected a number, got {value!r}")
        value = min(max(float(value), FACTOR_RANGE[0]), FACTOR_RANGE[1])
        if abs(value - 1.0) > 1e-9:
            out[path] = f"x{value:g}"
    return out


def what_if(base: Hardware, work: Workload, factors: dict[str, float], variant_id: str) -> dict[str, Any]:
    """The workload's time on ``base`` and on the variant, per op and in total (nothing is stored)."""
    changes = overrides(factors)
    variant = derive_variant(base, variant_id, changes) if changes else base
    before, after = op_metrics(base, work.ops), op_metrics(variant, work.ops)
    if before.index != after.index:
        raise ValueError("the variant cannot run the same ops as its base")
    counts = np.array([work.counts[i] for i in before.index], dtype=float)
    base_s, new_s = before.predicted_s * counts, after.predicted_s * counts
    rows: list[dict[str, Any]] = [
        {"name": work.names[i], "kind": str(work.ops[i].get("kind", "?")), "count": int(counts[j]),
             "base_s": float(base_s[j]), "variant_s": float(new_s[j]), "base_bound": before.bound[j],
             "variant_bound": after.bound[j], "speedup": float(base_s[j] / new_s[j]) if new_s[j] > 0 else None}
            for j, i in enumerate(before.index)]
    rows.sort(key=lambda r: -float(r["base_s"]))
    base_total, new_total = float(base_s.sum()), float(new_s.sum())
    return {"base": base.id, "variant_id": variant_id, "overrides": changes, "workload": work.label,
            "base_total_s": base_total, "variant_total_s": new_total,
            "speedup": base_total / new_total if new_total > 0 else None, "rows": rows,
            "problems": work.problems + [f"{work.names[i]}: {msg}" for i, msg in sorted(before.errors.items())]}
