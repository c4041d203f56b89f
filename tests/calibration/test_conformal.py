"""Split-conformal bands and the out-of-fold residuals they come from; bounded cross-validation."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from synthetic_ops import random_gemms, random_norms

import perfmodel
from perfmodel.calibration import Calibration, curve, fit_calibration, predict_calibrated
from perfmodel.calibration.bands import (
    LOG_BAND_LIMIT,
    MIN_CONFORMAL_RUNS,
    MIN_IN_RANGE_RUNS,
    conformal_band,
    in_range_residuals,
)
from perfmodel.calibration.distance import coordinates
from perfmodel.calibration.fit import cv_subset

HW = "nvidia-a100-sxm4-80gb"


def test_conformal_band_takes_the_finite_sample_ranks() -> None:
    r = np.arange(1.0, 100.0) / 100  # 99 residuals: ranks floor(0.1 * 100) = 10 and ceil(0.9 * 100) = 90
    # (the shipped unbiased ranks interpolate at 0.1 (n + 1) = 10 and 0.9 (n + 1) = 90: the same order statistics)
    np.testing.assert_allclose(conformal_band(r[::-1]) or (), (0.10, 0.90), rtol=1e-12)
    # 9 residuals: ranks 1 and 9, the extremes (a band of 8 of 10 gaps: >= 80 % for the next run)
    np.testing.assert_allclose(conformal_band(np.arange(9.0) * 0.1) or (), (0.0, 0.8))
    assert conformal_band(np.array([0.1, np.nan])) is None
    assert conformal_band(np.array([-1e9, 1e9])) == (-LOG_BAND_LIMIT, LOG_BAND_LIMIT)


def test_conformal_band_covers_eighty_percent_of_new_exchangeable_runs() -> None:
    rng = np.random.default_rng(0)
    inside = []
    for _ in range(400):
        held_out, new = rng.standard_t(3, size=40), rng.standard_t(3)
        band = conformal_band(held_out)
        assert band is not None
        inside.append(band[0] <= new <= band[1])
    assert 0.75 <= np.mean(inside) <= 0.9  # 0.8 in expectation (unbiased ranks; >= 0.8 rounded outward)


def test_cv_subset_keeps_whole_ops_up_to_the_cap() -> None:
    groups = np.repeat(np.arange(100), 7)  # 100 ops, 7 runs each
    kept = cv_subset(groups, 300, seed=1)
    assert kept.sum() <= 300 and kept.sum() >= 294
    for g in np.unique(groups[kept]):
        assert kept[groups == g].all()  # an op is held out whole or not at all
    assert cv_subset(groups, 10_000, seed=1).all()


def _measured(ops: list[dict[str, Any]], noise: float, rng: np.random.Generator) -> np.ndarray:
    """The model's time, 1.3x slower, times lognormal noise of ``noise`` (log sd): a known truth."""
    return np.asarray(perfmodel.predict_many(HW, ops).time_s) * 1.3 * np.exp(noise * rng.standard_normal(len(ops)))


def test_the_band_covers_about_eighty_percent_of_fresh_runs_with_known_noise() -> None:
    """End to end: fitted on 300 noisy GEMM runs (log sd 0.1), the 10-90 % interval holds 0.8 of fresh runs of new
    shapes from the same distribution (0.72-0.88 allowed for 400 draws); the band is about ±1.28 sd wide."""
    rng = np.random.default_rng(31)
    ops = random_gemms(300, rng)
    cal = fit_calibration(HW, list(zip(ops, _measured(ops, 0.1, rng).tolist(), strict=True)))
    fresh = random_gemms(400, rng)
    batch = predict_calibrated(HW, fresh, cal)
    assert batch.interval_s is not None
    measured = _measured(fresh, 0.1, rng)
    inside = (measured >= batch.interval_s[:, 0]) & (measured <= batch.interval_s[:, 1])
    assert 0.72 <= inside.mean() <= 0.88
    band = cal.classes["gemm:fp16"].interval_log
    assert band is not None and 0.18 <= band[1] - band[0] <= 0.36  # 2 x 1.28 x 0.1 = 0.26


def test_a_class_of_ten_runs_takes_its_own_band_not_the_device_pooled_one() -> None:
    """Ten exact-ish RMSNorm runs (log sd 0.01) beside noisy GEMMs (0.3): the norm's band is its own out-of-fold
    residuals' (conformal ranks exist from 9 held-out runs), not the pooled band the GEMMs' noise would set."""
    rng = np.random.default_rng(32)
    gemm_ops, norm_ops = random_gemms(120, rng), random_norms(10, rng)
    runs = list(zip(gemm_ops, _measured(gemm_ops, 0.3, rng).tolist(), strict=True)) + list(
        zip(norm_ops, _measured(norm_ops, 0.01, rng).tolist(), strict=True))
    cal = fit_calibration(HW, runs)
    norm, gemm = cal.classes["norm/rmsnorm:fp16"], cal.classes["gemm:fp16"]
    assert norm.source == "fitted" and norm.interval_log is not None and gemm.interval_log is not None
    assert norm.interval_log[1] - norm.interval_log[0] < 0.25 * (gemm.interval_log[1] - gemm.interval_log[0])
    assert MIN_CONFORMAL_RUNS == 9  # the smallest n with floor(0.1 (n + 1)) >= 1 and ceil(0.9 (n + 1)) <= n
    assert conformal_band(np.arange(8.0)) == (0.0, 7.0)  # below it the ranks clip to the extremes


