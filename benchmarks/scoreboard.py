"""Calibration scoreboard: fit on one part of each measured data set, score on the other.

One calibration per (data set, hardware, timing) -- one measurement setup -- fitted on the
"fit" rows and scored on the "score" rows:

- Vidur (A100, A40): model families sorted by name, every other one fits, the rest score;
  collectives in it (all-reduce sizes) alternate by size.
- DeepBench (V100, P100, T4, MI25): half of the distinct shapes (crc32 of the shape, so a
  GEMM's fp32 and fp16 runs and a conv's forward and backward fall on the same side).
- Nsight Compute ReLU kernels (A100): half of the distinct element counts (crc32), so one tensor in
  two layouts falls on one side.
- LLMCompass (A100, MI210) and all-reduce sweeps: each sweep (an all-reduce: one devices x devices-per-node
  configuration) sorted by size, every other row. LLMCompass's softmax and layernorm each hold two sweeps
  of equal sizes ([4096, N] and [N, 4096]; ties keep file order), so their [4096, N] sweep is fitted and
  their [M, 4096] sweep scored: a calibration fitted on row lengths, judged on row counts.
- Transfer: the Vidur A100 calibration seeds the A40 with no A40 data, scored on the A40 rows; and again with
  the A40's first runs (``first_runs``: its fit rows in a seeded random order until ``FIRST_RUNS`` distinct ops,
  ``FIRST_DRAWS`` draws), which rescale the transferred classes' band (``calibration/target_band.py``).

  Why by run (calib17): the line estimates what a user who calibrated on their first runs sees on their *next* runs,
  and it scores runs (every held-out row, as every other line here). A split-conformal band covers 80 % of new
  draws that are exchangeable with the ones it was read on (Vovk et al. 2005; under a shift of the draws' mix,
  coverage holds only for the reweighted mix: Tibshirani et al. 2019, "Conformal prediction under covariate
  shift"). A trace's runs come in proportion to how often each op runs (Vidur's rmsnorm: two per layer, 9-18 runs
  per op here), both the first runs and the next; drawing the first runs uniformly over *distinct* ops instead
  (the line until calib17, ``first_distinct``, printed beside it) measures the band under a shift no user makes:
  the swapped half's pool holds rmsnorm as 2 % of its distinct ops but 18 % of its runs, and 20 % of the scored rows.
  The matched pair by distinct op (uniform draw, each op's rows averaged) is the other consistent estimator, for a
  user who sweeps distinct shapes and is judged per shape; ``first_runs_draws.py`` prints it.

``swap=True`` exchanges the halves (fit on the scored rows, score on the fitted ones): one split's
figures move by a few points with the half fitted, so both halves are reported (docs/accuracy.md).
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from measured_data import Row

import perfmodel
from perfmodel.calibration import Calibration, fit_calibration, predict_calibrated
from perfmodel.calibration.classes import class_key, parent_key
from perfmodel.collectives import devices_per_node
from perfmodel.ops import make_op

TARGET_MEDIAN_PCT = {"GEMM-like": 5.0, "other": 10.0}
TARGET_P90_PCT = 20.0
GEMM_LABELS = ("matmul", "conv2d", "conv2d_bwd")
NOT_SHAPE = ("dtype", "compute_dtype", "pass", "algorithm", "layout")  # a DeepBench shape's runs share its side


@dataclass(frozen=True)
class Score:
    setup: str  # data set / hardware / timing, or a transfer
    hardware: str
    label: str
    fit_rows: int
    score_rows: int
    source: str  # what the scored rows' class used
    uncal: tuple[float, float]  # median, p90 abs %
    cal: tuple[float, float]
    coverage: float  # share of scored rows inside their 10-90 % interval
    inside: np.ndarray[Any, np.dtype[np.bool_]]  # per scored row: inside its interval
    in_range: np.ndarray[Any, np.dtype[np.bool_]]  # per scored row: in_calibrated_range
    uncal_ape: np.ndarray[Any, np.dtype[np.float64]]  # per scored row, abs % error
    cal_ape: np.ndarray[Any, np.dtype[np.float64]]


def _size(op: dict[str, Any]) -> float:
    return float(np.prod([v for k, v in op.items() if isinstance(v, int) and not isinstance(v, bool)] or [0])
                 + sum(np.prod(v) for v in op.values() if isinstance(v, list)) + float(op.get("bytes", 0)))


def fit_mask(rows: Sequence[Row]) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """True for the rows a calibration is fitted on, False for those it is scored on."""
    mask = np.zeros(len(rows), dtype=bool)
    families: dict[str, list[str]] = defaultdict(list)
    sweeps: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if r.dataset == "vidur" and not r.label.startswith("allreduce"):
            families[r.hardware].append(r.group)
        elif r.dataset == "deepbench" and r.label != "allreduce":
            shape = {k: v for k, v in r.op.items() if k not in NOT_SHAPE}
            mask[i] = zlib.crc32(repr(sorted(shape.items())).encode()) % 2 == 0
        elif r.dataset == "ncu":
            mask[i] = zlib.crc32(r.group.encode()) % 2 == 0
        else:  # a sweep: one configuration (an all-reduce's devices and devices per node) over sizes
            config = f"{r.op.get('devices', '')}x{r.op.get('devices_per_node') or ''}"
            sweeps[(r.dataset, r.hardware, r.label, config)].append(i)
    fit_families = {hw: set(sorted(set(names))[0::2]) for hw, names in families.items()}
    for i, r in enumerate(rows):
        if r.dataset == "vidur" and not r.label.startswith("allreduce"):
            mask[i] = r.group in fit_families[r.hardware]
    for idx in sweeps.values():
        ordered = sorted(idx, key=lambda i: (_size(rows[i].op), i))
        mask[ordered[0::2]] = True
    return mask


def fit_families(swap: bool = False) -> dict[str, list[str]]:
    """The Vidur model families each device's calibration was fitted on (for the printout)."""
    from measured_data import vidur

    names: dict[str, set[str]] = defaultdict(set)
    for r in vidur():
        names[r.hardware].add(r.group)
    return {hw: sorted(v)[int(swap)::2] for hw, v in names.items()}


