"""A trace read offline: its kernels, what the model predicts for its ops, and what it could not model.

``perfmodel trace FILE --hardware ID`` prints it without the service (``--store`` also ingests the file as
``POST /api/v1/traces`` does). Repeated calls of one op (same op, same shapes) are one row: a training step
calls each layer's GEMMs many times, and the rows are ranked by their summed measured time, so the
first rows are where the time goes.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from perfmodel.hardware import Hardware
from perfmodel.ops import Op
from perfmodel.ops.base import FloatArray
from perfmodel.roofline import predict_many, predict_valid
from perfmodel.traces.device_check import device_mismatch
from perfmodel.traces.geometry_ops import no_launch_work
from perfmodel.traces.ingest import alarms_json
from perfmodel.traces.matching import MatchedRun, MatchResult, UnmodelledKernel
from perfmodel.traces.measured_roofline import (
    CounterPoint,
    counter_points,
    measured_roofline_json,
    time_by_headroom,
)
from perfmodel.traces.op_text import op_key
from perfmodel.traces.records import ParsedTrace
from perfmodel.units import format_time_s

if TYPE_CHECKING:
    from perfmodel.calibration import Calibration


@dataclass(frozen=True)
class OpRow:
    """Calls of one op in the trace, with their summed measured and predicted device time (seconds)."""

    op_name: str
    kind: str
    op: dict[str, Any]
    calls: int
    measured_s: float
    predicted_s: float
    interval_s: tuple[float, float] | None  # per call, 10-90 %, with a calibration

    @property
    def error_pct(self) -> float:
        """Signed: > 0 where the model is slower than measured."""
        return (self.predicted_s / self.measured_s - 1.0) * 100.0 if self.measured_s > 0 else float("nan")


@dataclass(frozen=True)
class KindRow:
    """One op kind: calls, summed times (s), share of the trace's kernel time, per-call error (%)."""

    kind: str
    calls: int
    measured_s: float
    predicted_s: float
    share: float
    median_abs_error_pct: float
    bias_pct: float


@dataclass
class TraceReport:
    format: str
    hardware_id: str
    calibration: str | None
    kernels: int
    total_kernel_time_s: float
    matched_time_s: float
    ops: list[OpRow]
    kinds: list[KindRow]
    unmodelled: list[UnmodelledKernel]
    rejected: dict[str, int] = field(default_factory=dict)  # why a matched op could not be predicted -> calls
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    alarms: list[dict[str, Any]] = field(default_factory=list)
    counter_points: list[CounterPoint] = field(default_factory=list)  # kernels with profiler counters, by name
    by_source: dict[str, float] = field(default_factory=dict)  # matched time (s) per match source
    by_category: dict[str, float] = field(default_factory=dict)  # unmodelled time (s) per reason category
    has_device_time: bool = True  # False: a CPU-only profile, its times are host op times
    no_work: str | None = None  # why nothing can be modelled where no record carries work per launch (a summary)

    @property
    def unmodelled_share(self) -> float:
        total = self.total_kernel_time_s
        return (total - self.matched_time_s) / total if total > 0 else 0.0

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        """JSON-ready (SI units; nan as None); ``top``: at most that many ops, unmodelled kernels and alarms."""
        def finite(value: float) -> float | None:
            return value if np.isfinite(value) else None

        lists = ("ops", "kinds", "unmodelled", "alarms", "counter_points")
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in lists}
        out["ops"] = [{**dataclasses.asdict(r), "error_pct": finite(r.error_pct)} for r in self.ops[:top]]
        out["kinds"] = [{**dataclasses.asdict(k), "median_abs_error_pct": finite(k.median_abs_error_pct),
                         "bias_pct": finite(k.bias_pct)} for k in self.kinds]
        out["unmodelled"] = [dataclasses.asdict(u) for u in self.unmodelled[:top]]
        out["alarms"] = self.alarms[:top]
        out["measured_roofline"] = measured_roofline_json(self.counter_points, top)
        out["unmodelled_share"] = self.unmodelled_share
        total = self.total_kernel_time_s
        out["matched_share_by_source"] = {k: v / total for k, v in self.by_source.items()} if total > 0 else {}
        out["unmodelled_share_by_category"] = {k: v / total for k, v in self.by_category.items()} if total > 0 else {}
        return out


