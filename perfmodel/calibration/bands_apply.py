"""The calibrated interval's per-row widenings (a shape never varied, a distance scale, a borrowed correction) and
the local correction factor, each computed once per distinct op (split from ``calibration.model``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from perfmodel.calibration import curve
from perfmodel.calibration.distance import coordinates
from perfmodel.calibration.local import LocalCorrection
from perfmodel.ops.base import FloatArray, IntArray

if TYPE_CHECKING:
    from perfmodel.calibration.model import ClassParams


def each_its_own(op_row: IntArray) -> bool:
    """Whether no op repeats in ``op_row`` (each row's distinct op) as ``once_per_op`` tells it: ascending."""
    return op_row.size < 2 or bool((op_row[1:] > op_row[:-1]).all())


def once_per_op(values: FloatArray | Callable[[], FloatArray], op_row: IntArray) -> tuple[IntArray, IntArray]:
    """(kept, back): one row of ``values`` (rows x columns, float; or a function that computes them, called only
    where some op repeats) per distinct op (``op_row``: each row's, from ``distinct_ops``) and, per row, its op's
    position in ``kept``, checked: ``values[kept][back]`` equals ``values`` bit for bit (else every row is kept), so
    that a function of the rows' values may run on ``kept`` alone."""
    if each_its_own(op_row):  # ascending: no op repeated (a sort skipped)
        return np.arange(len(op_row)), np.arange(len(op_row))
    if callable(values):
        values = values()
    _, kept, back = np.unique(op_row, return_index=True, return_inverse=True)
    back = back.reshape(-1)
    whole = np.ascontiguousarray(values, dtype=np.float64)
    if kept.size == len(op_row) or not np.array_equal(whole[kept][back].view(np.int64), whole.view(np.int64)):
        return np.arange(len(op_row)), np.arange(len(op_row))
    return kept, back


# Rows beyond their class's data only through a shape number its runs never varied keep the in-range band (the beyond
# band's factor measures extrapolation along the directions the fit varied, which such a row does not leave), still
# hulled with the model's band by ``unvaried_band``. Off: they take the beyond band as every other row beyond.
UNVARIED_KEEP_IN_RANGE = False


def extrapolated(beyond_fit: np.ndarray[Any, np.dtype[np.bool_]], outside: np.ndarray[Any, np.dtype[np.bool_]],
                 shape_low: FloatArray, shape_high: FloatArray) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """The ``beyond_fit`` rows that take the beyond band: all of them, or with ``UNVARIED_KEEP_IN_RANGE`` those
    outside (``outside``: n x (2 + N_SHAPE), ``curve.beyond``) in log10 FLOPs, bytes or a shape number the fit
    varied (``shape_low`` < ``shape_high``)."""
    if not UNVARIED_KEEP_IN_RANGE:
        return beyond_fit
    varied = np.ones(outside.shape, dtype=bool)
    varied[:, 2:] = shape_low != shape_high
    out: np.ndarray[Any, np.dtype[np.bool_]] = beyond_fit & (outside & varied).any(axis=1)
    return out


def unvaried_band(beyond_fit: np.ndarray[Any, np.dtype[np.bool_]], shape_low: FloatArray, shape_high: FloatArray,
                  f: curve.Features, model_log: FloatArray, time: FloatArray, model_s: FloatArray,
                  interval_log: FloatArray) -> FloatArray:
    """Rows of a fitted class whose op varies a shape number the class's runs all shared (fitted range one value,
    ``shape_low`` = ``shape_high``: its coefficient was never fitted, nothing measured speaks for the change): the
    band also reaches the class's uncalibrated band (``model_log``) around the model's own time. Only the
    ``beyond_fit`` rows are read."""
    if not beyond_fit.any():
        return interval_log
    beyond = np.flatnonzero(beyond_fit)
    low = shape_low[beyond]
    single = low == shape_high[beyond]  # rows x N_SHAPE: a shape number the fit never saw vary
    moved = np.abs(f.shape[beyond] - low) > 1e-9
    rows = beyond[np.any(single & moved, axis=1) & np.isfinite(model_log[beyond, 0]) & (time[beyond] > 0)
                  & (model_s[beyond] > 0)]
    if not rows.size:
        return interval_log
    shift = np.log(model_s[rows] / time[rows])  # the model's time relative to the prediction, in log
    out = interval_log.copy()
    out[rows, 0] = np.fmin(interval_log[rows, 0], shift + model_log[rows, 0])
    out[rows, 1] = np.fmax(interval_log[rows, 1], shift + model_log[rows, 1])
    return out


def distance_band(entries: list[ClassParams], own: list[bool], inverse: IntArray,
                   in_range: np.ndarray[Any, np.dtype[np.bool_]], f: curve.Features,
                   interval_log: FloatArray, op_row: IntArray) -> FloatArray:
    """In-range rows of a class fitted here with a ``distance`` scale: its band times the op's spread (nearer the
    fitted ops than k-fold's held-out runs were: narrower; farther: wider); once per distinct op (``op_row``)."""
    out = interval_log
    for i, (entry, mine) in enumerate(zip(entries, own, strict=True)):
        if entry.distance is None or not mine or entry.source != "fitted":
            continue
        rows = np.flatnonzero((inverse == i) & in_range)
        if rows.size:
            out = out.copy() if out is interval_log else out
            x = coordinates(f.take(rows))
            kept, back = once_per_op(x, op_row[rows])
            out[rows] *= entry.distance.factor(x[kept])[back][:, None]
    return out


def borrowed_band(entries: list[ClassParams], inverse: IntArray, f: curve.Features, time: FloatArray,
                   model_s: FloatArray, interval_log: FloatArray) -> FloatArray:
    """Rows on a borrowed correction (``weight`` < 1): the band also reaches the model (none of the
    correction holds for these kernels) and the whole correction (all of it does)."""
    partial = np.array([e.weight < 1.0 for e in entries], dtype=bool)[inverse]
    if not partial.any():
        return interval_log
    rows = np.flatnonzero(partial)
    full = np.array([e.theta for e in entries]).reshape(len(entries), curve.N_PARAMS)[inverse[rows]]
    with np.errstate(divide="ignore", invalid="ignore"):
        ends = np.log(np.column_stack([model_s[rows], curve.time_s(full, f.take(rows))]) / time[rows, None])
    out = interval_log.copy()
    out[rows, 0] = np.fmin(interval_log[rows, 0], ends.min(axis=1))
    out[rows, 1] = np.fmax(interval_log[rows, 1], ends.max(axis=1))
    return out


def local_log_factor(corrections: list[LocalCorrection | None], inverse: IntArray,
                      f: curve.Features, op_row: IntArray) -> FloatArray:
    """Per row, the local correction c(x) of its key (0 where it has none); once per distinct op (``once_per_op``:
    ``op_row``, each row's distinct op)."""
    out = np.zeros(len(inverse))
    for i, correction in enumerate(corrections):
        if correction is not None:
            rows = np.flatnonzero(inverse == i)
            taken = f.take(rows)
            kept, back = once_per_op(functools.partial(curve.range_values, taken), op_row[rows])
            out[rows] = correction.log_factor(taken if kept.size == rows.size else f.take(rows[kept]))[back]
    return out