def _ape(predicted: np.ndarray[Any, Any], measured: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.float64]]:
    out: np.ndarray[Any, np.dtype[np.float64]] = np.abs(predicted / measured - 1.0) * 100.0
    return out


def _errors(ape: np.ndarray[Any, np.dtype[np.float64]]) -> tuple[float, float]:
    return float(np.median(ape)), float(np.percentile(ape, 90))


def _score(setup: str, hw: str, cal: Calibration, fit: list[Row], test: list[Row]) -> list[Score]:
    ops = [r.op for r in test]
    calibrated = predict_calibrated(hw, ops, cal)
    assert calibrated.interval_s is not None and calibrated.in_calibrated_range is not None
    raw = perfmodel.predict_many(hw, ops, timing=cal.timing, space="compact")  # type: ignore[arg-type]
    measured = np.array([r.measured_s for r in test])
    per_node = devices_per_node(perfmodel.load_hardware(hw))
    out = []
    for label in sorted({r.label for r in test}):
        sel = np.array([r.label == label for r in test])
        keys = sorted({class_key(make_op(r.op), per_node) for r, s in zip(test, sel, strict=True) if s})
        sources = sorted({_source(cal, k) for k in keys})
        inside = (measured[sel] >= calibrated.interval_s[sel, 0]) & (measured[sel] <= calibrated.interval_s[sel, 1])
        uncal, cal_ape = _ape(raw.time_s[sel], measured[sel]), _ape(calibrated.time_s[sel], measured[sel])
        out.append(Score(setup, hw, label, sum(r.label == label for r in fit), int(sel.sum()), "+".join(sources),
                         _errors(uncal), _errors(cal_ape), float(inside.mean()), inside,
                         calibrated.in_calibrated_range[sel], uncal, cal_ape))
    return out


def _source(cal: Calibration, key: str) -> str:
    entry = cal.classes.get(key) or cal.classes.get(parent_key(key) or "")
    if entry is None:
        return f"{cal.hardware_level.source}(device)"
    return entry.source if key in cal.classes else f"{entry.source}(class)"


