"""Join two sides group by group: the change, its significance, each side against its roofs, and whether
the model expected it (its predicted ratio between the sides' devices / shapes) or not (a regression)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfmodel.compare.sides import Group, GroupKey, Side
from perfmodel.compare.stats import Change, holm_reject, measure_change
from perfmodel.compare.suspect import mark_suspects
from perfmodel.hardware import Hardware
from perfmodel.ops import Op
from perfmodel.roofline import predict_many, predict_valid

DEFAULT_THRESHOLD_PCT = 5.0
DEFAULT_ALPHA = 0.01  # family-wise (Holm) over the groups with enough repeats
# "regression", "improvement", "expected", "kernels changed", "within threshold", "no change", "too few repeats",
# "timing suspect" (a side's timings are faster than its device can go: excluded from the tests and the gate)
Verdict = str


class CompareError(ValueError):
    """Two sides that cannot be compared (formats, devices, nothing in common): says why and what to do."""


@dataclass(frozen=True)
class Prediction:
    time_s: float
    bound: str
    bytes_moved: float = 0.0  # the op's compulsory bytes and FLOPs on that device (for the physical check)
    flops: float = 0.0


@dataclass
class GroupDiff:
    """One (name, op, shape) on both sides. Times in seconds; ``ratio`` = new / base median per call."""

    key: GroupKey
    kind: str
    op: dict[str, Any] | None
    kernel_names: list[str]
    new_kernel_names: list[str]
    base_calls: int
    new_calls: int
    base_launches: int
    new_launches: int
    base_total_s: float
    new_total_s: float
    base_median_s: float
    new_median_s: float
    change: Change | None  # of new against base x the model's expected ratio
    base_prediction: Prediction | None = None
    new_prediction: Prediction | None = None
    verdict: Verdict = "no change"
    timing_suspect: str | None = None  # why one side's timings are impossible on its device (physical)
    work_suspect: str | None = None  # both sides faster than the op's work allows: its shapes are in doubt

    @property
    def name(self) -> str:
        return self.key[1]

    @property
    def kernels_changed(self) -> bool:
        """The library ran other kernels for the same op (an algorithm choice, e.g. cuDNN autotuning)."""
        return set(self.kernel_names) != set(self.new_kernel_names)

    @property
    def ratio(self) -> float:
        return self.new_median_s / self.base_median_s if self.base_median_s > 0 else math.nan

    @property
    def change_pct(self) -> float:
        return (self.ratio - 1.0) * 100.0

    @property
    def expected_ratio(self) -> float | None:
        """The model's predicted new / base ratio (1 for the same op on the same device)."""
        if self.base_prediction is None or self.new_prediction is None or self.base_prediction.time_s <= 0:
            return None
        return self.new_prediction.time_s / self.base_prediction.time_s

    @property
    def unexpected_pct(self) -> float:
        """The change beyond what the model expected (%): measured ratio / expected ratio - 1."""
        return (self.ratio / (self.expected_ratio or 1.0) - 1.0) * 100.0

    def headroom(self, side: str) -> float | None:
        """Predicted / measured median per call on one side ('base' or 'new'): 1 = at the roofline."""
        pred = self.base_prediction if side == "base" else self.new_prediction
        measured = self.base_median_s if side == "base" else self.new_median_s
        return pred.time_s / measured if pred is not None and measured > 0 else None


@dataclass
class TraceDiff:
    base: str
    new: str
    format: str
    base_device: str | None
    new_device: str | None
    base_hardware: str | None
    new_hardware: str | None
    threshold_pct: float
    alpha: float
    groups: list[GroupDiff]
    only_base: list[Group]
    only_new: list[Group]
    base_total_s: float
    new_total_s: float
    kinds: list[dict[str, Any]] = field(default_factory=list)
    layers: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[GroupDiff]:
        return [g for g in self.groups if g.verdict == "regression"]


