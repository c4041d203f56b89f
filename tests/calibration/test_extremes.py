"""Extreme but valid runs fit (every number finite, the report JSON-safe) or raise ValueError saying why."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from perfmodel.calibration import Calibration, bands, fit_calibration, predict_calibrated
from perfmodel.calibration.bands import beyond_factor
from perfmodel.calibration.fit import FitResult
from tests.calibration.test_calibration import HW, gemms, norms


def _check(cal: Calibration, ops: list[Any]) -> None:
    """The calibration stores, loads and predicts finite positive times and ordered finite intervals."""
    text = json.dumps(cal.params, allow_nan=False)
    again = Calibration.from_params(json.loads(text))
    out = predict_calibrated(HW, ops, again)
    assert np.all(np.isfinite(out.time_s)) and np.all(out.time_s > 0)
    assert out.interval_s is not None and not np.isinf(out.interval_s).any()  # nan: no interval (too few runs)
    known = np.isfinite(out.interval_s).all(axis=1)
    assert np.all(out.interval_s[known, 0] <= out.interval_s[known, 1]) and np.all(out.interval_s[known] > 0)
    json.dumps(cal.report, allow_nan=True)  # the report may say nan where nothing was held out, never overflow


def test_times_spanning_twelve_decades_fit() -> None:
    rng = np.random.default_rng(3)
    ops = gemms(150, rng) + norms(100, rng)
    times = 10.0 ** rng.uniform(-9, 3, size=len(ops))  # 1 ns .. 1000 s, unrelated to the shapes
    cal = fit_calibration(HW, list(zip(ops, times.tolist(), strict=True)))
    _check(cal, ops)


def test_a_few_runs_wildly_off_leave_finite_beyond_bands() -> None:
    rng = np.random.default_rng(4)
    ops = gemms(120, rng, lo=6, hi=9) + gemms(30, rng, lo=11, hi=13)
    times = np.full(len(ops), 1e-5)
    times[-30:] = 10.0 ** rng.uniform(-9, 3, size=30)  # beyond the small shapes' range, 12 decades of misses
    cal = fit_calibration(HW, list(zip(ops, times.tolist(), strict=True)))
    _check(cal, ops)


def test_one_shape_repeated_a_hundred_times_fits() -> None:
    op = {"kind": "matmul", "m": 512, "n": 512, "k": 512, "dtype": "fp16"}
    times = 2e-5 * np.exp(0.05 * np.random.default_rng(5).standard_normal(100))
    cal = fit_calibration(HW, [(op, float(t)) for t in times])
    _check(cal, [op, {**op, "m": 4096}])


@pytest.mark.parametrize("seconds", [1e-9, 1e3])
def test_all_identical_times_fit(seconds: float) -> None:
    rng = np.random.default_rng(6)
    ops = gemms(80, rng) + norms(40, rng)
    cal = fit_calibration(HW, [(op, seconds) for op in ops])
    _check(cal, ops)


def test_a_single_run_fits() -> None:
    op = {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp16"}
    cal = fit_calibration(HW, [(op, 1e-6)])
    _check(cal, [op])


@pytest.mark.parametrize("seconds", [0.0, -1.0, float("nan"), float("inf"), 1e308 * 10])
def test_a_time_not_positive_and_finite_is_refused_saying_why(seconds: float) -> None:
    op = {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp16"}
    with pytest.raises(ValueError, match="positive finite"):
        fit_calibration(HW, [(op, 1e-6), (op, seconds)])


def test_a_huge_beyond_factor_on_a_wide_band_cannot_overflow() -> None:
    """One class's runs agree to 0.1 % inside its data and miss by e^5 beyond it: a factor of thousands.
    Applied to a class whose band is e^+-3 wide, the beyond band's ratio once overflowed ``math.exp``."""
    tight = FitResult(np.zeros(1), np.zeros(0), np.concatenate([np.zeros(50), np.full(20, 5.0)]), 5, "scale",
                      np.concatenate([np.zeros(50, dtype=bool), np.ones(20, dtype=bool)]))
    wide_cv = np.linspace(-4.0, 4.0, 60)
    wide = FitResult(np.zeros(1), wide_cv, wide_cv, 5, "scale", np.zeros(60, dtype=bool))
    factor, _ = beyond_factor([tight, wide])
    assert factor is not None and factor > 1000
    band = bands.beyond_band(wide, (-3.0, 3.0), factor)
    assert band is not None and -bands.LOG_BAND_LIMIT <= band[0] < band[1] <= bands.LOG_BAND_LIMIT
    ratio = bands.band_ratio(band)
    assert ratio is not None and all(np.isfinite(ratio))
    limit = bands.LOG_BAND_LIMIT
    np.testing.assert_allclose(bands.band_ratio((-1e6, 1e6)) or [], np.exp([-limit, limit]))