def scoreboard(rows: Sequence[Row], known: set[str], swap: bool = False) -> list[Score]:
    """Fit per setup on the fit rows, score on the rest (``swap``: the other way round); plus the A100 -> A40
    transfer."""
    mask = fit_mask(rows) != swap
    setups: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if r.hardware in known:
            setups[(r.dataset, r.hardware, r.timing)].append(i)
    scores: list[Score] = []
    fitted: dict[tuple[str, str, str], Calibration] = {}
    for (dataset, hw, timing), idx in sorted(setups.items()):
        fit = [rows[i] for i in idx if mask[i]]
        test = [rows[i] for i in idx if not mask[i]]
        cal = fit_calibration(hw, [(r.op, r.measured_s) for r in fit], timing=timing)  # type: ignore[arg-type]
        fitted[(dataset, hw, timing)] = cal
        if test:
            scores += _score(f"{dataset} ({timing})", hw, cal, fit, test)
    source_key = ("vidur", "nvidia-a100-sxm4-80gb", "kernel")
    target = "nvidia-a40"
    if source_key in fitted and ("vidur", target, "kernel") in setups:
        seeded = fit_calibration(target, [], base=fitted[source_key])
        test = [rows[i] for i in setups[("vidur", target, "kernel")] if not mask[i]]
        scores += _score("vidur, A100 calibration transferred (no A40 data)", target, seeded, [], test)
        pool = [rows[i] for i in setups[("vidur", target, "kernel")] if mask[i]]
        for draw_name, draw_runs in ((FIRST_BY_RUN_SETUP, first_runs), (FIRST_DISTINCT_SETUP, first_distinct)):
            for draw in range(FIRST_DRAWS):
                first = draw_runs(pool, seed=draw)
                seeded = fit_calibration(target, [(r.op, r.measured_s) for r in first], base=fitted[source_key])
                scores += _score(f"{draw_name.format(k=len(first))} (draw {draw})", target, seeded, first, test)
    return scores


FIRST_BY_RUN_SETUP = "vidur, A100 calibration + the A40's first {k} runs"  # the line judged (``first_runs``)
FIRST_DISTINCT_SETUP = "vidur, A100 calibration + {k} distinct ops of the A40"  # before calib17 (``first_distinct``)


FIRST_RUNS = 10  # runs measured on a transfer's target before it is scored (``target_band``)
# Seeded draws of them: one draw spans 0.44-0.99 coverage, so 20 draws left the mean a standard error of 0.025, more
# than its margin to the aim (the first 20 of 100 gave 0.837, all 100 0.806: calib15); 100 draws about 0.011
FIRST_DRAWS = 100


def first_runs(fit: Sequence[Row], k: int = FIRST_RUNS, seed: int | Sequence[int] = 0) -> list[Row]:
    """A transfer target's first runs measured, until ``k`` distinct ops: ``fit``'s runs in a seeded random order, an
    op kept the first time one of its runs comes up, so each op is drawn with probability proportional to its runs
    (as a trace delivers them: the module's docstring says why). Fewer distinct ops than ``k``: all of them."""
    picked: dict[str, Row] = {}
    for i in np.random.default_rng(seed).permutation(len(fit)):
        picked.setdefault(repr(fit[int(i)].op), fit[int(i)])
        if len(picked) == k:
            break
    return list(picked.values())


def first_distinct(fit: Sequence[Row], k: int = FIRST_RUNS, seed: int | Sequence[int] = 0) -> list[Row]:
    """``k`` distinct ops of ``fit`` drawn uniformly (seeded), one run each: the first-runs line's draw until calib17,
    printed beside it (an op run 18 times weighs as much as one run once: docs/accuracy.md, calib16)."""
    distinct = list({repr(r.op): r for r in fit}.values())
    return [distinct[int(i)] for i in sorted(np.random.default_rng(seed).choice(len(distinct), k, replace=False))]


def _by_dataset(scores: list[Score]) -> list[str]:
    """Per data set and part: held-out rows, median / p90 abs % and the rows more than 20 % off."""
    out = []
    for dataset in sorted({s.setup.split(" ")[0] for s in scores}):
        for part in ("GEMM-like", "other"):
            chosen = [s.cal_ape for s in scores
                      if s.setup.split(" ")[0] == dataset and (s.label in GEMM_LABELS) == (part == "GEMM-like")]
            if chosen:
                ape = np.concatenate(chosen)
                out.append(f"{dataset:<11} {part:<10} rows {ape.size:>5}: median {np.median(ape):5.1f} % p90 "
                           f"{np.percentile(ape, 90):5.1f} %, {int((ape > TARGET_P90_PCT).sum()):>4} rows > "
                           f"{TARGET_P90_PCT:.0f} % off")
    return out


CLUSTER_DRAWS = 2000  # bootstrap resamples of a data set's classes (``cluster_range``)


def draw_error(values: Sequence[float]) -> float:
    """The standard error of a mean over seeded draws: their sample standard deviation / √n (nan below 2)."""
    v = np.asarray(values, dtype=float)
    return float(v.std(ddof=1) / np.sqrt(v.size)) if v.size >= 2 else float("nan")


