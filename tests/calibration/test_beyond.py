"""Ops beyond the fitted data: ``in_calibrated_range`` false and a band as wide as such ops missed in CV.

An op whose size or any shape number lies outside what its class was fitted on is an extrapolation:
the shape coefficients are clipped to their fitted range there, so nothing fitted speaks for it. On the
scoreboard such rows sat inside their 10-90 % band half the time (0.52 of 411 rows, and 0.51 of 1,883
with the halves swapped) against 0.82 / 0.73 for the rows inside (docs/accuracy.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from perfmodel import predict_many
from perfmodel.calibration import Calibration, fit_calibration, predict_calibrated
from perfmodel.calibration.bands import MIN_BEYOND_RUNS, beyond_factor
from perfmodel.calibration.curve import Features
from perfmodel.calibration.fit import FitResult, outside
from perfmodel.calibration.shape import N_SHAPE
from perfmodel.cli import render_cost

HW = "nvidia-a100-sxm4-80gb"


def _result(inside: np.ndarray, beyond: np.ndarray) -> FitResult:
    cv = np.concatenate([inside, beyond])
    flags = np.concatenate([np.zeros(inside.size, dtype=bool), np.ones(beyond.size, dtype=bool)])
    return FitResult(np.zeros(1), cv, cv, 5, "scale", flags)


def test_beyond_factor_is_how_far_past_the_band_held_out_extrapolations_fell() -> None:
    """Inside residuals evenly over [-0.1, 0.1]: their 10-90 % band is +-0.08. Ten runs held out beyond their
    fold's data missed by +0.24 and -0.24: three times the band's edge on their side, so the factor is 3."""
    inside = np.linspace(-0.1, 0.1, 101)
    factor, runs = beyond_factor([_result(inside, np.array([0.24] * 5 + [-0.24] * 5))])
    assert runs == 10 and factor == pytest.approx(3.0)
    # within the band: never narrower than the class's own band
    assert beyond_factor([_result(inside, np.full(10, 0.01))])[0] == 1.0
    # too few extrapolated runs to say: no factor, the class band stays
    assert beyond_factor([_result(inside, np.full(MIN_BEYOND_RUNS - 1, 0.5))]) == (None, MIN_BEYOND_RUNS - 1)


def _features(log_bytes: list[float], shape_0: list[float]) -> Features:
    n = len(log_bytes)
    shape = np.zeros((n, N_SHAPE))
    shape[:, 0] = shape_0
    x = np.array(log_bytes, dtype=float)
    return Features(np.zeros(n), np.ones(n), np.ones(n), x + 1.0, x, np.ones(n, dtype=bool), shape)


def test_outside_is_size_or_any_shape_number_beyond_the_fitted_range() -> None:
    fitted = _features([6.0, 7.0, 8.0], [0.0, 1.0, 2.0])
    rows = _features([7.5, 9.0, 5.0, 7.0], [1.5, 1.0, 1.0, 3.0])
    assert outside(rows, fitted).tolist() == [False, True, True, True]


def _gemm(m: int, n: int, k: int, dtype: str = "fp16") -> dict[str, Any]:
    return {"kind": "matmul", "m": m, "n": n, "k": k, "dtype": dtype}


def _square_gemms(seed: int, per_dtype: int) -> list[tuple[dict[str, Any], float]]:
    """GEMMs 256-4096 wide in fp16, bf16 and fp32 (three classes), each 0-30 % slower than the model: a spread
    the model has no word for. K-fold CV holds out a few of each class beyond its fold's data."""
    rng = np.random.default_rng(seed)
    ops = [_gemm(int(m), int(n), int(k), dtype) for dtype in ("fp16", "bf16", "fp32")
           for m, n, k in (2 ** rng.uniform(8, 12, size=(per_dtype, 3))).round().astype(int) // 8 * 8]
    measured = predict_many(HW, ops).time_s * rng.uniform(1.0, 1.3, size=len(ops))
    return list(zip(ops, measured.tolist(), strict=True))


def test_a_narrow_gemm_beside_square_fitted_ones_is_out_of_range_with_a_wider_band() -> None:
    """A 32 x 8192 x 2048 GEMM beside fitted GEMMs all >= 256 wide: its FLOPs, bytes and depth lie in the fitted
    ranges, its ``narrow`` (2 halvings below 128) does not (fitted 0 only): not in range, and its band is the
    beyond band, at least as wide as the in-range one."""
    cal = fit_calibration(HW, _square_gemms(3, 80))
    beyond = cal.report["beyond"]
    assert beyond["held_out_runs"] >= MIN_BEYOND_RUNS and beyond["factor"] >= 1.0
    inside, narrow = _gemm(1024, 1024, 1024), _gemm(32, 8192, 2048)
    batch = predict_calibrated(HW, [inside, narrow], cal)
    assert batch.in_calibrated_range is not None and batch.interval_s is not None
    assert batch.in_calibrated_range.tolist() == [True, False]
    width = np.log(batch.interval_s[:, 1] / batch.interval_s[:, 0])
    entry = cal.classes["gemm:fp16"]
    assert entry.beyond_log is not None
    # the beyond band, never narrower than the in-range (conformal) band; and since no fitted GEMM was narrow (the
    # shape number took one value), it also reaches the class's uncalibrated band around the model's time
    assert width[1] >= entry.beyond_log[1] - entry.beyond_log[0] - 1e-12 and width[1] >= width[0] - 1e-12
    assert entry.model_log is not None
    shift = float(np.log(predict_many(HW, [narrow]).time_s[0] / batch.time_s[1]))
    np.testing.assert_allclose(np.log(batch.interval_s[1] / batch.time_s[1]),
                               (min(entry.beyond_log[0], shift + entry.model_log[0]),
                                max(entry.beyond_log[1], shift + entry.model_log[1])))
    assert entry.beyond_log is not None and entry.interval_log is not None
    assert entry.beyond_log[0] <= entry.interval_log[0] and entry.beyond_log[1] >= entry.interval_log[1]
    assert cal.report["classes"]["gemm:fp16"]["beyond_ratio"] == pytest.approx(list(np.exp(entry.beyond_log)))
    # says why, in the prediction's notes and in the command line's text
    assert batch[0].notes == []
    assert batch[1].notes == ["calibration: beyond the fitted data, narrow 2 (fitted 0-0); the correction is "
                              "extrapolated and the interval is the wider beyond band"]
    text = render_cost(batch[1])
    assert "outside the calibrated range" in text and "narrow 2 (fitted 0-0)" in text
    assert "inside the calibrated range" in render_cost(batch[0])


def test_params_stored_before_the_beyond_band_load_without_one() -> None:
    """Params from before this field: an op beyond the data gets the in-range band, as when they were stored."""
    cal = fit_calibration(HW, _square_gemms(5, 40))
    params = cal.params
    for entry in [params["hardware_level"], *params["classes"].values()]:
        entry.pop("beyond_log_ratio")
        entry.pop("model_log_ratio")  # added later still: no uncalibrated band either
    old = Calibration.from_params(params)
    assert old.classes["gemm:fp16"].beyond_log is None
    narrow = predict_calibrated(HW, [_gemm(16 * 1024, 16, 4096)], old)
    band = old.classes["gemm:fp16"].interval_log
    assert band is not None and narrow.interval_s is not None
    np.testing.assert_allclose(np.log(narrow.interval_s[0] / narrow.time_s[0]), band)
