"""Where the scoreboard's first-runs line (A100 -> A40 + the A40's first 10 runs) loses coverage: the op mix its draws
measure against the mix of the rows it scores, and the transferred band's width against the op's time.

Until calib17 the line drew 10 *distinct ops* uniformly from the A40's fit rows (``scoreboard.first_distinct``) and
scored every held-out *row*. An op measured many times (Vidur's rmsnorm: 9-18 runs per op, the other classes 1-2) then
weighed its runs in the score but once in the draw; the line now draws by run (``scoreboard.first_runs``). This prints,
for the default and the swapped halves:

- the mix by label: distinct ops and runs of the pool the first runs come from, runs of the scored rows;
- coverage per row and per distinct op (each op's rows averaged) under the line's draw (10 distinct ops, each taken
  with probability proportional to its runs: the first runs of a trace, where an op run often is met early) and under
  the uniform draw of distinct ops used before;
- both with the transferred band's width profiled by the op's model time (``spread_profile``, off in the product):
  per band class, on the *source* device's own runs, the 0.8 quantile of the normalised score |log(t_meas / t_model)
  - c| / h in each quartile of log model time, relative to the class's; the target's scores are divided by it and
  the band's half-width multiplied by it (a normalised conformal score, Lei et al. 2018 section 5.2, with the spread
  read off the calibrating device's runs, never the scored ones);
- both with a class that has no run on the target given the rest group's scale times its score level relative to
  the rest group's classes on the source's own runs (``level_rule``, off in the product).

    python benchmarks/first_runs_draws.py [--swap] [--draws 100]     # ~1 min CPU a split
    python benchmarks/first_runs_draws.py --transfers   # the leave-one-device-out transfers' first-runs table, today
                                                        # and with ``level_rule`` (~15 min CPU: 32 draws)
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measured_data import Row, all_rows
from scoreboard import FIRST_RUNS, draw_error, first_distinct, first_runs, fit_mask

import perfmodel
from perfmodel import uncalibrated_interval
from perfmodel.calibration import build, fit_calibration, predict_calibrated, target_band
from perfmodel.ops import make_op
from perfmodel.ops.base import FloatArray, Op

SOURCE, TARGET = "nvidia-a100-sxm4-80gb", "nvidia-a40"
BINS = 4  # quartiles of a class's log model time on the source
MIN_PROFILE_RUNS = 40  # a class with fewer source runs keeps its band's width (10 a bin)
Profile = dict[str, tuple[list[float], list[float]]]  # band class -> (log10 model s knots, relative spread)


def spread_profile(ops: Sequence[Op], model_s: FloatArray, measured: FloatArray, bins: int = BINS,
                   min_runs: int = MIN_PROFILE_RUNS) -> Profile:
    """Per band class with ``min_runs`` runs: knots (each quantile bin's median log10 model time) and the 0.8
    quantile of its runs' normalised scores in that bin over the class's own (1: as wide as the class)."""
    keys = np.array([uncalibrated_interval.band_key(op) for op in ops])
    band = np.log(uncalibrated_interval.interval_s(ops, model_s) / model_s[:, None])
    centre, half = band.mean(axis=1), (band[:, 1] - band[:, 0]) / 2.0
    score = np.abs(np.log(measured / model_s) - centre) / half
    log_t = np.log10(model_s)
    out: Profile = {}
    for key in sorted(set(keys.tolist())):
        mine = keys == key
        if mine.sum() < min_runs:
            continue
        edges = np.quantile(log_t[mine], np.linspace(0.0, 1.0, bins + 1))
        which = np.clip(np.searchsorted(edges, log_t[mine], side="right") - 1, 0, bins - 1)
        whole = float(np.quantile(score[mine], 0.8))
        out[str(key)] = ([float(np.median(log_t[mine][which == b])) for b in range(bins)],
                         [float(np.quantile(score[mine][which == b], 0.8)) / whole for b in range(bins)])
    return out


def spread(profile: Profile, ops: Sequence[Op], model_s: FloatArray) -> FloatArray:
    """Each op's relative spread: its class's profile at its log10 model time (flat beyond the end knots; 1 for a
    class without a profile)."""
    out: FloatArray = np.ones(len(ops))
    for i, (op, t) in enumerate(zip(ops, model_s, strict=True)):
        knots = profile.get(uncalibrated_interval.band_key(op))
        if knots is not None:
            out[i] = float(np.interp(np.log10(t), knots[0], knots[1]))
    return out


@contextlib.contextmanager
def profiled(profile: Profile) -> Iterator[None]:
    """``target_band`` (the target's scores and the transferred band) sees each op's band widened about its centre
    by its ``spread``: the normalised score's denominator and the band's half-width alike."""
    def interval_s(ops: Sequence[Op], time_s: FloatArray, bands: Any = None) -> FloatArray:
        band = uncalibrated_interval.interval_s(ops, time_s, bands)
        t = np.asarray(time_s, dtype=float)
        return t[:, None] * np.exp(target_band.scaled(np.log(band / t[:, None]), spread(profile, ops, t)))
    kept = getattr(target_band, "uncalibrated_interval")  # noqa: B009 (not exported: target_band imports it)
    setattr(target_band, "uncalibrated_interval",  # noqa: B010
            types.SimpleNamespace(interval_s=interval_s, band_key=uncalibrated_interval.band_key))
    try:
        yield
    finally:
        setattr(target_band, "uncalibrated_interval", kept)  # noqa: B010


def source_scores(ops: Sequence[Op], model_s: FloatArray, measured: FloatArray) -> tuple[FloatArray, list[str]]:
    """The source device's own normalised scores against the (dev set's) transferred band, one per distinct op
    (``target_band.scores``), and each score's band class."""
    keys = [uncalibrated_interval.band_key(op) for op in ops]
    band = np.log(uncalibrated_interval.interval_s(ops, model_s) / model_s[:, None])
    _, op_id = np.unique([repr(op) for op in ops], return_inverse=True)
    op_id = op_id.reshape(-1)
    score = target_band.scores(np.log(measured / model_s), band, op_id)
    key_of = dict(zip(op_id.tolist(), keys, strict=True))
    return score, [key_of[j] for j in range(score.size)]


def level_rule(score: FloatArray, keys: Sequence[str],
               own_rest: bool = False) -> Callable[..., tuple[float | None, dict[str, float]]]:
    """``target_band.target_scales`` with each band class that has no run on the target (and ≥ 4 ops on the source)
    given the rest group's scale times its score level relative to the rest group's classes, both read on the
    source's runs (0.8 quantiles of ``source_scores``): a class the source found harder than the ones measured here
    gets a wider band than theirs, an easier one a narrower (calib15's rule kept the dev set's band instead).
    ``own_rest``: only where the scale is the rest group's own (a class has its own scale and the other classes'
    ops are ≥ 4), not the device-wide one, so the ratio is read against the group the scale was read on."""
    classes = np.array(keys)

    def level(chosen: set[str]) -> float | None:
        mine = score[np.isin(classes, sorted(chosen))]
        return float(np.quantile(mine, 0.8)) if mine.size >= target_band.MIN_TARGET_OPS else None

    def rule(ops: Sequence[Op], model_s: FloatArray, measured: FloatArray,
             groups: Any) -> tuple[float | None, dict[str, float]]:
        scale, per_class = target_band.target_scales(ops, model_s, measured, groups)
        band_keys = np.array([uncalibrated_interval.band_key(op) for op in ops])
        here = set(band_keys.tolist())
        rest = level(here - set(per_class) or here)
        rest_ops = np.unique(np.asarray(groups)[~np.isin(band_keys, list(per_class))]).size
        if scale is None or rest is None or (own_rest and (not per_class or rest_ops < target_band.MIN_TARGET_OPS)):
            return scale, per_class
        out = dict(per_class)
        for key in sorted(set(keys) - here):
            found = level({key})
            if found is not None:
                out[key] = scale * found / rest
        return scale, out
    return rule


@contextlib.contextmanager
def _rule(rule: Callable[..., tuple[float | None, dict[str, float]]]) -> Iterator[None]:
    setattr(build, "target_scales", rule)  # noqa: B010 (build imports it by name)
    try:
        yield
    finally:
        setattr(build, "target_scales", target_band.target_scales)  # noqa: B010


def _mix(rows: Sequence[Row]) -> dict[str, tuple[int, int]]:
    labels = sorted({r.label for r in rows})
    return {label: (len({repr(r.op) for r in rows if r.label == label}), sum(r.label == label for r in rows))
            for label in labels}


def transfers() -> None:
    """``transfer_weight.py``'s first-runs table (8 transfers, k = 5 / 10 / 20, band table rebuilt without the
    target) with today's scales and with ``level_rule`` (the source's levels read against that same table)."""
    import transfer_weight
    from transfer_runs import first_runs as transfer_first_runs
    from transfer_runs import print_first_runs

    rows = all_rows()
    mask = fit_mask(rows)
    bands_without = transfer_weight.lodo_bands_without()
    sources = {(d, s): transfer_weight.source_calibration(rows, mask, d, s) for d, s, _ in transfer_weight.TRANSFERS}
    shipped = uncalibrated_interval.load_bands
    results: dict[str, list[Any]] = {"today": [], "level_rule": [], "level_rule own rest": []}
    for transfer in transfer_weight.TRANSFERS:
        dataset, source, target = transfer
        own = [r for r, m in zip(rows, mask, strict=True)
               if m and r.dataset == dataset and r.hardware == source and r.timing == "kernel"]
        table = bands_without(target)
        setattr(uncalibrated_interval, "load_bands", lambda path=None, table=table: table)  # noqa: B010
        try:
            model_s = perfmodel.predict_many(source, [r.op for r in own], timing="kernel", space="compact").time_s
            levels = source_scores([make_op(r.op) for r in own], model_s, np.array([r.measured_s for r in own]))
            rules = {"level_rule": level_rule(*levels), "level_rule own rest": level_rule(*levels, own_rest=True)}
        finally:
            setattr(uncalibrated_interval, "load_bands", shipped)  # noqa: B010
        for name in results:
            with _rule(rules[name]) if name in rules else contextlib.nullcontext():
                results[name] += transfer_first_runs(rows, mask, bands_without, sources, [transfer], ks=(5, 10, 20))
    for name, found in results.items():
        print(name)
        print_first_runs(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--swap", action="store_true")
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--transfers", action="store_true")
    args = parser.parse_args()
    if args.transfers:
        transfers()
        return
    rows = all_rows()
    mask = fit_mask(rows) != args.swap
    src = [r for r, m in zip(rows, mask, strict=True)
           if m and r.dataset == "vidur" and r.hardware == SOURCE and r.timing == "kernel"]
    mine = [(r, m) for r, m in zip(rows, mask, strict=True)
            if r.dataset == "vidur" and r.hardware == TARGET and r.timing == "kernel"]
    fit, test = [r for r, m in mine if m], [r for r, m in mine if not m]
    split = "swapped" if args.swap else "default"
    print(f"{split} split, {args.draws} draws of {FIRST_RUNS} first runs; by label (distinct ops / runs):")
    pool, scored = _mix(fit), _mix(test)
    for label in sorted({*pool, *scored}):
        print(f"  {label:<12} pool {pool.get(label, (0, 0))[0]:>4} / {pool.get(label, (0, 0))[1]:>4}, "
              f"scored {scored.get(label, (0, 0))[0]:>4} / {scored.get(label, (0, 0))[1]:>4}")
    source = fit_calibration(SOURCE, [(r.op, r.measured_s) for r in src])
    src_ops = [make_op(r.op) for r in src]
    src_model = perfmodel.predict_many(SOURCE, [r.op for r in src], timing="kernel", space="compact").time_s
    profile = spread_profile(src_ops, src_model, np.array([r.measured_s for r in src]))
    print("spread profile on the source's runs (log10 model s: relative 0.8 quantile): " + "; ".join(
        f"{k} " + ", ".join(f"{a:.2f}: {b:.2f}" for a, b in zip(*v, strict=True)) for k, v in profile.items()))
    levels = source_scores(src_ops, src_model, np.array([r.measured_s for r in src]))
    unmeasured, own_rest = level_rule(*levels), level_rule(*levels, own_rest=True)
    measured = np.array([r.measured_s for r in test])
    labels = np.array([r.label for r in test])
    _, op_of = np.unique([repr(r.op) for r in test], return_inverse=True)
    per_op = 1.0 / np.bincount(op_of.reshape(-1))[op_of.reshape(-1)]
    for draw_name, draw in (("by run (the line)", first_runs), ("distinct ops (before)", first_distinct)):
        for rule, context in (("today's band", contextlib.nullcontext()), ("spread profiled", profiled(profile)),
                              ("unmeasured: level", _rule(unmeasured)),
                              ("level, own rest", _rule(own_rest))):
            inside_rows: list[float] = []
            inside_ops: list[float] = []
            by_label: dict[str, list[float]] = {str(k): [] for k in sorted(set(labels.tolist()))}
            with context:
                for seed in range(args.draws):
                    first = draw(fit, FIRST_RUNS, seed)
                    cal = fit_calibration(TARGET, [(r.op, r.measured_s) for r in first], base=source)
                    batch = predict_calibrated(TARGET, [r.op for r in test], cal)
                    assert batch.interval_s is not None
                    inside = (measured >= batch.interval_s[:, 0]) & (measured <= batch.interval_s[:, 1])
                    inside_rows.append(float(inside.mean()))
                    inside_ops.append(float((inside * per_op).sum() / per_op.sum()))
                    for label, values in by_label.items():
                        values.append(float(inside[labels == label].mean()))
            print(f"  draw {draw_name:<21} {rule:<16}: per row {np.mean(inside_rows):.3f} ± "
                  f"{draw_error(inside_rows):.3f}, per distinct op {np.mean(inside_ops):.3f}; by label "
                  + ", ".join(f"{k} {np.mean(v):.2f}" for k, v in by_label.items()), flush=True)


if __name__ == "__main__":
    main()
