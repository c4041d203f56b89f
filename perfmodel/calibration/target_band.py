"""The band of a class transferred from another device, rescaled by the target's own first runs.

A transferred class predicts the model's time, and its band is the uncalibrated model's band of the op's class
(``uncalibrated_interval``: leave-one-device-out residuals over the dev set's devices, each weighing the same).
How far off the model is differs by device more than by op class or regime (docs/accuracy.md, "transferred bands
by roofline regime and by architecture": 0.50-0.99 of a device's rows inside that band), and nothing in a
datasheet tells the devices apart; a few runs measured on the target do. Each of the target's runs gets the
normalised conformal score (Lei et al. 2018, "Distribution-free predictive inference for regression", section
5.2; Papadopoulos et al. 2008, normalised nonconformity)

    z = |log(t_measured / t_model) - c| / h,    c, h: the centre and half-width of its op's band in log,

one score per distinct op (the median of its runs': repeats of one op are one exchangeable draw, not many).
The scale s is the k scores' value at position 0.8 (k + 1) (between two order statistics, ``conformal_scale``), and
the band becomes c ± s h: a new op of the target exchangeable with those k is inside with probability ~0.8 (split
conformal, Vovk et al. 2005; the ⌈0.8 (k + 1)⌉-th score alone gave ⌈0.8 (k + 1)⌉ / (k + 1) = 0.80-0.83, and
over-covered the transfers at k = 5 and 20: docs/accuracy.md, "Eleventh pass ... (issue 22, branch calib13)").
Below ``MIN_TARGET_OPS`` distinct ops no rank ⌈0.8 (k + 1)⌉ <= k exists and the band is today's (s = 1, the dev
set's band).

One scale per device leaves the classes uneven (a device's elementwise error can be several times its matmul
error relative to the bands), so the scores are also split by the band's class (``uncalibrated_interval.band_key``,
the key the band itself is looked up by: a Mondrian conformal split, Vovk et al. 2005 section 4.5; Vovk 2012,
"Conditional validity of inductive conformal predictors"): a class with ≥ ``MIN_TARGET_OPS`` distinct ops among the
target's runs gets the rank of its own scores (``class_scales``); the other classes the same rank of their ops'
scores pooled (``REST_GROUP``: the Mondrian taxonomy is each class with ≥ 4 ops, plus the rest as one group) when
they are ≥ 4, else the device-wide scale; with no device-wide scale the band stays today's. docs/accuracy.md,
"per-class first-runs scale (issue 22, branch calib12)": transfers at k = 10 in 0.75-0.85 5/8 -> 8/8.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from perfmodel import uncalibrated_interval
from perfmodel.cost import CostBatch
from perfmodel.ops.base import FloatArray, IntArray, Op

COVERAGE = 0.8  # the 10-90 % band
MIN_TARGET_OPS = 4  # the smallest k with ⌈0.8 (k + 1)⌉ <= k
MIN_HALF_WIDTH = 1e-3  # a band narrower than this (in log) gives no scale to measure against
# Classes without a scale of their own take the rank of the scores of those classes' ops pooled (when ≥ 4), not
# of every op's (a device-wide scale dominated by the classes measured most: Vidur's first runs are mostly GEMMs)
REST_GROUP = True
# A band class with no run on the target at all keeps at least the dev set's band (scale >= 1): the rest group's
# scores are not exchangeable with its rows (nothing of that class was measured here), and the dev set's band is the
# conformal band for a device none of its runs came from (``uncalibrated_interval``: leave-one-device-out). The
# hull of the two holds if either does: the target's other classes (a wider spread here) or the dev set (its
# devices). Classes with 1-3 runs here take the rest group's rank, as before. Off: it brought the scoreboard's
# swapped first-runs line in (0.728 -> 0.772 over 100 draws) but pushed the leave-one-device-out transfers out
# (k = 5: 5/8 -> 2/8 in 0.75-0.85, k = 10: 8/8 -> 7/8); docs/accuracy.md, "Twelfth pass ... (issue 22, branch
# calib15)".
UNMEASURED_KEEP_PRIOR = False


def conformal_scale(scores: FloatArray) -> float | None:
    """The k finite ``scores`` sorted, read at position p = ``COVERAGE`` (k + 1) between the ⌊p⌋-th and the
    ⌊p⌋ + 1-th smallest (Hyndman & Fan 1996, definition 6: E F(z_(i)) = i / (k + 1), so a new exchangeable score
    falls below it with probability ~``COVERAGE`` at every k, where the ⌈p⌉-th alone gives ⌈p⌉ / (k + 1): 0.83 at
    k = 5, 0.82 at 10); None when k < ``MIN_TARGET_OPS`` (no rank ⌈p⌉ <= k)."""
    z = np.sort(scores[np.isfinite(scores)])
    position = COVERAGE * (z.size + 1)
    if z.size < MIN_TARGET_OPS or math.ceil(position - 1e-9) > z.size:
        return None
    low = min(max(math.floor(position + 1e-9), 1), z.size)
    high = min(low + 1, z.size)
    return float(z[low - 1] + (position - low) * (z[high - 1] - z[low - 1]))


def scores(log_residual: FloatArray, band_log: FloatArray, groups: IntArray) -> FloatArray:
    """One normalised score per distinct op (``groups``: each run's op id): the median over its runs of
    |log residual - band centre| / band half-width (runs whose band is degenerate are skipped)."""
    centre = band_log.mean(axis=1)
    half = (band_log[:, 1] - band_log[:, 0]) / 2.0
    ok = np.isfinite(log_residual) & np.isfinite(centre) & (half >= MIN_HALF_WIDTH)
    if not ok.any():
        return np.zeros(0)
    z = np.abs(log_residual[ok] - centre[ok]) / half[ok]
    _, op = np.unique(groups[ok], return_inverse=True)
    op = op.reshape(-1)
    out: FloatArray = np.array([float(np.median(z[op == j])) for j in range(int(op.max()) + 1)])
    return out


def target_scales(ops: Sequence[Op], model_s: FloatArray, measured: FloatArray,
                  groups: IntArray) -> tuple[float | None, dict[str, float]]:
    """The scale of the transferred band measured on the target's runs (``conformal_scale`` of ``scores``), device
    wide and per band class with ≥ ``MIN_TARGET_OPS`` distinct ops of its own: ``ops`` and their model seconds,
    measured seconds, distinct-op ids. (None, {}): too few distinct ops."""
    usable = np.flatnonzero((model_s > 0) & (measured > 0))
    if usable.size < MIN_TARGET_OPS:
        return None, {}
    picked = [ops[int(i)] for i in usable]
    band = uncalibrated_interval.interval_s(picked, model_s[usable])
    with np.errstate(divide="ignore", invalid="ignore"):
        band_log = np.log(band / model_s[usable, None])
        residual = np.log(measured[usable] / model_s[usable])
    scale = conformal_scale(scores(residual, band_log, groups[usable]))
    if scale is None:
        return None, {}
    keys = np.array([uncalibrated_interval.band_key(op) for op in picked])
    per_class = {}
    for key in sorted(set(keys.tolist())):
        mine = keys == key
        found = conformal_scale(scores(residual[mine], band_log[mine], groups[usable][mine]))
        if found is not None:
            per_class[str(key)] = found
    if per_class and REST_GROUP:
        rest = ~np.isin(keys, list(per_class))
        found = conformal_scale(scores(residual[rest], band_log[rest], groups[usable][rest]))
        if found is not None:
            scale = found
    if UNMEASURED_KEEP_PRIOR:
        return unmeasured_prior(scale, per_class, keys.tolist())
    return scale, per_class


def unmeasured_prior(scale: float, per_class: dict[str, float],
                     measured: Sequence[str]) -> tuple[float, dict[str, float]]:
    """(scale for classes with no run here, per-class scales): each band class in ``measured`` (the band classes of
    the target's runs) without a scale of its own takes ``scale`` (the rest group's rank, as before); the classes
    never measured here take ``scale`` but never below 1, the dev set's band (``UNMEASURED_KEEP_PRIOR``)."""
    out = dict(per_class)
    for key in sorted(set(measured)):
        out.setdefault(str(key), scale)
    return max(scale, 1.0), out


def stored_scale(value: Any) -> float | None:
    """A calibration's stored transfer scale: None, or a positive finite number (else a ValueError)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"transfer_scale {value!r}: a positive finite number or null")
    return float(value)


def stored_class_scales(value: Any) -> dict[str, float]:
    """A calibration's stored per-class transfer scales: null or a mapping of band class to a positive finite
    number (else a ValueError)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"transfer_class_scales {value!r}: a mapping of band class to scale, or null")
    out = {}
    for key, scale in value.items():
        try:
            out[str(key)] = float(stored_scale(scale))  # type: ignore[arg-type]
        except (ValueError, TypeError) as exc:
            raise ValueError(f"transfer_class_scales[{key!r}] = {scale!r}: a positive finite number") from exc
    return out