def _distinct(runs: Sequence[MatchedRun]) -> tuple[list[int], list[int]]:
    """The runs' distinct ops: the first run of each (indices into ``runs``) and each run's distinct op."""
    first: list[int] = []
    of_run: list[int] = []
    position: dict[bytes, int] = {}
    for i, run in enumerate(runs):
        key = op_key(run.op)
        found = position.get(key)
        if found is None:
            found = position[key] = len(first)
            first.append(i)
        of_run.append(found)
    return first, of_run


def _predicted(hardware: Hardware, runs: Sequence[MatchedRun], distinct: tuple[list[int], list[int]],
               calibration: Calibration | None) -> tuple[list[int], FloatArray, FloatArray | None, dict[str, int]]:
    """The runs the model predicts on ``hardware`` (indices), their predicted device seconds (``kernel`` timing),
    the calibrated 10-90 % intervals if any, and the other runs counted by why not. Each distinct op is built and
    predicted once (a prediction depends on the op alone) and its answer given to every run of it."""
    if calibration is None:
        def predict(ops: list[Op]) -> tuple[FloatArray, FloatArray | None]:
            return predict_many(hardware, ops, timing="kernel").time_s, None
    else:
        from perfmodel.calibration import predict_calibrated

        def predict(ops: list[Op]) -> tuple[FloatArray, FloatArray | None]:
            batch = predict_calibrated(hardware, ops, calibration)
            return batch.time_s, batch.interval_s
    first, of_run = distinct
    valid, result, errors = predict_valid([runs[i].op for i in first], predict)
    rejected: dict[str, int] = defaultdict(int)
    at = np.full(len(first), -1, dtype=np.intp)  # distinct op -> its row in the prediction, -1: rejected
    at[valid] = np.arange(len(valid))
    rows = at[np.asarray(of_run, dtype=np.intp)] if runs else np.zeros(0, dtype=np.intp)
    index = np.flatnonzero(rows >= 0)
    for i in np.flatnonzero(rows < 0):
        rejected[errors[of_run[i]][:300]] += 1
    if result is None:
        return [], np.zeros(0), None, dict(rejected)
    time_s, interval = result
    picked = rows[index]
    return index.tolist(), time_s[picked], None if interval is None else interval[picked], dict(rejected)


def _op_rows(runs: Sequence[MatchedRun], of_run: list[int], index: list[int], predicted: np.ndarray[Any, Any],
             interval: np.ndarray[Any, Any] | None) -> list[OpRow]:
    """One row per op name and distinct op (``of_run``: each run's distinct op, ``_distinct``)."""
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for j, i in enumerate(index):
        groups[(runs[i].op_name, of_run[i])].append(j)
    rows = []
    for members in groups.values():
        first = runs[index[members[0]]]
        band = None if interval is None or not np.isfinite(interval[members[0]]).all() else (
            float(interval[members[0], 0]), float(interval[members[0], 1]))  # nan: no run informs it
        rows.append(OpRow(first.op_name, str(first.op.get("kind", "?")), first.op, len(members),
                          float(sum(runs[index[j]].measured_time_s for j in members)),
                          float(predicted[members].sum()), band))
    rows.sort(key=lambda r: -r.measured_s)
    return rows


def _kind_rows(runs: Sequence[MatchedRun], index: list[int], predicted: np.ndarray[Any, Any],
               total_s: float) -> list[KindRow]:
    by_kind: dict[str, list[int]] = defaultdict(list)
    for j, i in enumerate(index):
        by_kind[str(runs[i].op.get("kind", "?"))].append(j)
    rows = []
    for kind, members in by_kind.items():
        measured = np.array([runs[index[j]].measured_time_s for j in members])
        ok = measured > 0
        error = (predicted[members][ok] / measured[ok] - 1.0) * 100.0
        rows.append(KindRow(kind, len(members), float(measured.sum()), float(predicted[members].sum()),
                            float(measured.sum() / total_s) if total_s > 0 else 0.0,
                            float(np.median(np.abs(error))) if error.size else float("nan"),
                            float(np.median(error)) if error.size else float("nan")))
    rows.sort(key=lambda r: -r.measured_s)
    return rows


