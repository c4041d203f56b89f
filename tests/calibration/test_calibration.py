"""Calibration: recovery of a known efficiency curve, robustness, fallbacks, CV, intervals, transfer.

Synthetic runs are made from the calibration form itself (``curve.time_s``) with known
parameters on the model's own breakdown, so the true time of every op is known exactly.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.calibration import Calibration, apply_calibration, curve, fit_calibration, predict_calibrated
from perfmodel.calibration import model as calibration_model
from perfmodel.calibration.classes import class_keys
from perfmodel.calibration.model import BORROWED_WEIGHT, FORMAT, TRANSFER_WEIGHT

HW = "nvidia-a100-sxm4-80gb"
# true form: floor 1.5x the model's; GEMMs reach 1/e^0.15 = 86 % of the model's speed when large and
# 1/e^0.75 = 47 % when small (ramp centred on 10^9 FLOPs); memory-bound ops 90 % large, 55 % small
TRUE = curve.from_named({
    "log_overhead_scale": float(np.log(1.5)), "compute_a": 0.15, "compute_b": 0.6, "compute_x0_log10": 9.0,
    "compute_log_width": float(np.log(0.4)), "memory_a": 0.1, "memory_b": 0.5, "memory_x0_log10": 6.5,
    "memory_log_width": float(np.log(0.5)),
})


def gemms(n: int, rng: np.random.Generator, lo: float = 6, hi: float = 13) -> list[dict[str, Any]]:
    """GEMMs with log2 m, n, k uniform in [lo, hi]."""
    dims = np.round(2 ** rng.uniform(lo, hi, size=(n, 3))).astype(int)
    return [{"kind": "matmul", "m": int(m), "n": int(nn), "k": int(k), "dtype": "fp16"} for m, nn, k in dims]


def norms(n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    rows = np.round(2 ** rng.uniform(0, 14, size=n)).astype(int)
    cols = rng.choice([1024, 4096, 8192], size=n)
    return [{"kind": "rmsnorm", "shape": [int(r), int(c)], "dtype": "fp16"} for r, c in zip(rows, cols, strict=True)]


def true_times(ops: list[dict[str, Any]], theta: np.ndarray = TRUE) -> np.ndarray:
    return curve.time_s(theta, curve.features(perfmodel.predict_many(HW, ops)))


def synthetic(n_gemm: int = 120, n_norm: int = 80, noise: float = 0.0, seed: int = 1) -> list[tuple[Any, float]]:
    rng = np.random.default_rng(seed)
    ops = gemms(n_gemm, rng) + norms(n_norm, rng)
    times = true_times(ops) * np.exp(noise * rng.standard_normal(len(ops)))
    return list(zip(ops, times.tolist(), strict=True))


@pytest.fixture(scope="module")
def clean() -> Calibration:
    return fit_calibration(HW, synthetic())


def test_golden_recovery_of_a_known_curve(clean: Calibration) -> None:
    rng = np.random.default_rng(7)
    fresh = gemms(100, rng) + norms(60, rng)
    predicted = predict_calibrated(HW, fresh, clean).time_s
    error = np.abs(predicted / true_times(fresh) - 1)
    assert np.median(error) < 0.01 and np.percentile(error, 90) < 0.03
    gemm = clean.classes["gemm:fp16"]
    assert gemm.source == "fitted"
    # the large-GEMM efficiency and the floor scale are recovered
    assert np.exp(-gemm.theta[1]) == pytest.approx(np.exp(-TRUE[1]), rel=0.03)
    assert np.exp(gemm.theta[0]) == pytest.approx(1.5, rel=0.1)
    # and the uncalibrated model was really off (the test can fail)
    raw = perfmodel.predict_many(HW, fresh).time_s
    assert np.median(np.abs(raw / true_times(fresh) - 1)) > 0.2


def test_outliers_do_not_move_the_fit(clean: Calibration) -> None:
    runs = synthetic()
    rng = np.random.default_rng(3)
    slow = rng.choice(len(runs), size=len(runs) // 10, replace=False)
    dirty = [(op, t * 5.0 if i in set(slow.tolist()) else t) for i, (op, t) in enumerate(runs)]
    robust = fit_calibration(HW, dirty)
    fresh = gemms(80, np.random.default_rng(11)) + norms(40, np.random.default_rng(12))
    a = predict_calibrated(HW, fresh, robust).time_s
    b = predict_calibrated(HW, fresh, clean).time_s
    assert np.median(np.abs(a / b - 1)) < 0.03
    assert np.median(np.abs(a / true_times(fresh) - 1)) < 0.03


def test_fallbacks_are_reported() -> None:
    rng = np.random.default_rng(5)
    few_norms = norms(3, rng)
    ops = gemms(30, rng) + few_norms
    runs = list(zip(ops, true_times(ops).tolist(), strict=True))
    cal = fit_calibration(HW, runs)
    classes = cal.report["classes"]
    assert classes["gemm:fp16"]["source"] == "fitted"
    assert classes["norm/rmsnorm:fp16"]["source"] == "hardware"
    assert classes["norm/rmsnorm:fp16"]["runs"] == 3
    assert classes["norm/rmsnorm:fp16"]["weight"] == pytest.approx(BORROWED_WEIGHT)  # fitted on other kernels
    assert cal.report["hardware_level"]["source"] == "fitted"
    # an op class with no runs at all uses the device-level fit
    assert cal.entry("softmax:fp16").source == "fitted" and cal.report["other_classes"] == "fitted"
    assert cal.entry("softmax:fp16").weight == pytest.approx(BORROWED_WEIGHT) and cal.entry("gemm:fp16").weight == 1.0

    tiny = fit_calibration(HW, runs[:3])  # three runs: nothing to fit, not even the device level
    assert tiny.report["classes"]["gemm:fp16"]["source"] == "defaults"
    assert tiny.hardware_level.source == "defaults"
    empty = fit_calibration(HW, [])
    assert empty.report["classes"] == {} and empty.report["other_classes"] == "defaults"
    batch = perfmodel.predict_many(HW, ops)
    same = apply_calibration(empty, batch)
    np.testing.assert_allclose(same.time_s, batch.time_s, rtol=1e-12)
    assert not same.in_calibrated_range.any()  # type: ignore[union-attr]
    assert same[0].interval_s is None


def test_cross_validation_numbers_are_present(clean: Calibration) -> None:
    gemm = clean.report["classes"]["gemm:fp16"]
    assert gemm["folds"] == 5 and gemm["runs"] == 120
    for part in ("in_sample", "cv", "uncalibrated"):
        assert np.isfinite(gemm[part]["median_abs_pct"]) and np.isfinite(gemm[part]["p90_abs_pct"])
    assert gemm["cv"]["median_abs_pct"] < 2.0 < gemm["uncalibrated"]["median_abs_pct"]
    assert gemm["size_range"]["log10_flops"][0] < gemm["size_range"]["log10_flops"][1]


def test_interval_covers_about_80_percent_of_noisy_runs() -> None:
    noise = 0.15
    cal = fit_calibration(HW, synthetic(200, 150, noise=noise, seed=2))
    rng = np.random.default_rng(9)
    fresh = gemms(300, rng) + norms(200, rng)
    measured = true_times(fresh) * np.exp(noise * rng.standard_normal(len(fresh)))
    batch = predict_calibrated(HW, fresh, cal)
    assert batch.interval_s is not None
    inside = (measured >= batch.interval_s[:, 0]) & (measured <= batch.interval_s[:, 1])
    assert 0.7 <= inside.mean() <= 0.9
    # the band is about the noise's 10-90 % width: 2 x 1.28 sigma in log time
    width = np.log(batch.interval_s[:, 1] / batch.interval_s[:, 0])
    assert np.median(width) == pytest.approx(2 * 1.2816 * noise, rel=0.25)


def test_in_calibrated_range(clean: Calibration) -> None:
    inside = synthetic()[0][0]  # a fitted GEMM: its size and every shape number inside the fitted ranges
    far = {"kind": "matmul", "m": 131072, "n": 131072, "k": 65536, "dtype": "fp16"}
    tiny = {"kind": "matmul", "m": 2, "n": 2, "k": 2, "dtype": "fp16"}
    unseen = {"kind": "softmax", "shape": [1024, 1024], "dtype": "fp16"}
    batch = predict_calibrated(HW, [inside, far, tiny, unseen], clean)
    assert batch.in_calibrated_range is not None
    assert batch.in_calibrated_range.tolist() == [True, False, False, False]
    assert [c.in_calibrated_range for c in batch] == [True, False, False, False]


def test_params_round_trip_through_json(clean: Calibration) -> None:
    text = json.dumps(clean.params, allow_nan=False)
    back = Calibration.from_params(json.loads(text))
    assert back.hardware_id == HW and back.params == clean.params
    ops = gemms(20, np.random.default_rng(4)) + norms(20, np.random.default_rng(4))
    a, b = predict_calibrated(HW, ops, clean), predict_calibrated(HW, ops, back)
    np.testing.assert_array_equal(a.time_s, b.time_s)
    np.testing.assert_array_equal(a.interval_s, b.interval_s)
    assert back.report["classes"]["gemm:fp16"]["cv"] == clean.report["classes"]["gemm:fp16"]["cv"]
    with pytest.raises(ValueError, match="format"):
        Calibration.from_params({**clean.params, "format": FORMAT + 1})


def test_transfer_is_marked_until_the_target_has_data(clean: Calibration, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibration_model, "TRANSFER_WEIGHT", 0.4)  # a share of the correction, to see it carry
    seeded = fit_calibration("nvidia-a40", [], base=clean)
    assert seeded.hardware_id == "nvidia-a40"
    gemm = seeded.report["classes"]["gemm:fp16"]
    assert gemm["source"] == "transferred" and gemm["transferred_from"] == HW
    assert seeded.hardware_level.source == "transferred"
    batch = predict_calibrated("nvidia-a40", [{"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp16"}],
                               seeded)
    assert batch.in_calibrated_range is not None and not batch.in_calibrated_range[0]
    raw = perfmodel.predict_many("nvidia-a40", batch.ops)
    assert batch.time_s[0] > raw.time_s[0]  # the A100's slower-than-model correction carries over
    # with its own GEMM runs the A40 fits GEMMs itself; norms stay transferred
    rng = np.random.default_rng(8)
    ops = gemms(30, rng)
    a40 = [(op, t) for op, t in zip(ops, curve.time_s(TRUE, curve.features(
        perfmodel.predict_many("nvidia-a40", ops))).tolist(), strict=True)]
    own = fit_calibration("nvidia-a40", a40, base=clean)
    assert own.report["classes"]["gemm:fp16"]["source"] == "fitted"
    assert own.report["classes"]["norm/rmsnorm:fp16"]["source"] == "transferred"
    with pytest.raises(ValueError, match="same vendor"):
        fit_calibration("amd-mi210", [], base=clean)
    with pytest.raises(ValueError, match="calibration for"):
        apply_calibration(clean, perfmodel.predict_many("nvidia-a40", ops))


def test_share_scales_the_log_correction_exactly() -> None:
    rng = np.random.default_rng(21)
    f = curve.features(perfmodel.predict_many(HW, gemms(40, rng) + norms(20, rng)))
    theta = TRUE.copy()
    theta[curve.N_CURVE:] = 0.2  # shape coefficients scale too
    for weight in (0.0, 0.3, 1.0):
        half = curve.share(theta, weight)
        np.testing.assert_allclose(curve.log_factor(half, f), weight * curve.log_factor(theta, f), atol=1e-12)
        np.testing.assert_allclose(curve.overhead_s(half, f), np.exp(weight * theta[0]) * f.overhead_s)
        assert half[3] == theta[3] and half[4] == theta[4]  # ramp centre and width kept
    np.testing.assert_array_equal(curve.share(theta, 0.0)[[0, 1, 2, 5, 6]], 0.0)


def test_the_shipped_transfer_weight_predicts_the_model_in_its_uncalibrated_band(clean: Calibration) -> None:
    """``TRANSFER_WEIGHT`` is 0 (every weight above 0 was worse than no transfer on one of the eight measured
    transfers): a transferred class predicts what the model does, with the model's own interval."""
    assert TRANSFER_WEIGHT == 0.0
    seeded = fit_calibration("nvidia-a40", [], base=clean)
    assert seeded.classes["gemm:fp16"].source == "transferred" and seeded.classes["gemm:fp16"].weight == 0.0
    ops = gemms(30, np.random.default_rng(23)) + norms(20, np.random.default_rng(23))
    model = perfmodel.predict_many("nvidia-a40", ops)
    got = apply_calibration(seeded, model)
    np.testing.assert_allclose(got.time_s, model.time_s, rtol=1e-12)
    assert got.interval_s is not None and model.uncalibrated_interval_s is not None
    # nothing measured on the A40: the interval is the model's own (its class's leave-one-device-out band)
    np.testing.assert_allclose(got.interval_s, model.uncalibrated_interval_s, rtol=1e-12)
    gemm, norm = got.interval_s[0] / got.time_s[0], got.interval_s[-1] / got.time_s[-1]
    assert not np.allclose(gemm, norm)  # per op class, not one band for all

