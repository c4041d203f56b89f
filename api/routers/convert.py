"""Core objects to JSON-safe dicts (no inf or nan: JSON has neither)."""

from __future__ import annotations

import math
from typing import Any

from perfmodel.roofline import Cost


def finite(value: Any) -> Any:
    """Replace inf/nan by None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def cost_json(cost: Cost, calibration: str | int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = finite(cost.to_dict())
    out["calibration"] = calibration
    return out