def trace_report(hardware: Hardware, parsed: ParsedTrace, matched: MatchResult,
                 calibration: Calibration | None = None, calibration_name: str | None = None) -> TraceReport:
    """Predict every matched op of a parsed trace on ``hardware`` (calibrated if given) and summarise."""
    distinct = _distinct(matched.runs)
    index, predicted, interval, rejected = _predicted(hardware, matched.runs, distinct, calibration)
    notes = sorted({note for i in index for note in matched.runs[i].notes})
    return TraceReport(
        format=parsed.format, hardware_id=hardware.id, calibration=calibration_name, kernels=len(parsed.kernels),
        total_kernel_time_s=matched.total_kernel_time_s, matched_time_s=matched.matched_time_s,
        ops=_op_rows(matched.runs, distinct[1], index, predicted, interval),
        kinds=_kind_rows(matched.runs, index, predicted, matched.total_kernel_time_s),
        unmodelled=list(matched.unmodelled), rejected=rejected, notes=notes,
        warnings=[*filter(None, [device_mismatch(hardware, parsed.device_name, parsed.kernels)]), *parsed.warnings],
        alarms=alarms_json(hardware, parsed.kernels, matched), counter_points=counter_points(hardware, parsed.kernels),
        by_source=matched.time_by_source(), by_category=matched.time_by_category(),
        has_device_time=parsed.has_device_time, no_work=no_launch_work(parsed.kernels, parsed.format))


def _source_lines(report: TraceReport) -> list[str]:
    """Matched share by source and unmodelled share by reason category, of the total time."""
    total = report.total_kernel_time_s
    if total <= 0:
        return []
    lines = []
    if report.by_source:
        lines.append("matched by source: " + ", ".join(f"{s} {t / total:.1%}" for s, t in report.by_source.items()))
    if report.by_category:
        lines.append("unmodelled by reason: " + ", ".join(f"{c} {t / total:.1%}"
                                                         for c, t in report.by_category.items()))
    return lines