def _predict(hardware: Hardware | None, ops: list[dict[str, Any]]) -> list[Prediction | None]:
    if hardware is None or not ops:
        return [None] * len(ops)

    def run(built: list[Op]) -> tuple[np.ndarray[Any, Any], ...]:
        batch = predict_many(hardware, built, timing="kernel")
        return batch.time_s, np.asarray(batch.bound), batch.compulsory_bytes, batch.flops

    index, result, _ = predict_valid(ops, run)
    out: list[Prediction | None] = [None] * len(ops)
    if result is not None:
        for j, i in enumerate(index):
            out[i] = Prediction(float(result[0][j]), str(result[1][j]), float(result[2][j]), float(result[3][j]))
    return out


def _check(base: Side, new: Side, base_hw: Hardware | None, new_hw: Hardware | None) -> None:
    stored = "stored runs"
    if base.format != new.format and stored not in (base.format, new.format):
        raise CompareError(f"different trace formats: {base.label} is {base.format}, {new.label} is {new.format}; "
                           "compare two profiles of one profiler (kernel names and op records differ between them)")
    same_hw = (base_hw.id if base_hw else None) == (new_hw.id if new_hw else None)
    if base.device_name and new.device_name and base.device_name != new.device_name and same_hw:
        raise CompareError(f"different devices: {base.label} ran on {base.device_name!r}, {new.label} on "
                           f"{new.device_name!r}; give each side's hardware (--hardware BASE_ID --new-hardware NEW_ID) "
                           "so the model says which change it expects")
    if not base.groups or not new.groups:
        empty = base.label if not base.groups else new.label
        raise CompareError(f"{empty} has no kernels or op calls to compare")


def _candidate(g: GroupDiff, threshold_pct: float) -> bool:
    """Beyond the threshold (after what the model expected) with the same kernels on both sides: only these
    can fail the gate, so only these share the family-wise test (Holm)."""
    return g.change is not None and not g.kernels_changed and abs(g.unexpected_pct) > threshold_pct


def _verdict(g: GroupDiff, significant: bool, threshold_pct: float) -> Verdict:
    if g.change is None:
        return "too few repeats"
    ci_excludes_one = g.change.ci_low > 1.0 or g.change.ci_high < 1.0
    moved_as_expected = g.expected_ratio not in (None, 1.0) and abs(g.change_pct) > threshold_pct
    if not (significant and ci_excludes_one):
        return "expected" if moved_as_expected and abs(g.unexpected_pct) <= threshold_pct else "no change"
    if g.kernels_changed and abs(g.unexpected_pct) > threshold_pct:
        return "kernels changed"
    if g.unexpected_pct > threshold_pct:
        return "regression"
    if g.unexpected_pct < -threshold_pct:
        return "improvement"
    if abs(g.change_pct) > threshold_pct:
        return "expected"
    return "within threshold"


MIN_MATCHED_SHARE = 0.25  # of each side's device time in common groups, below which the diff warns (HTA's
# sampled ranks of one job: 54 % / 51 %; ResNet-50 vs AlexNet: 0.0 %)


def _totals(pairs: list[tuple[str, float, float]]) -> list[dict[str, Any]]:
    out: dict[str, list[float]] = {}
    for name, base_s, new_s in pairs:
        entry = out.setdefault(name, [0.0, 0.0])
        entry[0] += base_s
        entry[1] += new_s
    rows = [{"name": k, "base_s": b, "new_s": n, "change_s": n - b} for k, (b, n) in out.items()]
    return sorted(rows, key=lambda r: -abs(r["change_s"]))


