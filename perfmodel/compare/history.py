"""History: one op's median time across several traces (oldest first) with the model's prediction beside it,
and change points where consecutive traces differ significantly (``diff_sides`` on each neighbouring pair)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from perfmodel.compare.diff import DEFAULT_ALPHA, DEFAULT_THRESHOLD_PCT, CompareError, diff_sides
from perfmodel.compare.sides import GroupKey, Side
from perfmodel.hardware import Hardware

MAX_TRACES = 50  # traces in one history (bounded work: one diff per neighbouring pair)
CHANGE_VERDICTS = ("regression", "improvement", "kernels changed", "expected")


@dataclass
class Series:
    """One group across the traces: per trace its median per call (s) and prediction (s), None where absent."""

    key: GroupKey
    kind: str
    median_s: list[float | None]
    predicted_s: list[float | None]
    change_points: list[dict[str, Any]] = field(default_factory=list)  # index of the later trace, verdict, %


def history(sides: Sequence[tuple[Side, Hardware | None]], threshold_pct: float = DEFAULT_THRESHOLD_PCT,
            alpha: float = DEFAULT_ALPHA) -> tuple[list[Series], list[str]]:
    """Series of every group seen in two traces or more, and a note per neighbouring pair that could not be
    compared. ``sides`` oldest first, each with its device."""
    if not 2 <= len(sides) <= MAX_TRACES:
        raise CompareError(f"history: expected 2 to {MAX_TRACES} traces, got {len(sides)}")
    counts: dict[GroupKey, int] = {}
    for side, _ in sides:
        for key in side.groups:
            counts[key] = counts.get(key, 0) + 1
    series = {key: Series(key, "", [None] * len(sides), [None] * len(sides)) for key, n in counts.items() if n >= 2}
    notes: list[str] = []
    for i in range(1, len(sides)):
        (base, base_hw), (new, new_hw) = sides[i - 1], sides[i]
        try:
            result = diff_sides(base, new, base_hw, new_hw, threshold_pct, alpha)
        except CompareError as exc:
            notes.append(f"{base.label} -> {new.label}: {exc}")
            continue
        for g in result.groups:
            entry = series.get(g.key)
            if entry is None:
                continue
            entry.kind = g.kind
            entry.median_s[i - 1], entry.median_s[i] = g.base_median_s, g.new_median_s
            if g.base_prediction is not None:
                entry.predicted_s[i - 1] = g.base_prediction.time_s
            if g.new_prediction is not None:
                entry.predicted_s[i] = g.new_prediction.time_s
            if g.verdict in CHANGE_VERDICTS:
                entry.change_points.append({"index": i, "verdict": g.verdict, "change_pct": g.change_pct,
                                            "unexpected_pct": g.unexpected_pct})
    ordered = sorted(series.values(), key=lambda s: (-len(s.change_points), s.key))
    return [s for s in ordered if any(m is not None for m in s.median_s)], notes