def _short(op: dict[str, Any]) -> str:
    """An op's fields after its kind, compact: 'm=4096 n=4096 k=4096 dtype=bf16'."""
    return " ".join(f"{k}={'x'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in op.items() if k != "kind")


# control characters (newlines, ANSI escapes) in a kernel or op name would break lines or drive the terminal
_CONTROL_TO_SPACE = {c: " " for c in [*range(0x20), *range(0x7F, 0xA0)]}


def _clip(text: str, width: int) -> str:
    text = text.translate(_CONTROL_TO_SPACE)
    return text if len(text) <= width else text[:width - 1] + "…"


def _alarm_groups(alarms: list[dict[str, Any]]) -> dict[tuple[str, str, str], tuple[int, float, str]]:
    """Alarms of one op name, quantity and kind together: (count, highest attained / roof, a reason)."""
    out: dict[tuple[str, str, str], tuple[int, float, str]] = {}
    for a in alarms:
        key = (str(a["name"]), str(a["quantity"]), str(a["kind"]))
        ratio = float(a["attained_per_s"]) / float(a["roof_per_s"]) if a["roof_per_s"] else float("inf")
        count, worst, reason = out.get(key, (0, 0.0, str(a["reason"])))
        out[key] = (count + 1, max(worst, ratio), reason if worst >= ratio else str(a["reason"]))
    return out


def _kind_lines(report: TraceReport) -> list[str]:
    lines = [f"{'op kind':<14}{'calls':>7}{'measured':>12}{'share':>7}{'predicted':>12}{'median |err|':>14}"
             f"{'bias':>8}"]
    for k in report.kinds:
        lines.append(f"{_clip(k.kind, 13):<14}{k.calls:>7}{format_time_s(k.measured_s):>12}{k.share:>7.1%}"
                     f"{format_time_s(k.predicted_s):>12}{k.median_abs_error_pct:>13.1f}%{k.bias_pct:>+7.1f}%")
    return lines


def _op_lines(report: TraceReport, top: int) -> list[str]:
    interval = "; [10-90 % interval of one call]" if report.calibration else ""
    lines = [f"top {min(top, len(report.ops))} of {len(report.ops)} ops by measured time; error > 0: the model is "
             f"slower{interval}"]
    for r in report.ops[:top]:
        band = f"  [{format_time_s(r.interval_s[0])}, {format_time_s(r.interval_s[1])}]" if r.interval_s else ""
        lines.append(f"  {format_time_s(r.measured_s):>10} {r.calls:>5}x  predicted {format_time_s(r.predicted_s):>10}"
                     f" {r.error_pct:>+7.1f}%  {_clip(r.op_name, 32)}  {_clip(r.kind + ' ' + _short(r.op), 72)}{band}")
    return lines


def _left_out_lines(report: TraceReport, top: int) -> list[str]:
    """Calls the model rejects, unmodelled kernels, roof alarms."""
    lines = []
    if report.rejected:
        lines.append(f"{sum(report.rejected.values())} matched calls the model rejects: "
                     + "; ".join(f"{n}x {_clip(why, 120)}" for why, n in sorted(report.rejected.items())[:5]))
    if report.unmodelled:
        names = f"{len(report.unmodelled)} name{'s' if len(report.unmodelled) != 1 else ''}"
        lines += ["", f"unmodelled kernels ({names}), largest first:"]
        for u in report.unmodelled[:top]:
            lines.append(f"  {format_time_s(u.time_s):>10} {u.count:>5}x  {_clip(u.name, 70)}  "
                         f"({_clip(u.reason, 100)})")
    if report.alarms:
        capped = " (the first 100)" if len(report.alarms) >= 100 else ""
        lines += ["", f"roof alarms: {len(report.alarms)} measured points above the model's roof{capped}"]
        for (name, quantity, _), (count, worst, reason) in list(_alarm_groups(report.alarms).items())[:top]:
            lines.append(f"  {count:>4}x {_clip(name, 40)} {quantity} up to {worst:.2f}x its roof: "
                         f"{_clip(reason, 120)}")
    return lines


def _share(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "-"


def _counter_lines(report: TraceReport, top: int) -> list[str]:
    """Where the kernels with profiler counters stand against the roofs (attained / roof per level)."""
    points = report.counter_points
    if not points:
        return []
    split = time_by_headroom(points)
    lines = ["", f"measured roofline ({len(points):,} kernel names with counters, "
                 f"{format_time_s(sum(p.time_s for p in points))}): of their time {split['at_roof']:.0%} runs at "
                 f"80% or more of a roof, {split['near_roof']:.0%} at 50-80%, {split['far_below']:.0%} below half "
                 "of every roof (latency, occupancy or launch bound)"
                 + (f", {split['no_counter']:.0%} without a roof counter" if split["no_counter"] else ""),
             f"  {'time':>10} {'calls':>6} {'DRAM':>5} {'L2':>5} {'L1':>5} {'FLOP':>5} {'tensor':>6}  nearest  kernel"]
    for p in points[:top]:
        s = p.share_of_roof
        lines.append(f"  {format_time_s(p.time_s):>10} {p.launches:>5}x {_share(s.get('dram')):>5} "
                     f"{_share(s.get('l2')):>5} {_share(s.get('l1')):>5} {_share(s.get('compute')):>5} "
                     f"{_share(s.get('tensor')):>6}  {p.nearest:<7}  {_clip(p.name, 60)}")
    return lines


def format_trace_report(report: TraceReport, top: int = 15) -> str:
    """The report as text: totals, per op kind, the ``top`` ops by measured time, the unmodelled kernels."""
    model = f"calibration {report.calibration}" if report.calibration else "the uncalibrated model"
    if report.has_device_time:
        head = (f"{report.format} trace on {report.hardware_id}: {report.kernels:,} device activities, "
                f"{format_time_s(report.total_kernel_time_s)} of device time; {report.unmodelled_share:.1%} of it "
                f"unmodelled. Predictions: {model}.")
    else:
        head = (f"NO DEVICE TIMING: this {report.format} file is a CPU-only profile; its {report.kernels:,} records "
                f"are host op times ({format_time_s(report.total_kernel_time_s)}), not kernel time; "
                f"{report.unmodelled_share:.1%} of it unmodelled. Predictions: {model}, device time of the ops.")
    lines = [report.no_work, head] if report.no_work else [head]
    lines += [*_source_lines(report), ""]
    if report.kinds:
        lines += [*_kind_lines(report), "", *_op_lines(report, top)]
    else:
        lines.append("no op of the trace could be modelled: the kernels below say why")
    lines += _left_out_lines(report, top)
    lines += _counter_lines(report, top)
    lines += [f"note: {_clip(note, 160)}" for note in report.notes[:top]]
    lines += [f"warning: {_clip(warning, 200)}" for warning in report.warnings[:top]]
    return "\n".join(lines)


__all__ = ["KindRow", "OpRow", "TraceReport", "format_trace_report", "trace_report"]
