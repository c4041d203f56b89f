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
The scale s is the ⌈0.8 (k + 1)⌉-th smallest of the k scores, and the band becomes c ± s h: a new op of the
target exchangeable with those k is inside with probability ≥ ⌈0.8 (k + 1)⌉ / (k + 1) (0.80-0.83; split
conformal, Vovk et al. 2005). Below ``MIN_TARGET_OPS`` distinct ops that rank does not exist and the band is
today's (s = 1, the dev set's band).
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


def conformal_scale(scores: FloatArray) -> float | None:
    """The ⌈``COVERAGE`` (k + 1)⌉-th smallest of the k finite ``scores``; None when k < ``MIN_TARGET_OPS``."""
    z = np.sort(scores[np.isfinite(scores)])
    rank = math.ceil(COVERAGE * (z.size + 1) - 1e-9)
    if z.size < MIN_TARGET_OPS or rank > z.size:
        return None
    return float(z[rank - 1])


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


def target_scale(ops: Sequence[Op], model_s: FloatArray, measured: FloatArray, groups: IntArray) -> float | None:
    """The scale of the transferred band measured on the target's runs (``conformal_scale`` of ``scores``):
    ``ops`` and their model seconds, measured seconds, distinct-op ids. None: too few distinct ops."""
    usable = np.flatnonzero((model_s > 0) & (measured > 0))
    if usable.size < MIN_TARGET_OPS:
        return None
    band = uncalibrated_interval.interval_s([ops[int(i)] for i in usable], model_s[usable])
    with np.errstate(divide="ignore", invalid="ignore"):
        band_log = np.log(band / model_s[usable, None])
        residual = np.log(measured[usable] / model_s[usable])
    return conformal_scale(scores(residual, band_log, groups[usable]))


def stored_scale(value: Any) -> float | None:
    """A calibration's stored transfer scale: None, or a positive finite number (else a ValueError)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"transfer_scale {value!r}: a positive finite number or null")
    return float(value)


def scaled(band_log: FloatArray, scale: float | None) -> FloatArray:
    """``band_log`` (rows x 2) about its centre times ``scale`` (unchanged for None)."""
    if scale is None:
        return band_log
    centre = band_log.mean(axis=1, keepdims=True)
    out: FloatArray = centre + scale * (band_log - centre)
    return out


def transfer_band(moved: np.ndarray[tuple[int], np.dtype[np.bool_]], batch: CostBatch, time: FloatArray,
                  interval_log: FloatArray, scale: float | None) -> FloatArray:
    """Rows of a class transferred from another device (``moved``): the uncalibrated model's band of the op's class
    around the model's time (``uncalibrated_interval``), rescaled about its centre by ``scale`` (the target's runs:
    ``target_scale``; None: as stored), stretched to hold the prediction (at ``TRANSFER_WEIGHT`` 0 the prediction
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
    if scale is None:
        band = np.log(model_band / time[rows, None])
    else:
        shift = np.log(batch.time_s[rows] / time[rows])  # the model's time relative to the prediction
        band = scaled(np.log(model_band / batch.time_s[rows, None]), scale) + shift[:, None]
    out[rows, 0] = np.fmin(band[:, 0], 0.0)
    out[rows, 1] = np.fmax(band[:, 1], 0.0)
    return out
