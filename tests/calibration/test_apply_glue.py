"""Applying a calibration, the numpy around the kernels: ``unvaried_band`` on the ``beyond_fit`` rows only against
the same arithmetic over every row (before issue 27's calfit19), to the bit."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.calibration import curve, shape
from perfmodel.calibration.bands_apply import unvaried_band


def _every_row(beyond_fit: Any, ranges: Any, f: curve.Features, model_log: Any, time: Any, model_s: Any,
               interval_log: Any) -> Any:
    """``unvaried_band`` as it was: every row's numbers computed, then the rows picked."""
    if not beyond_fit.any():
        return interval_log
    single = ranges[:, 0] == ranges[:, 1]
    moved = np.abs(f.shape - ranges[:, 0]) > 1e-9
    rows = np.flatnonzero(beyond_fit & np.any(single & moved, axis=1) & np.isfinite(model_log[:, 0])
                          & (time > 0) & (model_s > 0))
    if not rows.size:
        return interval_log
    shift = np.log(model_s[rows] / time[rows])
    out = interval_log.copy()
    out[rows, 0] = np.fmin(interval_log[rows, 0], shift + model_log[rows, 0])
    out[rows, 1] = np.fmax(interval_log[rows, 1], shift + model_log[rows, 1])
    return out


def test_unvaried_band_on_the_rows_beyond_equals_every_rows_arithmetic() -> None:
    rng = np.random.default_rng(4)
    n = 2000
    low = rng.integers(0, 3, size=(n, shape.N_SHAPE)).astype(float)
    high = np.where(rng.random((n, shape.N_SHAPE)) < 0.5, low, low + 1.0)  # half the numbers never varied
    step = rng.choice([1e-10, 0.5, -2.0], (n, shape.N_SHAPE))
    values = np.where(rng.random((n, shape.N_SHAPE)) < 0.7, low, low + step)
    f = curve.Features(*(rng.random(n) for _ in range(5)), np.ones(n, dtype=bool), values)
    model_log = np.column_stack([-rng.random(n), rng.random(n)])
    model_log[::9] = np.nan
    time, model_s = rng.uniform(-0.1, 1.0, n), rng.uniform(-0.1, 1.0, n)
    interval_log = np.column_stack([-rng.random(n) * 0.2, rng.random(n) * 0.2])
    ranges = np.stack([low, high], axis=1)
    for beyond_fit in (rng.random(n) < 0.2, np.zeros(n, dtype=bool), np.ones(n, dtype=bool)):
        got = unvaried_band(beyond_fit, low, high, f, model_log, time, model_s, interval_log)
        expected = _every_row(beyond_fit, ranges, f, model_log, time, model_s, interval_log)
        assert np.array_equal(got.view(np.int64), expected.view(np.int64))
        if beyond_fit.any():
            assert (got != interval_log).any()  # some rows widened: the test reaches the arithmetic