def test_a_transferred_class_takes_part_of_the_correction_and_the_uncalibrated_band(
        clean: Calibration, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernel choices differ between devices: a class carried from a related one gets ``TRANSFER_WEIGHT`` of
    its correction (a share > 0 set here: the shipped one is 0), and as its interval the uncalibrated model's band
    around the model's time, stretched to hold the prediction."""
    weight = 0.4
    monkeypatch.setattr(calibration_model, "TRANSFER_WEIGHT", weight)
    seeded = fit_calibration("nvidia-a40", [], base=clean)
    entry = seeded.classes["gemm:fp16"]
    assert entry.weight == pytest.approx(weight)
    assert seeded.report["classes"]["gemm:fp16"]["weight"] == pytest.approx(weight)
    ops = gemms(30, np.random.default_rng(22)) + norms(20, np.random.default_rng(22))
    model = perfmodel.predict_many("nvidia-a40", ops)
    got = apply_calibration(seeded, model)
    full = curve.time_s(np.array([seeded.entry(k).theta for k in class_keys(model.ops)]), curve.features(model))
    assert got.interval_s is not None
    low, high = np.minimum(model.time_s, full), np.maximum(model.time_s, full)
    assert np.all(got.time_s > low) and np.all(got.time_s < high)  # strictly between: TRUE corrects every op
    assert model.uncalibrated_interval_s is not None
    np.testing.assert_allclose(got.interval_s[:, 0], np.minimum(model.uncalibrated_interval_s[:, 0], got.time_s))
    np.testing.assert_allclose(got.interval_s[:, 1], np.maximum(model.uncalibrated_interval_s[:, 1], got.time_s))
    # log body time moves by exactly the weight's share of the source's log correction
    f = curve.features(model)
    np.testing.assert_allclose(curve.log_factor(curve.share(TRUE, weight), f),
                               weight * curve.log_factor(TRUE, f))
    # carried again to a third device: the weights multiply; the same device keeps its weight
    again = fit_calibration("nvidia-h100-sxm5-80gb", [], base=seeded)
    assert again.classes["gemm:fp16"].weight == pytest.approx(weight ** 2)
    assert fit_calibration("nvidia-a40", [], base=seeded).classes["gemm:fp16"].weight == pytest.approx(weight)
    # stored and read back; older params (no weight) apply all of the correction; nonsense is refused
    back = Calibration.from_params(json.loads(json.dumps(seeded.params, allow_nan=False)))
    np.testing.assert_array_equal(apply_calibration(back, model).time_s, got.time_s)
    params = json.loads(json.dumps(seeded.params))
    del params["classes"]["gemm:fp16"]["weight"]
    assert Calibration.from_params(params).classes["gemm:fp16"].weight == 1.0
    params["classes"]["gemm:fp16"]["weight"] = 2
    with pytest.raises(ValueError, match="weight"):
        Calibration.from_params(params)


def test_cost_batch_carries_interval_and_range(clean: Calibration) -> None:
    fitted = synthetic()
    ops = [fitted[0][0], fitted[-1][0]]  # a fitted GEMM and a fitted RMSNorm: inside the calibrated range
    batch = predict_calibrated(HW, ops, clean)
    cost = batch[0]
    assert cost.interval_s is not None and cost.interval_s[0] < cost.time_s < cost.interval_s[1]
    assert cost.in_calibrated_range is True
    rows = batch.to_dicts()
    assert rows[0]["interval_s"] == list(cost.interval_s) and rows[0]["in_calibrated_range"] is True
    assert rows[0] == cost.to_dict()
    columns = batch.to_columns([1, 0])
    assert columns["interval_s"].shape == (2, 2) and columns["in_calibrated_range"].tolist() == [True, True]
    plain = perfmodel.predict_many(HW, ops)
    assert plain[0].interval_s is None and plain.to_dicts()[0]["in_calibrated_range"] is None
    assert plain.to_columns()["interval_s"] is None


def test_bad_runs_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"runs\[1\]"):
        fit_calibration(HW, [({"kind": "matmul", "m": 8, "n": 8, "k": 8, "dtype": "fp16"}, 1e-5),
                             ({"kind": "matmul", "m": 8, "n": 8, "k": 8, "dtype": "fp16"}, 0.0)])
