"""The fit's analytic Jacobian against central differences of the calibrated log time."""

from __future__ import annotations

import numpy as np

from perfmodel.calibration import curve, shape
from perfmodel.calibration.curve import Features


def _features(rows: int, seed: int) -> Features:
    rng = np.random.default_rng(seed)
    return Features(rng.uniform(1e-6, 5e-6, rows), rng.uniform(1e-6, 1e-3, rows), rng.uniform(0.0, 1.0, rows),
                    rng.uniform(6.0, 12.0, rows), rng.uniform(4.0, 9.0, rows), np.ones(rows, dtype=bool),
                    rng.normal(size=(rows, shape.N_SHAPE)))


def test_log_time_gradient_matches_central_differences() -> None:
    for seed in range(3):
        f = _features(40, seed)
        theta = curve.IDENTITY + np.random.default_rng(10 + seed).normal(scale=0.4, size=curve.N_PARAMS)
        analytic = curve.log_time_gradient(theta, f)
        numeric = np.empty_like(analytic)
        step = 1e-6
        for k in range(curve.N_PARAMS):
            up, down = theta.copy(), theta.copy()
            up[k] += step
            down[k] -= step
            numeric[:, k] = (np.log(curve.time_s(up, f)) - np.log(curve.time_s(down, f))) / (2 * step)
        assert analytic.shape == (40, curve.N_PARAMS)
        np.testing.assert_allclose(analytic, numeric, atol=1e-7)
        assert np.abs(analytic[:, 1:]).max() > 0.1  # every part of the form is exercised, not all zeros


def test_floor_only_rows_depend_on_the_floor_scale_alone() -> None:
    f = _features(5, 0)
    f = Features(f.overhead_s, np.zeros(5), f.compute_share, f.log10_flops, f.log10_bytes, f.has_flops, f.shape)
    gradient = curve.log_time_gradient(curve.IDENTITY, f)
    np.testing.assert_allclose(gradient[:, 0], 1.0)
    np.testing.assert_allclose(gradient[:, 1:], 0.0)