def cluster_range(inside: Sequence[np.ndarray[Any, np.dtype[np.bool_]]], draws: int = CLUSTER_DRAWS,
                  seed: int = 0) -> tuple[float, float]:
    """5-95 % of the share of rows inside their interval over ``inside``'s clusters resampled with replacement (a
    cluster bootstrap, Davison & Hinkley 1997 section 3.8): the rows of one class on one device share one band and
    one fit, so they are not independent draws, and a data set of a few classes says less than its row count."""
    hits = np.array([float(np.sum(c)) for c in inside])
    sizes = np.array([float(np.size(c)) for c in inside])
    if not sizes.sum():
        return float("nan"), float("nan")
    pick = np.random.default_rng(seed).integers(0, len(sizes), (draws, len(sizes)))
    shares = hits[pick].sum(axis=1) / np.maximum(sizes[pick].sum(axis=1), 1.0)
    low, high = np.quantile(shares, [0.05, 0.95])
    return float(low), float(high)


def _coverage(dataset: str, scores: list[Score]) -> str:
    """A data set's share of held-out rows inside their interval (with ``cluster_range`` over its classes: each
    setup's op class one cluster), and of its in-range and beyond rows."""
    inside = np.concatenate([s.inside for s in scores])
    in_range = np.concatenate([s.in_range for s in scores])
    parts = [f"{inside[rows].mean():.2f} of {int(rows.sum())}" if rows.any() else "none"
             for rows in (in_range, ~in_range)]
    low, high = cluster_range([s.inside for s in scores])
    return f"{dataset} {inside.mean():.3f} [{low:.2f}-{high:.2f} over {len(scores)} classes] ({parts[0]}, {parts[1]})"