def row_scales(ops: Sequence[Op], scale: float | None, class_scales: dict[str, float]) -> FloatArray | None:
    """Each op's scale: its band class's own where the target measured one, else the device-wide ``scale``;
    None where there is neither (the band as stored)."""
    if scale is None:
        return None
    out: FloatArray = np.array([class_scales.get(uncalibrated_interval.band_key(op), scale) for op in ops])
    return out


def scaled(band_log: FloatArray, scale: float | FloatArray | None) -> FloatArray:
    """``band_log`` (rows x 2) about its centre times ``scale`` (one, or one a row; unchanged for None)."""
    if scale is None:
        return band_log
    centre = band_log.mean(axis=1, keepdims=True)
    factor = np.asarray(scale, dtype=float).reshape(-1, 1) if np.ndim(scale) else float(scale)
    out: FloatArray = centre + factor * (band_log - centre)
    return out


def transfer_band(moved: np.ndarray[tuple[int], np.dtype[np.bool_]], batch: CostBatch, time: FloatArray,
                  interval_log: FloatArray, scale: float | None,
                  class_scales: dict[str, float] | None = None) -> FloatArray:
    """Rows of a class transferred from another device (``moved``): the uncalibrated model's band of the op's class
    around the model's time (``uncalibrated_interval``), rescaled about its centre by ``scale`` (the target's runs:
    ``target_scales``; each row its band class's scale from ``class_scales`` where there is one; None: as stored),
    stretched to hold the prediction (at ``TRANSFER_WEIGHT`` 0 the prediction
    is the model's and, unscaled, the band exactly its interval)."""
    rows = np.flatnonzero(moved & (time > 0) & (batch.time_s > 0))
    if not rows.size:
        return interval_log
    model_band = batch.uncalibrated_interval_s
    if model_band is None:
        model_band = uncalibrated_interval.interval_s([batch.ops[int(i)] for i in rows], batch.time_s[rows])
    else:
        model_band = model_band[rows]
    out = interval_log.copy()
    factors = row_scales([batch.ops[int(i)] for i in rows], scale, class_scales or {})
    if factors is None:
        band = np.log(model_band / time[rows, None])
    else:
        shift = np.log(batch.time_s[rows] / time[rows])  # the model's time relative to the prediction
        band = scaled(np.log(model_band / batch.time_s[rows, None]), factors) + shift[:, None]
    out[rows, 0] = np.fmin(band[:, 0], 0.0)
    out[rows, 1] = np.fmax(band[:, 1], 0.0)
    return out
