"""``fit_calibration``: fit every op class of one device, with fallbacks and transfer, and report it.

Keys are ``class[/variant]:dtype`` (``norm/rmsnorm:fp16``; a variant's runs also count for its
class ``norm:fp16``). For each key with at least ``min_runs`` usable runs: its own fit
(``fitted``). With fewer: the key's parameters from ``base`` when it has them (``transferred``
from a related device, or kept from an earlier calibration of this device), else its class's
fit (``class``), else the fit pooled over every run of the device (``hardware``), else a
transferred pooled fit, else the model (``defaults``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

import perfmodel.calibration.distance as dist_mod
from perfmodel.calibration import curve
from perfmodel.calibration.bands import (
    MIN_CONFORMAL_RUNS,
    MIN_IN_RANGE_RUNS,
    band_ratio,
    beyond_band,
    beyond_factor,
    class_interval,
    conformal_band,
    in_range_residuals,
    quantile_band,
)
from perfmodel.calibration.boost import FOLDS as TREE_FOLDS
from perfmodel.calibration.boost import ResidualTrees, fit_residual_trees
from perfmodel.calibration.classes import class_keys, parent_key, related, single_node_key
from perfmodel.calibration.distance import (
    RHO_RANGE,
    DistanceScale,
    coordinates,
    fitted_points,
    held_out_distances,
    spread_exponent,
)
from perfmodel.calibration.fit import FitResult, abs_pct, fit_with_cv, fold_ids
from perfmodel.calibration.local import LocalCorrection, fit_local
from perfmodel.calibration.model import DEFAULTS, Calibration, ClassParams, Range, borrowed, transferred
from perfmodel.calibration.target_band import target_scales
from perfmodel.collectives import devices_per_node
from perfmodel.hardware import Hardware
from perfmodel.ops import Op, make_op
from perfmodel.ops.base import FloatArray, IntArray
from perfmodel.roofline import HardwareLike, SpaceName, Timing, predict_many, resolve_hardware

MIN_RUNS = 6  # fewer runs than this in a class: fall back (a 9-parameter curve needs a few points)
Progress = Callable[[str, float], None]
# (stage, fraction of the whole fit when the stage starts): ``progress`` is called with these names
STAGES = {"model": 0.0, "hardware": 0.05, "classes": 0.15, "trees": 0.55, "done": 1.0}


def fit_calibration(hardware: HardwareLike, runs: Sequence[tuple[dict[str, Any] | Op, float]], *, folds: int = 5,
                    seed: int = 0, base: Calibration | None = None, timing: Timing = "kernel",
                    min_runs: int = MIN_RUNS, space: SpaceName = "compact",
                    local_correction: bool = True, residual_trees: bool = True,
                    progress: Progress | None = None) -> Calibration:
    """Fit a calibration of ``hardware`` to ``runs`` (op, measured seconds).

    ``folds``: k of the k-fold cross-validation (identical ops stay in one fold); ``seed`` shuffles
    the folds. ``base``: a calibration of this device or of a related one (same vendor and kind)
    whose classes seed those without enough runs here, and whose parameters are the prior of
    those with runs. ``timing``: what the runs measured (``kernel`` device time or ``host`` wall
    clock around one op), as in ``predict_many``. ``space``: the GEMM schedule space the model
    predicts with (``predict_many``'s); the calibration corrects that model and remembers it.
    ``local_correction``: smooth each fitted class's residuals over its measured shapes (``local``).
    ``residual_trees``: try the device's boosted trees over every fitted class (``boost``), kept if CV says so.
    ``progress``: called as ``progress(stage, fraction)`` (fraction of the whole fit done, 0..1, never
    decreasing) at each stage and inside its loops, a few hundred calls at most. Stages (``STAGES``): ``model``
    (the uncalibrated predictions), ``hardware`` (the pooled fit), ``classes`` (once per class key fitted),
    ``trees`` (the residual trees: every ``trees.PROGRESS_ROUNDS`` boosting rounds of each fold), ``done`` (1.0).
    """
    report_progress = _reporter(progress)
    report_progress("model", 0.0)
    hw = resolve_hardware(hardware)
    identity = {"id": hw.id, "vendor": hw.vendor, "kind": hw.kind}
    foreign = base is not None and base.hardware_id != hw.id
    if base is not None and foreign and not related(base.hardware, hw):
        raise ValueError(f"base calibration of {base.hardware_id!r} ({base.hardware.get('vendor')} "
                         f"{base.hardware.get('kind')}) cannot seed {hw.id!r} ({hw.vendor} {hw.kind}): "
                         "transfer needs the same vendor and kind")
    ops = _ops(op for op, _ in runs)
    measured = np.array([float(t) for _, t in runs], dtype=float)
    bad = np.flatnonzero(~np.isfinite(measured) | (measured <= 0))
    if bad.size:
        raise ValueError(f"runs[{int(bad[0])}]: measured_time_s must be a positive finite number, "
                         f"got {measured[bad[0]]!r}")
    if ops:
        f, model_s = _model_features(hw, ops, timing, space)
    else:
        f, model_s = None, np.zeros(0)
    usable = model_s > 0  # an op the model calls free (a view) has nothing to scale
    keys = np.array(class_keys(ops, devices_per_node(hw)), dtype=str)
    names: dict[int, str] = {}  # repeats of one run's op are one object (``_ops``): its repr once
    groups = _distinct_ids([names.setdefault(id(op), repr(op)) for op in ops])

    pooled_idx = np.flatnonzero(usable)
    pooled: FitResult | None = None
    report_progress("hardware", STAGES["hardware"])
    if pooled_idx.size >= min_runs and f is not None:
        prior = (_belief(base.hardware_level, foreign) if base is not None and base.hardware_level.source != "defaults"
                 else None)
        pooled = fit_with_cv(f.take(pooled_idx), measured[pooled_idx], groups[pooled_idx], folds, seed, prior)
        hardware_level = ClassParams("fitted", pooled.theta, int(pooled_idx.size), class_interval(pooled),
                                     *_ranges(f.take(pooled_idx)), shape_range=curve.shape_range(f.take(pooled_idx)))
    elif base is not None and base.hardware_level.source != "defaults":
        hardware_level = _carried(base.hardware_level, base, foreign)
    else:
        hardware_level = DEFAULTS
    pooled_cv = np.full(len(ops), np.nan)
    if pooled is not None and pooled.cv_residuals is not None:
        pooled_cv[pooled_idx] = pooled.cv_residuals

    classes: dict[str, ClassParams] = {}
    rows: dict[str, dict[str, Any]] = {}
    results: dict[str, FitResult] = {}  # each fitted class's own fit (the beyond band's factor)
    held_out = np.full(len(ops), np.nan)  # per run of a fitted class: out-of-fold log residual (``_out_of_fold``)
    held_beyond = np.zeros(len(ops), dtype=bool)  # per run: held out beyond its fold's fitted data (``fit.outside``)
    members_of: dict[str, tuple[IntArray, FloatArray]] = {}  # fitted class: its runs, their held-out distances
    tree_fold = fold_ids(groups, TREE_FOLDS, seed)  # the residual trees' folds (over distinct ops)
    few_held_out: list[str] = []  # fitted classes with too few held-out runs for a band of their own
    parent_of = np.array([parent_key(k) or "" for k in keys.tolist()], dtype=str)
    parents = sorted(set(parent_of.tolist()) - {""})
    pooled_into = _few_multinode_runs(keys, usable, min_runs)
    order = parents + sorted(set(keys.tolist()))
    for n_done, key in enumerate(order):  # parents first: their variants fall back to them
        report_progress("classes", STAGES["classes"] + (STAGES["trees"] - STAGES["classes"]) * n_done / len(order))
        members = (keys == key) | (parent_of == key) | np.isin(keys, [m for m, s in pooled_into.items() if s == key])
        idx = np.flatnonzero(members & usable)
        seeded = base.classes.get(key) if base is not None else None
        if seeded is not None and seeded.source not in ("fitted", "transferred"):
            seeded = None
        parent = classes.get(parent_key(key) or "")
        result: FitResult | None = None
        if key in pooled_into:  # too few runs across nodes: fitted with the single-node class (sorted first)
            shared = classes[pooled_into[key]]
            entry = dataclasses.replace(shared, source="class" if shared.source == "fitted" else shared.source,
                                        runs=int(idx.size))
        elif idx.size >= min_runs and f is not None:
            prior = _belief(seeded, foreign) if seeded is not None else (
                parent.theta if parent is not None and parent.source == "fitted" else None)
            result = fit_with_cv(f.take(idx), measured[idx], groups[idx], folds, seed, prior)
            results[key] = result
            local = (fit_local(f.take(idx), result.residuals, groups[idx], tree_fold[idx]) if local_correction
                     else None)
            out_of_fold = _out_of_fold(result, local)
            held_out[idx] = out_of_fold  # variants come later: their own fit overwrites theirs
            beyond_run = result.cv_outside if result.cv_outside is not None else np.zeros(idx.size, dtype=bool)
            held_beyond[idx] = beyond_run
            members_of[key] = (idx, held_out_distances(coordinates(f.take(idx)), result.cv_fold)
                               if result.cv_fold is not None else np.full(idx.size, np.nan))
            interval = class_interval(result, in_range_residuals(out_of_fold, beyond_run))
            if np.isfinite(out_of_fold).sum() < MIN_CONFORMAL_RUNS:
                few_held_out.append(key)
            entry = ClassParams("fitted", result.theta, int(idx.size), interval, *_ranges(f.take(idx)),
                                shape_range=curve.shape_range(f.take(idx)), local=local,
                                model_log=conformal_band(np.log(measured[idx] / model_s[idx])))
        elif seeded is not None and base is not None:
            entry = _carried(seeded, base, foreign)
        elif parent is not None and parent.source in ("fitted", "transferred"):
            entry = ClassParams("class" if parent.source == "fitted" else "transferred", parent.theta,
                                int(idx.size), parent.interval_log, transferred_from=parent.transferred_from,
                                shape_range=parent.shape_range, weight=borrowed(parent).weight)
        elif hardware_level.source in ("fitted", "transferred"):
            entry = ClassParams("hardware" if hardware_level.source == "fitted" else "transferred",
                                hardware_level.theta, int(idx.size), hardware_level.interval_log,
                                transferred_from=hardware_level.transferred_from,
                                shape_range=hardware_level.shape_range, weight=borrowed(hardware_level).weight)
        else:
            entry = ClassParams("defaults", curve.IDENTITY, int(idx.size),
                                quantile_band(np.log(measured[idx] / model_s[idx])))
        classes[key] = entry
        cv = result.cv_residuals if result is not None else (pooled_cv[idx] if entry.source == "hardware" else None)
        rows[key] = _class_report(key, entry, f.take(idx) if f is not None and idx.size else None, measured[idx],
                                  model_s[idx], cv, int(members.sum()) - int(idx.size),
                                  result.folds if result else 0, result.form if result else None)
    trees, trees_report = None, None
    if residual_trees and f is not None:
        report_progress("trees", STAGES["trees"])
        own = np.isin(keys, list(results))  # trees only for runs of a class fitted here (not borrowing its fit)
        trees, trees_report, with_trees = _residual_trees(f, model_s, ops, keys, measured, groups, tree_fold,
                                                          np.where(own, held_out, np.nan), seed, report_progress)
        if trees is not None:  # the bands are of the predictions made: the trees averaged in
            _rebanded(classes, rows, keys, with_trees, held_beyond)
            held_out = np.where(np.isfinite(with_trees), with_trees, held_out)
    pooled_band = conformal_band(held_out[np.isin(keys, list(results))])
    if f is not None:
        _distance_bands(classes, rows, members_of, held_out, held_beyond, f, set(few_held_out), seed,
                        {k: r.residuals for k, r in results.items()})
    for key in few_held_out:  # the device's pooled held-out runs, over every class fitted here
        if pooled_band is not None:
            classes[key] = dataclasses.replace(classes[key], interval_log=pooled_band)
            rows[key]["interval_ratio"] = band_ratio(pooled_band)
    factor, beyond_runs = beyond_factor(list(results.values()))
    if factor is not None:
        for key, result in results.items():
            classes[key] = dataclasses.replace(classes[key], beyond_log=beyond_band(result, classes[key].interval_log,
                                                                                      factor))
            rows[key]["beyond_ratio"] = band_ratio(classes[key].beyond_log)
    if base is not None:
        for key, seeded in base.classes.items():
            if key not in classes and seeded.source in ("fitted", "transferred"):
                classes[key] = _carried(seeded, base, foreign)
                rows[key] = _class_report(key, classes[key], None, np.zeros(0), np.zeros(0), None, 0, 0, None)

    scale, class_scales = _transfer_scale(ops, model_s, measured, groups, base, foreign, classes)
    level_report = _class_report("*", hardware_level, f.take(pooled_idx) if pooled is not None and f else None,
                                 measured[pooled_idx], model_s[pooled_idx],
                                 pooled.cv_residuals if pooled else None, 0, pooled.folds if pooled else 0,
                                 pooled.form if pooled else None)
    report = {"hardware_id": hw.id, "timing": timing, "runs": len(ops), "usable_runs": int(usable.sum()),
              "min_runs": min_runs, "folds": folds, "seed": seed,
              "cv": "k-fold over distinct ops (repeats of one op share a fold)",
              "base": base.hardware_id if base is not None else None,
              "hardware_level": level_report, "classes": rows,
              "beyond": {"factor": factor, "held_out_runs": beyond_runs,
                         "rule": "an op beyond the fitted data (size or a shape number outside its fitted range) "
                                 "gets its class's cross-validated band times this factor: the 80th percentile, "
                                 "over the device's runs held out beyond their fold's fitted data, of how far "
                                 "past their class's band they fell"},
              "other_classes": hardware_level.source, "residual_trees": trees_report,
              "transfer_scale": {"scale": scale, "rule": "transferred classes' band (the uncalibrated model's, "
                                 "about its centre) times this device's runs' normalised scores read at the "
                                 "conformal position 0.8 (k + 1) (target_band); none: fewer than 4 distinct ops "
                                 "measured here",
                                 "classes": class_scales,
                                 "class_rule": "a band class with >= 4 distinct ops measured here: the same rank "
                                               "of its own scores; the others the device-wide scale"}}
    report_progress("done", 1.0)
    return Calibration(identity, classes, hardware_level, report, timing=timing, space=space, residual_trees=trees,
                       transfer_scale=scale, transfer_class_scales=class_scales)


PREDICT_CHUNK_OPS = 16384  # ops predicted at once: a whole batch's breakdown of 100,000 ops peaked at +460 MB


def _model_features(hw: Hardware, ops: Sequence[Op], timing: Timing, space: SpaceName) -> tuple[curve.Features,
                                                                                                 FloatArray]:
    """The form's inputs and the model's seconds per op, predicted ``PREDICT_CHUNK_OPS`` ops at a time (each op's
    prediction is its own: the same numbers as one batch, without every op's breakdown held at once)."""
    parts = []
    for start in range(0, len(ops), PREDICT_CHUNK_OPS):
        batch = predict_many(hw, list(ops[start:start + PREDICT_CHUNK_OPS]), timing=timing, space=space)
        parts.append((curve.features(batch), batch.time_s))
        del batch
    if len(parts) == 1:
        return parts[0]
    names = list(curve.Features.__dataclass_fields__)
    f = curve.Features(*(np.concatenate([getattr(p[0], name) for p in parts]) for name in names))
    return f, np.concatenate([p[1] for p in parts])


def _ops(given: Iterable[dict[str, Any] | Op]) -> list[Op]:
    """``make_op`` of each run's op, built once per distinct op dict (a trace's runs repeat their ops: 5,000 Vidur
    runs hold 2,467 distinct ones); repeats share one ``Op`` object."""
    built: dict[str, Op] = {}
    out: list[Op] = []
    for op in given:
        if isinstance(op, dict):
            key = repr(op)
            if key not in built:
                built[key] = make_op(op)
            out.append(built[key])
        else:
            out.append(make_op(op))
    return out


def _distinct_ids(names: list[str]) -> IntArray:
    """Per name, the rank of its distinct value in sorted order (``np.unique``'s inverse, without a fixed-width
    string array: 100,000 op reprs of ~150 characters made a 60 MB one)."""
    rank = {name: i for i, name in enumerate(sorted(set(names)))}
    out: IntArray = np.fromiter((rank[name] for name in names), dtype=np.int64, count=len(names))
    return out


def _reporter(progress: Progress | None) -> Progress:
    """``progress`` made safe to call: a no-op when None, fractions clipped to 0..1 and never decreasing."""
    last = [0.0]

    def report(stage: str, fraction: float) -> None:
        if progress is None:
            return
        last[0] = max(last[0], min(1.0, max(0.0, float(fraction))))
        progress(stage, last[0])
    return report


def _residual_trees(f: curve.Features, model_s: FloatArray, ops: Sequence[Op],
                    keys: np.ndarray[Any, np.dtype[np.str_]], measured: FloatArray, groups: IntArray,
                    fold: IntArray, held_out: FloatArray, seed: int,
                    progress: Progress) -> tuple[ResidualTrees | None, dict[str, Any], FloatArray]:
    """The device's residual trees (``boost``) on the runs whose own class was fitted here (``held_out``
    finite: each run's out-of-fold log residual of the calibration without trees), each class's share chosen
    against it; and per run its out-of-fold log residual with the trees at that share (nan: not scored)."""
    rows = np.flatnonzero(np.isfinite(held_out) & (model_s > 0))
    start, span = STAGES["trees"], 1.0 - STAGES["trees"]
    trees, report, with_trees = fit_residual_trees(
        f.take(rows), model_s[rows], [ops[int(i)] for i in rows], keys[rows].tolist(), measured[rows],
        groups[rows], held_out[rows], seed, fold=fold[rows],
        progress=lambda done: progress("trees", start + span * done))
    out = np.full(len(ops), np.nan)
    out[rows] = with_trees
    return trees, report, out


def _rebanded(classes: dict[str, ClassParams], rows: dict[str, dict[str, Any]],
              keys: np.ndarray[Any, np.dtype[np.str_]], with_trees: FloatArray,
              held_beyond: np.ndarray[Any, np.dtype[np.bool_]]) -> None:
    """Each fitted class whose runs the trees were fitted on gets the conformal band of its runs' out-of-fold
    residuals with the trees (``with_trees``; ``in_range_residuals``), where it has ``MIN_CONFORMAL_RUNS`` of them
    (in place)."""
    for key in sorted(set(keys[np.isfinite(with_trees)].tolist())):
        mine = keys == key
        held_out = in_range_residuals(with_trees[mine], held_beyond[mine])
        if key in classes and classes[key].source == "fitted" and np.isfinite(held_out).sum() >= MIN_CONFORMAL_RUNS:
            band = conformal_band(held_out)
            classes[key] = dataclasses.replace(classes[key], interval_log=band)
            rows[key]["interval_ratio"] = band_ratio(band)


def _distance_bands(classes: dict[str, ClassParams], rows: dict[str, dict[str, Any]],
                    members_of: dict[str, tuple[IntArray, FloatArray]], held_out: FloatArray,
                    held_beyond: np.ndarray[Any, np.dtype[np.bool_]], f: curve.Features, few: set[str],
                    seed: int, in_sample: dict[str, FloatArray] | None = None) -> None:
    """Each fitted class with ``MIN_CONFORMAL_RUNS`` in-range held-out runs gets a locally adaptive band
    (``distance``): the conformal band of its residuals divided by their spread ρ^p, and the scale to multiply
    it by per op (in place). p and the trusted ρ range are the device's, over every such class's runs. With
    ``distance.BRIDGE``: classes of ``MIN_IN_RANGE_RUNS`` such runs, and the band narrows below the class's own
    held-out ρ toward its in-sample residuals' (``in_sample``) at a fitted op (``DistanceScale.bridge_rho``)."""
    bridge = dist_mod.BRIDGE and in_sample is not None
    least = MIN_IN_RANGE_RUNS if bridge else MIN_CONFORMAL_RUNS
    chosen: dict[str, tuple[IntArray, FloatArray, FloatArray]] = {}
    for key, (idx, distance) in members_of.items():
        r = in_range_residuals(held_out[idx], held_beyond[idx])
        ok = np.isfinite(r) & np.isfinite(distance)
        typical = float(np.median(distance[ok])) if ok.any() else 0.0
        if key in few or int(ok.sum()) < least or typical <= 0:
            continue
        chosen[key] = (idx, np.where(ok, r, np.nan), distance / typical)
    if not chosen:
        return
    rho = np.concatenate([v[2] for v in chosen.values()])
    residual = np.concatenate([v[1] for v in chosen.values()])
    cls = np.concatenate([np.full(v[0].size, i) for i, v in enumerate(chosen.values())])
    exponent = spread_exponent(rho, residual, cls)
    usable = np.isfinite(residual) & np.isfinite(rho) & (rho > 0)
    low, high = (float(v) for v in np.quantile(rho[usable], RHO_RANGE)) if usable.any() else (1.0, 1.0)
    x = coordinates(f)
    for key, (idx, r, rho_key) in chosen.items():
        typical = float(np.median(members_of[key][1][np.isfinite(r) & np.isfinite(members_of[key][1])]))
        scale = DistanceScale(fitted_points(x[idx], seed), typical, exponent, low, high)
        if bridge and in_sample is not None and key in in_sample:
            scale = _bridged(scale, rho_key[np.isfinite(r)], r, in_sample[key])
        band = conformal_band(r / scale.spread(rho_key))
        if band is None:
            continue
        classes[key] = dataclasses.replace(classes[key], interval_log=band, distance=scale)
        rows[key]["interval_ratio"] = band_ratio(band)
        rows[key]["distance"] = {"typical": typical, "exponent": exponent, "rho_range": [low, high]}


def _bridged(scale: DistanceScale, rho: FloatArray, held_out: FloatArray, in_sample: FloatArray) -> DistanceScale:
    """``scale`` narrowing below its class's own held-out runs: ``bridge_rho`` their 10 % quantile of ρ, the nugget
    g the width of the in-sample residuals' 10-90 % band over the held-out runs' (normalised at ``bridge_rho``), at
    most 1 (``distance.BRIDGE``)."""
    rho = rho[np.isfinite(rho) & (rho > 0)]
    if not rho.size:
        return scale
    bridge_rho = float(np.quantile(rho, RHO_RANGE[0]))
    held, fitted = conformal_band(held_out / scale.spread(np.full(held_out.size, bridge_rho))), quantile_band(in_sample)
    if held is None or fitted is None or held[1] - held[0] <= 0:
        return scale
    nugget = min(1.0, max(0.0, (fitted[1] - fitted[0]) / (held[1] - held[0])))
    return dataclasses.replace(scale, bridge_rho=bridge_rho, nugget=nugget)


def _out_of_fold(result: FitResult, local: LocalCorrection | None) -> FloatArray:
    """Each run's log(t_measured / t_cal) predicted without it: the curve refitted without its fold
    (``cv_residuals``), less the local correction smoothed over the other tree folds' ops (nan: not held out)."""
    cv = result.cv_residuals if result.cv_residuals is not None else np.full(result.residuals.size, math.nan)
    if local is None or local.fold_residuals.size != cv.size:
        return cv
    out: FloatArray = cv - (result.residuals - local.fold_residuals)
    return out


def _transfer_scale(ops: Sequence[Op], model_s: FloatArray, measured: FloatArray, groups: IntArray,
                    base: Calibration | None, foreign: bool,
                    classes: dict[str, ClassParams]) -> tuple[float | None, dict[str, float]]:
    """The transferred classes' band scales (``target_band.target_scales``: device-wide, per band class) from this
    device's runs when some class is transferred; else (a refit of this device's own calibration without enough
    new runs) the base's."""
    if not any(entry.source == "transferred" for entry in classes.values()):
        return None, {}
    scale, class_scales = target_scales(ops, model_s, measured, groups) if ops else (None, {})
    if scale is None and base is not None and not foreign:
        return base.transfer_scale, dict(base.transfer_class_scales)
    return scale, class_scales


def _belief(seeded: ClassParams, foreign: bool) -> FloatArray:
    """What a base entry predicts here before any run of this device: the prior of a fit."""
    return (transferred(seeded) if foreign else seeded).applied_theta


def _few_multinode_runs(keys: np.ndarray[Any, np.dtype[np.str_]], usable: np.ndarray[Any, np.dtype[np.bool_]],
                        min_runs: int) -> dict[str, str]:
    """Multi-node collective class -> the single-node class it is fitted with, for those with fewer than
    ``min_runs`` usable runs of their own (the shape numbers, log2 devices, tell the fabrics apart)."""
    present = set(keys.tolist())
    out: dict[str, str] = {}
    for key in present:
        single = single_node_key(key)
        if single is not None and single in present and int(((keys == key) & usable).sum()) < min_runs:
            out[key] = single
    return out


def _carried(seeded: ClassParams, base: Calibration, foreign: bool) -> ClassParams:
    """A base entry: marked transferred when it comes from another device (no range: not calibrated here)."""
    if not foreign:
        return seeded
    return ClassParams("transferred", seeded.theta, 0, seeded.interval_log,
                       transferred_from=seeded.transferred_from or base.hardware_id, shape_range=seeded.shape_range,
                       weight=transferred(seeded).weight)


def _ranges(f: curve.Features) -> tuple[Range | None, Range]:
    flops = f.log10_flops[f.has_flops]
    flops_range = (float(flops.min()), float(flops.max())) if flops.size else None
    return flops_range, (float(f.log10_bytes.min()), float(f.log10_bytes.max()))


def _class_report(key: str, entry: ClassParams, f: curve.Features | None, measured: FloatArray,
                  model_s: FloatArray, cv: FloatArray | None, skipped: int, folds: int,
                  form: str | None) -> dict[str, Any]:
    name, _, dtype = key.partition(":")
    out: dict[str, Any] = {"class": name, "dtype": dtype or None, "runs": int(measured.size), "skipped_runs": skipped,
                           "source": entry.source, "transferred_from": entry.transferred_from,
                           "weight": entry.weight, "folds": folds,
                           "form": form,
                           "in_sample": None, "cv": None, "uncalibrated": None, "size_range": None,
                           "interval_ratio": band_ratio(entry.interval_log)}
    if f is not None and measured.size:
        calibrated = curve.time_s(entry.applied_theta, f)
        out["in_sample"] = abs_pct(np.log(measured / calibrated))
        out["uncalibrated"] = abs_pct(np.log(measured / model_s))
        flops_range, bytes_range = _ranges(f)
        out["size_range"] = {"log10_flops": list(flops_range) if flops_range else None,
                             "log10_bytes": list(bytes_range)}
    if cv is not None and np.isfinite(cv).any():
        out["cv"] = abs_pct(cv)
    out["local"] = None if entry.local is None else {
        "points": len(entry.local.points), "bandwidth_decades": entry.local.bandwidth,
        "shrink_runs": entry.local.shrink, "shape_scale": entry.local.shape_scale,
        "cv": abs_pct(entry.local.loo_residuals) if entry.local.loo_residuals.size else None}
    return out


__all__ = ["MIN_RUNS", "STAGES", "Progress", "fit_calibration"]