def diff_sides(base: Side, new: Side, base_hw: Hardware | None = None, new_hw: Hardware | None = None,
               threshold_pct: float = DEFAULT_THRESHOLD_PCT, alpha: float = DEFAULT_ALPHA) -> TraceDiff:
    """Compare ``new`` against ``base`` (see the module docstring). ``new_hw`` defaults to ``base_hw``."""
    if not (math.isfinite(threshold_pct) and threshold_pct >= 0):
        raise CompareError(f"threshold: expected a percentage >= 0, got {threshold_pct}")
    if not 0 < alpha < 1:
        raise CompareError(f"alpha: expected a level between 0 and 1, got {alpha}")
    new_hw = new_hw or base_hw
    _check(base, new, base_hw, new_hw)
    common = [k for k in base.groups if k in new.groups]
    if not common:
        raise CompareError(f"no kernel or op (name, op, shape) in common between {base.label} and {new.label}: "
                           "are they profiles of the same workload?")
    groups: list[GroupDiff] = []
    for key in common:
        b, n = base.groups[key], new.groups[key]
        groups.append(GroupDiff(key, b.kind, b.op, b.kernel_names, n.kernel_names, len(b.times_s),
                                len(n.times_s), b.launches, n.launches, b.total_s, n.total_s,
                                float(np.median(b.times_s)), float(np.median(n.times_s)), None))
    modelled = [g for g in groups if g.op is not None]
    ops = [g.op for g in modelled if g.op is not None]
    for g, pb, pn in zip(modelled, _predict(base_hw, ops), _predict(new_hw, ops), strict=True):
        g.base_prediction, g.new_prediction = pb, pn
    mark_suspects(groups, base, new, base_hw, new_hw)
    for seed, g in enumerate(groups):  # tested against the model's expectation: new vs base x expected ratio
        scale = g.expected_ratio or 1.0
        base_s = base.groups[g.key].times_s
        g.change = measure_change([t * scale for t in base_s] if scale != 1.0 else base_s,
                                  new.groups[g.key].times_s, seed)
    tested = [g for g in groups if g.timing_suspect is None]  # impossible timings: reported, never tested
    candidates = [g for g in tested if _candidate(g, threshold_pct)]
    switched = [g for g in tested if g.change is not None and g.kernels_changed
                and abs(g.unexpected_pct) > threshold_pct]  # another algorithm: reported, never a regression
    family_of = {id(g) for g in (*candidates, *switched)}
    others = [g for g in tested if g.change is not None and id(g) not in family_of]
    for family in (candidates, switched, others):
        significant = holm_reject([g.change.p_value for g in family if g.change is not None], alpha)
        for g, sig in zip(family, significant, strict=True):
            g.verdict = _verdict(g, sig, threshold_pct)
    for g in groups:
        if g.timing_suspect is not None:
            g.verdict = "timing suspect"
        elif g.change is None:
            g.verdict = "too few repeats"
    groups.sort(key=lambda g: -abs(g.new_total_s - g.base_total_s))
    only_base = sorted((g for k, g in base.groups.items() if k not in new.groups), key=lambda g: -g.total_s)
    only_new = sorted((g for k, g in new.groups.items() if k not in base.groups), key=lambda g: -g.total_s)
    kinds = _totals([(g.kind, g.base_total_s, g.new_total_s) for g in groups]
                    + [(g.kind, g.total_s, 0.0) for g in only_base] + [(g.kind, 0.0, g.total_s) for g in only_new])
    layer_pairs: list[tuple[str, float, float]] = []
    for side in (base.groups, new.groups):
        for member in side.values():
            layer_pairs += [(layer, s, 0.0) if side is base.groups else (layer, 0.0, s)
                            for layer, s in member.layers.items()]
    return TraceDiff(base.label, new.label, base.format if base.format == new.format else f"{base.format} / "
                     f"{new.format}", base.device_name, new.device_name, base_hw.id if base_hw else None,
                     new_hw.id if new_hw else None, threshold_pct, alpha, groups, only_base, only_new,
                     base.total_time_s, new.total_time_s, kinds, _totals(layer_pairs),
                     [*_overlap_warning(base, new, groups), *base.warnings[:20], *new.warnings[:20]])


def _overlap_warning(base: Side, new: Side, groups: list[GroupDiff]) -> list[str]:
    """A warning where the groups found on both sides hold under ``MIN_MATCHED_SHARE`` of either side's time: the
    verdicts cover little of the profiles (two workloads, or another batch size: every shape differs)."""
    shares = [sum(g.base_total_s for g in groups) / base.total_time_s if base.total_time_s > 0 else 1.0,
              sum(g.new_total_s for g in groups) / new.total_time_s if new.total_time_s > 0 else 1.0]
    if min(shares) >= MIN_MATCHED_SHARE:
        return []
    return [f"only {shares[0]:.1%} of {base.label}'s device time and {shares[1]:.1%} of {new.label}'s is in the "
            f"{len(groups)} group(s) found on both sides: are they profiles of the same workload? "
            "(the verdicts say nothing about the rest)"]