def print_scoreboard(rows: Sequence[Row], scores: list[Score], swap: bool = False) -> None:
    print("Calibration scoreboard: fitted on the 'fit' rows, errors on the held-out 'score' rows only.")
    if swap:
        print("  HALVES SWAPPED: fitted on the rows the default split scores, scored on those it fits")
    for hw, names in sorted(fit_families(swap).items()):
        print(f"  vidur {hw}: fitted on families {', '.join(names)}; scored on the others")
    print(f"  deepbench: fitted on half of the distinct shapes (crc32 {'odd' if swap else 'even'}), scored on the "
          "other half")
    print(f"  ncu (ReLU kernels): fitted on half of the distinct element counts (crc32 {'odd' if swap else 'even'}), "
          "scored on the other half")
    sizes = ("the sizes between fitted, every other size scored" if swap
             else "every other size fitted, the sizes between scored")
    fitted, scored = ("[M, 4096]", "[4096, N]") if swap else ("[4096, N]", "[M, 4096]")
    print(f"  llmcompass and all-reduce sweeps (per devices x devices per node): {sizes}\n  (llmcompass "
          f"softmax/layernorm: the {fitted} sweep fitted, the {scored} sweep scored)")
    print()
    header = (f"{'setup':<24} {'hardware':<22} {'op class':<12} {'fit':>5} {'score':>5} {'uncal med':>9} "
              f"{'p90':>6} {'cal med':>8} {'p90':>6} {'cover':>6}  source")
    print(header)
    for s in scores:
        if s.setup.startswith("vidur, A100 calibration + ") and not s.setup.endswith("(draw 0)"):
            continue  # the other draws: their coverage is summed up below
        setup = s.setup if len(s.setup) <= 24 else ("transfer A100->A40" if " + " not in s.setup else
                                                     "A100->A40 + distinct ops" if "distinct" in s.setup
                                                     else "A100->A40 + first runs")
        print(f"{setup:<24} {s.hardware:<22} {s.label:<12} {s.fit_rows:>5} {s.score_rows:>5} {s.uncal[0]:>9.1f} "
              f"{s.uncal[1]:>6.1f} {s.cal[0]:>8.1f} {s.cal[1]:>6.1f} {s.coverage:>6.2f}  {s.source}")
    print()
    own = [s for s in scores if not s.setup.startswith("vidur, A100")]
    unseen = [s for s in own if s.fit_rows == 0]
    own = [s for s in own if s.fit_rows > 0]
    for part in ("GEMM-like", "other"):
        chosen = [s for s in own if (s.label in GEMM_LABELS) == (part == "GEMM-like")]
        if not chosen:
            continue
        uncal = np.concatenate([s.uncal_ape for s in chosen])
        cal = np.concatenate([s.cal_ape for s in chosen])
        ok_med = sum(s.cal[0] <= TARGET_MEDIAN_PCT[part] for s in chosen)
        ok_p90 = sum(s.cal[1] <= TARGET_P90_PCT for s in chosen)
        print(f"held-out {part:<10} rows {cal.size:>5}: uncalibrated median {np.median(uncal):5.1f} % p90 "
              f"{np.percentile(uncal, 90):5.1f} %  ->  calibrated median {np.median(cal):5.1f} % p90 "
              f"{np.percentile(cal, 90):5.1f} %   (classes meeting median <= {TARGET_MEDIAN_PCT[part]:.0f} %: "
              f"{ok_med}/{len(chosen)}, p90 <= {TARGET_P90_PCT:.0f} %: {ok_p90}/{len(chosen)})")
    rest = [s.cal_ape for s in own if s.label not in GEMM_LABELS and not s.setup.startswith("ncu")]
    if rest:
        cal = np.concatenate(rest)
        print(f"held-out other without the Nsight Compute ReLU rows: {cal.size} rows, calibrated median "
              f"{np.median(cal):5.1f} % p90 {np.percentile(cal, 90):5.1f} %")
    print("held-out rows by data set, calibrated:\n  " + "\n  ".join(_by_dataset(own)))
    inside = np.concatenate([s.inside for s in own])
    in_range = np.concatenate([s.in_range for s in own])
    split = "swapped" if swap else "default"
    print(f"held-out rows inside their 10-90 % interval ({split} split): {inside.mean():.2f} (aim 0.75-0.85); "
          f"in calibrated range {inside[in_range].mean():.2f} of {int(in_range.sum())}, beyond the fitted sizes or "
          f"shapes {inside[~in_range].mean():.2f} of {int((~in_range).sum())}")
    print("  coverage by data set [5-95 % with its classes resampled] (in calibrated range, beyond): " + "; ".join(
        _coverage(d, [s for s in own if s.setup.split(" ")[0] == d])
        for d in sorted({s.setup.split(" ")[0] for s in own})))
    transferred = [s for s in scores if s.setup.startswith("vidur, A100 calibration transferred")]
    if transferred:
        moved = np.concatenate([s.inside for s in transferred])
        ape = np.concatenate([s.cal_ape for s in transferred])
        print(f"transfer A100 -> A40 (no A40 data): {moved.size} rows inside their interval {moved.mean():.2f}, "
              f"median {np.median(ape):.1f} % (the interval is the uncalibrated band, whose shipped table saw A40 "
              "rows: benchmarks/transfer_weight.py scores it without them)")
    for prefix, what in ((FIRST_BY_RUN_SETUP, "runs in a seeded random order until 10 distinct ops: each op drawn "
                          "in proportion to its runs, as a trace delivers them; the line judged"),
                         (FIRST_DISTINCT_SETUP, "distinct ops drawn uniformly, one run each: the line before calib17, "
                          "for comparison")):
        with_runs = [s for s in scores if s.setup.startswith(prefix.split("{")[0]) and
                     ("distinct" in s.setup) == ("distinct" in prefix)]
        if with_runs:
            print(first_runs_line(with_runs, what, swap))
    for s in unseen:
        print(f"not in the fit rows at all (scored on a fallback, not counted above): {s.setup} {s.hardware} "
              f"{s.label}, {s.score_rows} rows, {s.source}: median {s.uncal[0]:.1f} -> {s.cal[0]:.1f} %")


def first_runs_line(with_runs: list[Score], what: str, swap: bool = False) -> str:
    """The first-runs line: the mean over draws of the share of scored rows inside their interval, its standard
    error, the draws' range and the first 20, and the mean over draws of the median abs % error."""
    draws = list(dict.fromkeys(s.setup for s in with_runs))  # in draw order
    draw_inside = [np.concatenate([s.inside for s in with_runs if s.setup == d]).mean() for d in draws]
    draw_ape = [np.median(np.concatenate([s.cal_ape for s in with_runs if s.setup == d])) for d in draws]
    return (f"transfer A100 -> A40 + the A40's first {FIRST_RUNS} runs, {len(draws)} draws ({what}; "
            f"{'swapped' if swap else 'default'} split): rows inside their interval {np.mean(draw_inside):.3f} ± "
            f"{draw_error(draw_inside):.3f} (standard error; draws {min(draw_inside):.2f}-{max(draw_inside):.2f}, the "
            f"first 20 {', '.join(f'{v:.2f}' for v in draw_inside[:20])}: {np.mean(draw_inside[:20]):.3f}), median "
            f"{np.mean(draw_ape):.1f} % (the transferred classes' band rescaled by those runs: "
            "calibration/target_band.py)")
