"""The calibrated intervals' bands, in log(measured / calibrated): conformal bands from held-out residuals,
the within and beyond bands of ops outside the fitted data, and the clamp that keeps every edge finite."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from perfmodel.calibration.fit import FitResult
from perfmodel.calibration.model import Range
from perfmodel.ops.base import FloatArray

LOG_BAND_LIMIT = math.log(1e4)  # a band edge is at most 10^4 or 10^-4 times the prediction: beyond, no information


def clamped(band: Range | None) -> Range | None:
    """``band`` with each edge inside ±``LOG_BAND_LIMIT`` (so ``exp`` of it is finite and JSON can hold it)."""
    if band is None:
        return None
    lo, hi = (min(max(float(v), -LOG_BAND_LIMIT), LOG_BAND_LIMIT) for v in band)
    return lo, hi


def quantile_band(log_residuals: FloatArray) -> Range | None:
    r = log_residuals[np.isfinite(log_residuals)]
    if r.size < 2:
        return None
    lo, hi = np.quantile(r, [0.1, 0.9])
    return clamped((float(lo), float(hi)))


# Held-out runs a class needs for a band of its own (fewer: the device's pooled band): the smallest n whose
# conformal ranks exist, ⌊0.1 (n + 1)⌋ ≥ 1 and ⌈0.9 (n + 1)⌉ ≤ n, so the band holds a new exchangeable run with
# probability ≥ 0.8. It was 30: Vidur's two-node all-reduces and the 10-11-run LLMCompass classes took their
# device's pooled band, over classes 3-20x apart in error. Scoreboard coverage default / swapped at 7c27155, 30 ->
# 9: Vidur 0.846 / 0.742 -> 0.850 / 0.746 (A100 all-reduce 0.48 / 0.40 -> 1.00 / 0.93), LLMCompass 0.970 / 0.832
# -> 0.960 / 0.762 (101 rows: a row is a point; at cefba79 it was 0.91 / 0.65 -> 0.88 / 0.68), DeepBench 0.822 /
# 0.857 -> 0.822 / 0.861.
MIN_CONFORMAL_RUNS = 9
# Held-out runs inside their fold's fitted data a class needs for its in-range band to be theirs alone: the smallest
# n whose widest conformal band (the extremes) holds a new exchangeable run with probability (n - 1) / (n + 1) of at
# least 0.75, the low end of the aim (n = 7: 0.75).
MIN_IN_RANGE_RUNS = 7


def in_range_residuals(held_out: FloatArray, beyond: np.ndarray[Any, np.dtype[np.bool_]]) -> FloatArray:
    """The out-of-fold residuals an in-range band is taken from (Mondrian split on what ``in_calibrated_range``
    tells at prediction): those of runs held out inside their fold's fitted data when ``MIN_IN_RANGE_RUNS`` are,
    else all (nan for the others). Runs held out beyond their fold's data are extrapolations: the beyond band's."""
    within = np.isfinite(held_out) & ~beyond
    if int(within.sum()) < MIN_IN_RANGE_RUNS:
        return held_out
    out: FloatArray = np.where(within, held_out, np.nan)
    return out


# The conformal band's edges at the Weibull plotting positions (``conformal_band``): each edge's expected tail 0.1,
# the band's expected coverage 0.8 at every n (shipped: issue 22 asks 75-85 %, not at least 80 %; fifteenth pass,
# merged); off: the split-conformal ranks rounded outward (coverage >= 0.8, up to 0.8 + 2 / (n + 1)).
UNBIASED_RANKS = True


def conformal_band(log_residuals: FloatArray) -> Range | None:
    """Split-conformal 10-90 % band of held-out log residuals: of the n finite ones sorted, the
    ⌊0.1 (n + 1)⌋-th and the ⌈0.9 (n + 1)⌉-th (the extremes when n is small), so a new run exchangeable with
    them falls inside with probability ≥ 0.8 (Vovk et al.; Lei et al. 2018). None below 2 residuals.
    ``UNBIASED_RANKS``: the order statistics at the fractional ranks 0.1 (n + 1) and 0.9 (n + 1), linearly
    interpolated and held inside 1..n (Hyndman & Fan 1996, definition 6): E F(r_(k)) = k / (n + 1), so each edge
    leaves 0.1 out on average and the band covers 0.8 on average, not up to 0.8 + 2 / (n + 1) (16 runs: 0.88)."""
    r = np.sort(log_residuals[np.isfinite(log_residuals)])
    if r.size < 2:
        return None
    if UNBIASED_RANKS:
        lo, hi = np.quantile(r, [0.1, 0.9], method="weibull")
        return clamped((float(lo), float(hi)))
    low = max(math.floor(0.1 * (r.size + 1)), 1)
    high = min(math.ceil(0.9 * (r.size + 1)), r.size)
    return clamped((float(r[low - 1]), float(r[high - 1])))


def class_interval(result: FitResult, held_out: FloatArray | None = None) -> Range | None:
    """The conformal band (``conformal_band``) of ``held_out`` (each run's out-of-fold log residual, default
    the fit's k-fold ones); the in-sample residuals' band when fewer than 5 were held out."""
    cv = result.cv_residuals if held_out is None else held_out
    if cv is not None and np.isfinite(cv).sum() >= 5:
        return conformal_band(cv)
    return quantile_band(result.residuals)


MIN_BEYOND_RUNS = 10  # held-out runs beyond their fold's data a device needs before its beyond band is set
BEYOND_QUANTILE = 0.8  # the 10-90 % band's coverage


MIN_WITHIN_RUNS = 5  # held-out runs inside their fold's data a class needs for its within band


def within_band(result: FitResult) -> Range | None:
    """The 10-90 % band of the k-fold residuals of runs held out inside their fold's data, stretched to hold 0
    (the calibrated prediction itself); None with fewer than ``MIN_WITHIN_RUNS`` of them."""
    cv = result.cv_residuals
    if cv is None:
        return None
    within = cv[np.isfinite(cv) & (~result.cv_outside if result.cv_outside is not None else True)]
    band = quantile_band(within) if within.size >= MIN_WITHIN_RUNS else None
    return None if band is None else (min(band[0], -1e-3), max(band[1], 1e-3))


def beyond_factor(results: Sequence[FitResult]) -> tuple[float | None, int]:
    """How much wider than its class's cross-validated band an op beyond the fitted data misses: over every
    class's k-fold runs held out beyond their fold's data (``fit.outside``), the ``BEYOND_QUANTILE`` of
    |residual| / the band's edge on its side (1 = at the edge); at least 1. None below ``MIN_BEYOND_RUNS``."""
    ratios = []
    for result in results:
        cv, beyond, band = result.cv_residuals, result.cv_outside, within_band(result)
        if cv is None or beyond is None or band is None:
            continue
        out = cv[beyond & np.isfinite(cv)]
        ratios.append(np.where(out > 0, out / band[1], out / band[0]))
    pooled = np.concatenate(ratios) if ratios else np.zeros(0)
    if pooled.size < MIN_BEYOND_RUNS:
        return None, int(pooled.size)
    return max(1.0, float(np.quantile(pooled, BEYOND_QUANTILE))), int(pooled.size)


def beyond_band(result: FitResult, interval: Range | None, factor: float) -> Range | None:
    """The class's within band times ``factor``, never narrower than ``interval``."""
    band = within_band(result)
    if band is None:
        return interval
    lo, hi = band[0] * factor, band[1] * factor
    return clamped((lo, hi) if interval is None else (min(lo, interval[0]), max(hi, interval[1])))


def band_ratio(band: Range | None) -> list[float] | None:
    """The band as ratios t / t_cal (edges clamped to ±``LOG_BAND_LIMIT``: never an overflow)."""
    edges = clamped(band)
    return None if edges is None else [math.exp(edges[0]), math.exp(edges[1])]
