"""``Calibration``: fitted parameters for one device, JSON (de)serialisation, and applying them."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from perfmodel.calibration import curve, shape
from perfmodel.calibration.bands_apply import (
    borrowed_band,
    distance_band,
    each_its_own,
    extrapolated,
    local_log_factor,
    once_per_op,
    unvaried_band,
)
from perfmodel.calibration.boost import ResidualTrees
from perfmodel.calibration.classes import class_codes, parent_key
from perfmodel.calibration.distance import DistanceScale
from perfmodel.calibration.local import LocalCorrection
from perfmodel.calibration.op_groups import Group, by_type, probably_distinct
from perfmodel.calibration.target_band import stored_class_scales, stored_scale, transfer_band
from perfmodel.collectives import devices_per_node
from perfmodel.cost import CostBatch, _Rows
from perfmodel.hardware import Hardware
from perfmodel.ops.base import FloatArray, IntArray, Op
from perfmodel.roofline import HardwareLike, OpLike, SpaceName, predict_built, predict_many, resolve_hardware

FORMAT = 1
Source = Literal["fitted", "class", "hardware", "defaults", "transferred"]
Range = tuple[float, float]


@dataclass(frozen=True)
class ClassParams:
    """The parameters one op class (or the whole device) uses, and where they came from."""

    source: Source
    theta: FloatArray  # curve.NAMES
    runs: int = 0  # runs of this class on this device
    interval_log: Range | None = None  # 10 % and 90 % quantiles of log(t_measured / t_cal)
    log10_flops_range: Range | None = None  # size range of the fitted runs
    log10_bytes_range: Range | None = None
    transferred_from: str | None = None  # device id the parameters were fitted on
    shape_range: tuple[list[float], list[float]] | None = None  # per shape number: lowest, highest fitted
    local: LocalCorrection | None = None  # residuals smoothed over the measured shapes (``local``)
    weight: float = 1.0  # share of ``theta``'s correction applied (< 1: borrowed, see ``borrowed``)
    beyond_log: Range | None = None  # the band of an op beyond the fitted data (size or shape outside its range)
    # conformal band of log(t_measured / t_model) over the class's runs: what the uncalibrated model missed by, the
    # band of an op that varies a shape number the class's runs never varied (``_unvaried_band``)
    model_log: Range | None = None
    distance: DistanceScale | None = None  # the band's spread by an op's distance to the fitted ops (``distance``)

    @property
    def applied_theta(self) -> FloatArray:
        """The parameters predictions use: ``theta`` with ``weight`` of its correction."""
        return self.theta if self.weight == 1.0 else curve.share(self.theta, self.weight)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "runs": self.runs, "params": curve.to_named(self.theta),
                "interval_log_ratio": _pair(self.interval_log), "log10_flops_range": _pair(self.log10_flops_range),
                "log10_bytes_range": _pair(self.log10_bytes_range), "transferred_from": self.transferred_from,
                "shape_range": None if self.shape_range is None else [list(v) for v in self.shape_range],
                "local": None if self.local is None else self.local.to_json(),
                "weight": self.weight, "beyond_log_ratio": _pair(self.beyond_log),
                "model_log_ratio": _pair(self.model_log),
                "distance": None if self.distance is None else self.distance.to_json()}

    @staticmethod
    def from_json(data: dict[str, Any]) -> ClassParams:
        source = data["source"]
        if source not in ("fitted", "class", "hardware", "defaults", "transferred"):
            raise ValueError(f"calibration class source {source!r}: expected fitted, class, hardware, defaults "
                             "or transferred")
        return ClassParams(source, curve.from_named(data["params"]), int(data.get("runs", 0)),
                           _range(data.get("interval_log_ratio")), _range(data.get("log10_flops_range")),
                           _range(data.get("log10_bytes_range")), data.get("transferred_from"),
                           _shape_range(data.get("shape_range")),
                           None if data.get("local") is None else LocalCorrection.from_json(data["local"]),
                           _weight(data.get("weight", 1.0)), _range(data.get("beyond_log_ratio")),
                           _range(data.get("model_log_ratio")),
                           None if data.get("distance") is None else DistanceScale.from_json(data["distance"]))


DEFAULTS = ClassParams("defaults", curve.IDENTITY)
BEYOND_NOTE = "calibration: beyond the fitted data, "
BEYOND_TAIL = "; the correction is extrapolated and the interval is the wider beyond band"
# Share of a correction fitted on other kernels that an op takes: a related device's (transfer), the
# device's pooled fit for a class never measured, a class's fit for a variant never measured.
# Applying all of it was worse than the model in every case measured (mean class median: 8 device
# transfers 35.9 % vs the model's 30.0, 39 classes on the device fit 39.4 vs 31.8, 12 variants on
# their class's fit 40.2 vs 29.3); 0.3 of it gave 26.9, 29.5 and 30.6 %: kernels differ, so a
# correction only partly carries (``benchmarks/transfer_weight.py``, docs/accuracy.md).
BORROWED_WEIGHT = 0.3
# Share of a related device's correction a transferred class takes: the weight never worse than no transfer on
# the dev set's leave-one-device-out test (``benchmarks/transfer_weight.py``: eight transfers between measured
# devices, Vidur A100 <-> A40, DeepBench V100 / P100 / T4; each transfer left out, the weight the other seven
# allow is one no worse than none on each of their GEMM-like and other rows). Every weight above 0 is worse than
# none on one of them: A100 -> A40 other ops 19.0 % median at 0 -> 22.9 % at 0.1, 25.7 % at 0.4; P100 -> T4
# GEMMs 32.4 -> 33.0 % at 0.1 (4c06490). So 0: a transfer predicts the model, with the model's own interval
# (``target_band.transfer_band``), not the source's correction (0.4 until the model changes of issue 24, at which pooled
# other-op rows went 15.6 -> 16.2 %; docs/calibration.md).
TRANSFER_WEIGHT = 0.0


def borrowed(entry: ClassParams) -> ClassParams:
    """``entry`` as used for kernels it was not fitted on: ``BORROWED_WEIGHT`` of its correction."""
    if entry.source == "defaults":
        return entry
    return dataclasses.replace(entry, weight=entry.weight * BORROWED_WEIGHT)


def transferred(entry: ClassParams) -> ClassParams:
    """``entry`` of a related device as used on this one: ``TRANSFER_WEIGHT`` of its correction."""
    if entry.source == "defaults":
        return entry
    return dataclasses.replace(entry, weight=entry.weight * TRANSFER_WEIGHT)


class Calibration:
    """Fitted parameters for one hardware: per ``class:dtype`` and pooled over the device.

    Build with ``fit_calibration``; store ``params`` (JSON) and rebuild with ``from_params``.
    """

    def __init__(self, hardware: dict[str, str], classes: dict[str, ClassParams], hardware_level: ClassParams,
                 report: dict[str, Any], timing: str = "kernel", space: SpaceName = "compact",
                 residual_trees: ResidualTrees | None = None, transfer_scale: float | None = None,
                 transfer_class_scales: dict[str, float] | None = None) -> None:
        self.hardware = dict(hardware)
        # the transferred classes' band scale measured on this device's own runs (``target_band``; None: as stored)
        self.transfer_scale = transfer_scale
        # per band class with >= 4 distinct ops measured here (the others take ``transfer_scale``)
        self.transfer_class_scales = dict(transfer_class_scales or {})
        self.residual_trees = residual_trees  # the device's trees over its fitted classes (``boost``), if kept
        self.classes = dict(classes)
        self.hardware_level = hardware_level
        self.timing = timing
        self.space: SpaceName = space
        self._report = report

    @property
    def hardware_id(self) -> str:
        return self.hardware["id"]

    @property
    def report(self) -> dict[str, Any]:
        """Per class: runs, source, in-sample and cross-validated median/p90 abs % error, size range."""
        return self._report

    @property
    def params(self) -> dict[str, Any]:
        """JSON-serialisable parameters (with the report), versioned by ``format``."""
        return {"format": FORMAT, "form": "t = (exp(log_overhead_scale)*overhead_s + body_s*exp(w_c*g_c(log10 flops)"
                                           " + (1-w_c)*g_m(log10 bytes) + sum(shape_j*z_j))) * exp(local c(x)),"
                                           " g(x) = a + b*sigmoid((x0-x)/exp(log_width))",
                "hardware": self.hardware, "timing": self.timing, "space": self.space,
                "hardware_level": self.hardware_level.to_json(),
                "classes": {k: v.to_json() for k, v in sorted(self.classes.items())},
                "residual_trees": None if self.residual_trees is None else self.residual_trees.to_json(),
                "transfer_scale": self.transfer_scale,
                "transfer_class_scales": dict(sorted(self.transfer_class_scales.items())),
                "report": _json_safe(self._report)}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Calibration:
        """Rebuild from ``params``; a format this version does not read is a ValueError."""
        fmt = params.get("format")
        if fmt != FORMAT:
            raise ValueError(f"calibration params format {fmt!r}: this version reads format {FORMAT}")
        hardware = params["hardware"]
        return cls({k: str(hardware[k]) for k in ("id", "vendor", "kind")},
                   {k: ClassParams.from_json(v) for k, v in params["classes"].items()},
                   ClassParams.from_json(params["hardware_level"]), dict(params.get("report") or {}),
                   str(params.get("timing", "kernel")), _space(params.get("space", "compact")),
                   None if params.get("residual_trees") is None else ResidualTrees.from_json(params["residual_trees"]),
                   stored_scale(params.get("transfer_scale")),
                   stored_class_scales(params.get("transfer_class_scales")))

    def entry(self, key: str) -> ClassParams:
        """The parameters a ``class[/variant]:dtype`` uses: its own, else its class's, else the device's
        (those two ``borrowed``: fitted on other kernels)."""
        found = self.classes.get(key)
        if found is not None:
            return found
        parent = self.classes.get(parent_key(key) or "")
        return borrowed(self.hardware_level if parent is None else parent)

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for entry in self.classes.values():
            counts[entry.source] = counts.get(entry.source, 0) + 1
        return f"Calibration({self.hardware_id!r}, classes={counts}, hardware_level={self.hardware_level.source!r})"


def apply_calibration(calibration: Calibration, batch: CostBatch) -> CostBatch:
    """A new batch with calibrated ``time_s`` and ``overhead_s``, per-row ``interval_s`` (n x 2 seconds,
    nan where no measurement informs it) and ``in_calibrated_range``.

    The breakdown (bytes, per-level and per-engine times) stays the model's speed-of-light one. Each row's answer
    depends on its op and its row of ``batch`` only: rows repeating an earlier row's op and model row (bit for bit,
    notes included) are calibrated once and taken (``CostBatch.take``: their ``ops`` entry is the equal first op).
    """
    _check_hardware(calibration, batch)
    distinct, op_row = distinct_ops(batch.ops)  # the per-op Python runs once per distinct op
    return _apply_distinct(calibration, batch, distinct, op_row)


def _check_hardware(calibration: Calibration, batch: CostBatch) -> None:
    hw = batch.hardware
    if calibration.hardware_id not in (hw.id, hw.derived_from):
        raise ValueError(f"calibration for {calibration.hardware_id!r} applied to {hw.id!r}: fit one for it, "
                         "or seed one with fit_calibration(hardware, runs, base=...)")


def _apply_distinct(calibration: Calibration, batch: CostBatch, distinct: list[Op], op_row: IntArray,
                    groups: list[Group] | None = None) -> CostBatch:
    repeated = _repeated_rows(batch, op_row)
    if repeated is not None:
        first, back = repeated
        return _apply(calibration, batch.take(first), distinct, np.arange(first.size), groups).take(back)
    return _apply(calibration, batch, distinct, op_row, groups)


def _repeated_rows(batch: CostBatch, op_row: IntArray) -> tuple[IntArray, IntArray] | None:
    """(first, back): the first row of each distinct op (``op_row``: each row's) and each row's position in
    ``first``, where some op repeats and every array of ``batch`` (and its notes) holds the same bits on the rows
    of one op; else None."""
    _, first, back = np.unique(op_row, return_index=True, return_inverse=True)
    if first.size == len(op_row):
        return None
    back = back.reshape(-1)
    source = first[back]  # per row, the row it would be taken from
    moved = np.flatnonzero(source != np.arange(len(op_row)))  # the rows taken from another (the others: themselves)
    arrays = [batch.time_s, batch.bound.codes, batch.overhead_s, batch.compulsory_bytes, batch.utilization,
              *(a for group in (batch.flops_by_engine, batch.bytes_by_level, batch.time_s_by_level,
                                batch.time_s_by_engine, batch.schedule) for a in group.values()),
              *(a for a in (batch.interval_s, batch.in_calibrated_range, batch.uncalibrated_interval_s)
                if a is not None)]
    for values in arrays:
        whole = np.ascontiguousarray(values)
        if whole.dtype.hasobject or len(whole) != len(op_row):
            return None
        if not np.array_equal(whole[source[moved]].view(np.uint8), whole[moved].view(np.uint8)):
            return None
    if batch.notes:
        noted = np.zeros(len(op_row), dtype=bool)
        noted[list(batch.notes)] = True
        if not np.array_equal(noted[source], noted) or any(
                batch.notes[int(source[i])] != texts for i, texts in batch.notes.items()):
            return None
    return first, back


def _apply(calibration: Calibration, batch: CostBatch, distinct: list[Op], op_row: IntArray,
           groups: list[Group] | None = None) -> CostBatch:
    """``apply_calibration`` of ``batch``, whose row i holds the op ``distinct[op_row[i]]`` (``groups``:
    ``by_type(distinct)`` where the caller has it)."""
    hw = batch.hardware
    n = len(batch)
    if groups is None:
        groups = by_type(distinct)  # the readers below take the ops a class at a time
    each = len(distinct) == n and each_its_own(op_row)  # op_row is 0..n-1: no take of the per-op arrays
    numbers = shape.shape_matrix(distinct, groups)
    f = curve.features(batch, numbers if each else numbers[op_row])
    names, key_of = class_codes(distinct, devices_per_node(hw), groups)
    inverse = key_of if each else key_of[op_row]
    entries = [calibration.entry(str(k)) for k in names]
    theta = np.array([e.applied_theta for e in entries]).reshape(len(entries), curve.N_PARAMS)[inverse]
    nan2 = (math.nan, math.nan)
    interval_log = np.array([e.interval_log or nan2 for e in entries]).reshape(len(entries), 2)[inverse]
    # inside the range only where this very key was fitted here (not its class, device or another device)
    fitted = np.array([e.source == "fitted" and e.log10_bytes_range is not None and str(k) in calibration.classes
                       for k, e in zip(names, entries, strict=True)], dtype=bool)
    flops_range = np.array([e.log10_flops_range or nan2 for e in entries]).reshape(len(entries), 2)
    bytes_range = np.array([e.log10_bytes_range or nan2 for e in entries]).reshape(len(entries), 2)
    unbounded = ([-math.inf] * shape.N_SHAPE, [math.inf] * shape.N_SHAPE)
    ranges = np.array([e.shape_range or unbounded for e in entries]).reshape(len(entries), 2, -1)
    own = [str(k) in calibration.classes for k in names]  # a variant on its class's fit: the curve only
    local = local_log_factor([e.local if mine else None for e, mine in zip(entries, own, strict=True)], inverse, f,
                              op_row)
    # per class, then per row (one gather each): the shape numbers' range is their columns 2.. (views)
    low = np.column_stack([flops_range[:, 0], bytes_range[:, 0], ranges[:, 0]])[inverse]
    high = np.column_stack([flops_range[:, 1], bytes_range[:, 1], ranges[:, 1]])[inverse]
    shape_low, shape_high = low[:, 2:], high[:, 2:]
    outside = curve.beyond(f, low, high)
    unclipped = f
    if n:
        f = curve.clip_shape(f, shape_low, shape_high)
    time = curve.time_s(theta, f) * np.exp(local) if n else np.zeros(0)
    trees = calibration.residual_trees
    if trees is not None and n:  # rows of a class fitted here: averaged with the device's residual trees
        own_fit = np.array([mine and e.source == "fitted" for e, mine in zip(entries, own, strict=True)])[inverse]
        rows = np.flatnonzero(own_fit & (batch.time_s > 0) & (time > 0))
        u = unclipped.take(rows)  # all the trees read of a row, with its op's key and fields
        kept, back = once_per_op(lambda: np.column_stack([curve.range_values(u), u.compute_share, batch.time_s[rows],
                                                          time[rows]]), op_row[rows])
        rows_kept = rows[kept]
        time[rows] *= np.exp(trees.log_factor(u if kept.size == rows.size else unclipped.take(rows_kept),
                                              batch.time_s[rows_kept],
                                              list(map(batch.ops.__getitem__, rows_kept.tolist())), names.tolist(),
                                              time[rows_kept], key_index=inverse[rows_kept])[back])
    overhead = np.minimum(curve.overhead_s(theta, f), time) if n else np.zeros(0)
    in_range = fitted[inverse] & ~outside.any(axis=1)
    interval_log = distance_band(entries, own, inverse, in_range, unclipped, interval_log, op_row)
    beyond_fit = fitted[inverse] & ~in_range  # a fitted class, this op beyond its data
    beyond_log = np.array([e.beyond_log or nan2 for e in entries]).reshape(len(entries), 2)[inverse]
    wide = extrapolated(beyond_fit, outside, shape_low, shape_high)
    interval_log = np.where((wide & np.isfinite(beyond_log[:, 0]))[:, None], beyond_log, interval_log)
    model_log = np.array([e.model_log or nan2 for e in entries]).reshape(len(entries), 2)[inverse]
    interval_log = unvaried_band(beyond_fit, shape_low, shape_high, unclipped, model_log, time, batch.time_s,
                                 interval_log)
    with np.errstate(divide="ignore", invalid="ignore"):
        utilization = np.where(time > 0, batch.utilization * batch.time_s / time, 0.0)
    bound = batch.bound.copy()
    bound[(overhead >= time - overhead) & (overhead > 0) & (bound != "none")] = "latency"
    interval_log = borrowed_band(entries, inverse, f, time, batch.time_s, interval_log)
    moved = np.array([e.source == "transferred" for e in entries], dtype=bool)[inverse]
    interval_log = transfer_band(moved, batch, time, interval_log, calibration.transfer_scale,
                                 calibration.transfer_class_scales)
    interval = time[:, None] * np.exp(interval_log)
    rows = np.flatnonzero(beyond_fit)
    notes = _beyond_notes(batch, rows, outside[rows], unclipped.take(rows), low[rows], high[rows])
    return dataclasses.replace(batch, time_s=time, overhead_s=overhead, utilization=utilization, bound=bound,
                               interval_s=interval, in_calibrated_range=in_range, notes=notes,
                               uncalibrated_interval_s=None)


def distinct_ops(ops: Sequence[Op]) -> tuple[list[Op], IntArray]:
    """The distinct ops of ``ops`` (equal frozen dataclasses: one), in first-seen order, and each op's index among
    them. Hashing an op costs under a microsecond, its class key, shape numbers and fields several: a batch of
    repeated ops (a model's layers, a trace) pays those once per distinct op. Ops that do not hash: each its own.
    A taken batch's ops (``CostBatch.take``: ``predict_many`` of JSON dicts predicts each distinct dict once) are
    told apart by the rows they were taken from first, so that each of those is built and hashed once."""
    if isinstance(ops, _Rows):
        taken, back = np.unique(ops._rows, return_inverse=True)
        distinct, rows = distinct_ops([ops._ops[j] for j in taken.tolist()])
        return distinct, rows[back.reshape(-1)]
    n = len(ops)
    try:
        hashes = np.fromiter(map(hash, ops), dtype=np.int64, count=n)  # each op hashed once, in a C loop
    except TypeError:
        return list(ops), np.arange(n)
    if not hashes.size or np.diff(np.sort(hashes)).all():  # no two hashes alike: no op repeated (a sort, ~0.1 ms)
        return list(ops), np.arange(n)
    _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    shared = np.flatnonzero(counts.take(inverse.reshape(-1)) > 1)  # rows whose hash another row has too
    if not shared.size:  # equal ops hash alike: no op repeated
        return list(ops), np.arange(n)
    same = np.arange(n)  # per row, the first row holding an equal op (told apart as a dict does: hash, then ==)
    first: dict[Op, int] = {}
    for i in shared.tolist():
        same[i] = first.setdefault(ops[i], i)
    leads = same == np.arange(n)
    return list(map(ops.__getitem__, np.flatnonzero(leads).tolist())), (np.cumsum(leads) - 1)[same]


def _beyond_notes(batch: CostBatch, rows: IntArray, outside: np.ndarray[Any, np.dtype[np.bool_]],
                  f: curve.Features, low: FloatArray, high: FloatArray) -> dict[int, list[str]]:
    """``batch.notes`` plus, per row of ``rows`` (a fitted class beyond its fitted data), what lies outside:
    ``outside``, ``f`` (unclipped), ``low`` and ``high`` per row of ``rows``, columns as ``curve.beyond``'s."""
    if not rows.size:
        return batch.notes
    where = np.nonzero(outside)
    values = curve.range_values(f)[where].tolist()  # Python floats: formatted as the float64s are, ~3x faster
    parts: dict[int, list[str]] = {}
    for i, j, value, lo, hi in zip(rows[where[0]].tolist(), where[1].tolist(), values, low[where].tolist(),
                                   high[where].tolist(), strict=True):
        if j == 0 and not math.isfinite(lo):  # the class's fitted runs do no FLOPs (copies, fills)
            what = f"log10 FLOPs {value:.2f} (the fitted runs do no FLOPs)"
        elif j < 2:
            what = f"{('log10 FLOPs', 'log10 bytes')[j]} {value:.2f} (fitted {lo:.2f}-{hi:.2f})"
        else:
            name = shape.FAMILY_FEATURES[shape.family(batch.ops[i])][j - 2] or f"shape_{j - 2}"
            what = f"{name} {value:.3g} (fitted {lo:.3g}-{hi:.3g})"
        parts.setdefault(i, []).append(what)
    notes = dict(batch.notes)  # the lists are replaced, never appended to: ``batch`` keeps its own
    for i, what_lies_outside in parts.items():
        notes[i] = [*notes.get(i, []), BEYOND_NOTE + ", ".join(what_lies_outside) + BEYOND_TAIL]
    return notes


def predict_calibrated(hardware: HardwareLike, ops: Iterable[OpLike], calibration: Calibration,
                       **kw: Any) -> CostBatch:
    """``predict_many`` (with the calibration's timing and GEMM space unless given) then ``apply_calibration``; an
    ``Op`` repeated in ``ops`` (``distinct_ops``) predicted and calibrated once, then taken (as repeated dicts), where
    ``op_groups.probably_distinct`` finds repeats; else every row as its own op (a row's answer depends on its op and
    its model row only, so a few repeats the sample misses cost their rows, not other answers; hashing 10k ops and
    taking the batch cost more: docs/accuracy.md, thirteenth pass calfit18)."""
    hw: Hardware = resolve_hardware(hardware)
    kw.setdefault("timing", calibration.timing)
    kw.setdefault("space", calibration.space)
    given = ops if isinstance(ops, list) else list(ops)
    if not given or not all(issubclass(kind, Op) for kind in set(map(type, given))):  # a type test per class
        return apply_calibration(calibration, predict_many(hw, given, **kw))
    built: list[Op] = given  # type: ignore[assignment]
    if probably_distinct(built):  # every row calibrated as its own op: no hashing, no take
        groups = by_type(built)
        batch = predict_built(hw, built, groups=groups, **kw)
        _check_hardware(calibration, batch)
        return _apply(calibration, batch, built, np.arange(len(built)), groups)
    distinct, op_row = distinct_ops(built)
    # the model's own interval is replaced by the calibrated one: not computed (``transfer_band`` takes it for the
    # rows it needs)
    groups = by_type(distinct)  # the ops grouped by class once, for the model's Work and the calibration's readers
    batch = predict_built(hw, distinct, groups=groups, **kw)
    _check_hardware(calibration, batch)
    if len(distinct) == len(given):
        return _apply_distinct(calibration, batch, distinct, op_row, groups)
    return _apply(calibration, batch, distinct, np.arange(len(distinct)), groups).take(op_row)


def _space(value: Any) -> SpaceName:
    if value not in ("compact", "full"):
        raise ValueError(f"calibration space {value!r}: expected compact or full")
    return "full" if value == "full" else "compact"


def _shape_range(value: Any) -> tuple[list[float], list[float]] | None:
    """Per shape number, the lowest and highest fitted; a calibration stored with fewer shape numbers (before the
    last were added) saw 0 for the missing ones, so its range for them is [0, 0]."""
    if value is None:
        return None
    low, high = value
    if not 0 < len(low) <= shape.N_SHAPE or len(high) != len(low):
        raise ValueError(f"calibration shape_range: expected two lists of {shape.N_SHAPE} numbers")
    missing = [0.0] * (shape.N_SHAPE - len(low))
    return [float(v) for v in low] + missing, [float(v) for v in high] + missing


def _weight(value: Any) -> float:
    try:
        weight = float(value)
    except (TypeError, ValueError):
        weight = math.nan
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"calibration class weight {value!r}: expected a number from 0 to 1")
    return weight


def _pair(value: Range | None) -> list[float] | None:
    return None if value is None else [float(value[0]), float(value[1])]


def _range(value: Any) -> Range | None:
    if value is None:
        return None
    lo, hi = value
    return float(lo), float(hi)


def _json_safe(value: Any) -> Any:
    """nan/inf -> None, tuples -> lists, numpy scalars -> Python (strict JSON)."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