def test_an_op_varying_a_shape_number_the_fit_never_varied_gets_the_uncalibrated_band_too() -> None:
    """RMSNorms fitted at one row length (4096) only: a 1024-wide one changes a shape number no fitted run changed,
    so its band reaches the class's uncalibrated band around the model's time (``model_log``); a fitted-width one
    keeps the class's own band. Stored and read back the same; params stored before it have none."""
    rng = np.random.default_rng(33)
    ops = random_norms(60, rng)
    rows = np.array([op["shape"][0] for op in ops], dtype=float)
    # the model misses by a size ramp (0.6x to 1.6x) the calibration learns: a narrow calibrated band, a wide
    # uncalibrated one
    miss = 0.5 * np.tanh(np.log2(rows) - 9.0)
    measured = np.asarray(perfmodel.predict_many(HW, ops).time_s) * np.exp(miss + 0.02 * rng.standard_normal(60))
    cal = fit_calibration(HW, list(zip(ops, measured.tolist(), strict=True)))
    entry = cal.classes["norm/rmsnorm:fp16"]
    assert entry.model_log is not None and entry.interval_log is not None and entry.beyond_log is not None
    assert entry.model_log[1] - entry.model_log[0] > 3 * (entry.beyond_log[1] - entry.beyond_log[0])
    wide, narrow = {"kind": "rmsnorm", "shape": [512, 4096], "dtype": "fp16"}, {
        "kind": "rmsnorm", "shape": [2048, 1024], "dtype": "fp16"}
    batch = predict_calibrated(HW, [wide, narrow], cal)
    model = np.asarray(perfmodel.predict_many(HW, [wide, narrow]).time_s)
    assert batch.interval_s is not None and batch.in_calibrated_range is not None
    assert batch.in_calibrated_range[0] and not batch.in_calibrated_range[1]
    low, high = model[1] * np.exp(entry.model_log[0]), model[1] * np.exp(entry.model_log[1])
    assert batch.interval_s[1, 0] <= low * (1 + 1e-9) and batch.interval_s[1, 1] >= high * (1 - 1e-9)
    # in range: the class's band, times the op's spread by its distance to the fitted ops (``distance``)
    spread = 1.0 if entry.distance is None else float(
        entry.distance.factor(coordinates(curve.features(perfmodel.predict_many(HW, [wide]))))[0])
    own = batch.time_s[0] * np.exp(np.array(entry.interval_log) * spread)
    np.testing.assert_allclose(batch.interval_s[0], own)
    back = Calibration.from_params(json.loads(json.dumps(cal.params, allow_nan=False)))
    np.testing.assert_array_equal(predict_calibrated(HW, [wide, narrow], back).interval_s, batch.interval_s)
    params = json.loads(json.dumps(cal.params, allow_nan=False))
    del params["classes"]["norm/rmsnorm:fp16"]["model_log_ratio"]
    assert Calibration.from_params(params).classes["norm/rmsnorm:fp16"].model_log is None


def test_the_in_range_band_leaves_out_runs_held_out_beyond_their_folds_data() -> None:
    """Mondrian split on what ``in_calibrated_range`` tells at prediction: runs held out beyond their fold's data
    (extrapolations, 3x the error here) do not widen the band of in-range ops; it keeps about 80 % of new in-range
    runs inside, where the band of all held-out runs holds nearly all of them."""
    rng = np.random.default_rng(5)
    inside_within, inside_all = [], []
    for _ in range(400):
        beyond = rng.random(40) < 0.3
        held_out = rng.normal(0.0, 0.1, 40) * np.where(beyond, 3.0, 1.0)
        new = rng.normal(0.0, 0.1)  # a new op inside the fitted data
        for band, inside in ((conformal_band(in_range_residuals(held_out, beyond)), inside_within),
                             (conformal_band(held_out), inside_all)):
            assert band is not None
            inside.append(band[0] <= new <= band[1])
    assert 0.74 <= np.mean(inside_within) <= 0.88
    assert np.mean(inside_all) > 0.9
    r = np.arange(10.0)
    beyond = np.arange(10) < 10 - MIN_IN_RANGE_RUNS  # exactly MIN_IN_RANGE_RUNS inside: only theirs count
    np.testing.assert_array_equal(np.isnan(in_range_residuals(r, beyond)), beyond)
    beyond[10 - MIN_IN_RANGE_RUNS] = True  # one short: every held-out run counts
    np.testing.assert_array_equal(in_range_residuals(r, beyond), r)
