"""Local correction of the calibration: a kernel-choice bump the smooth curve cannot express is learnt
from nearby shapes and carried to unseen ones, nothing is corrected far from the data or where the
residuals are noise, and it survives JSON."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.calibration import Calibration, curve, fit_calibration, predict_calibrated
from perfmodel.calibration import local as local_module
from perfmodel.calibration.local import MIN_OPS, LocalCorrection, fit_local
from perfmodel.calibration.model import BORROWED_WEIGHT

HW = "nvidia-a100-sxm4-80gb"
KEY = "gemm:fp16"


def _gemms(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    sizes = np.round(2.0 ** rng.uniform(8.0, 13.0, size=(n, 3))).astype(int)
    return [{"kind": "matmul", "m": int(m), "n": int(n_), "k": int(k), "dtype": "fp16"} for m, n_, k in sizes]


def _bump(ops: list[dict[str, Any]]) -> np.ndarray:
    """log time factor: up to 60 % slower around 10^10.6 FLOPs (sd 0.25 decades): a library's worse
    kernel for one band of sizes, which is neither a monotone ramp nor a shape number."""
    log_flops = np.log10(perfmodel.predict_many(HW, ops).flops)
    out: np.ndarray = np.log(1.6) * np.exp(-0.5 * ((log_flops - 10.6) / 0.25) ** 2)
    return out


def _in_bump(ops: list[dict[str, Any]]) -> np.ndarray:
    out: np.ndarray = _bump(ops) > np.log(1.2)
    return out


def _bumped_times(ops: list[dict[str, Any]], rng: np.random.Generator) -> np.ndarray:
    """The model's time with the bump and 2 % noise."""
    noise = 0.02 * rng.standard_normal(len(ops))
    out: np.ndarray = perfmodel.predict_many(HW, ops).time_s * np.exp(_bump(ops) + noise)
    return out


def _split(seed: int) -> tuple[list[dict[str, Any]], np.ndarray, list[dict[str, Any]], np.ndarray]:
    rng = np.random.default_rng(seed)
    fit_ops, test_ops = _gemms(rng, 200), _gemms(rng, 100)
    return fit_ops, _bumped_times(fit_ops, rng), test_ops, _bumped_times(test_ops, rng)


def test_a_local_bump_is_learnt_and_carries_to_unseen_shapes() -> None:
    fit_ops, fit_s, test_ops, test_s = _split(seed=5)
    runs = list(zip(fit_ops, fit_s.tolist(), strict=True))
    with_local = fit_calibration(HW, runs, residual_trees=False)  # the local correction alone
    curve_only = fit_calibration(HW, runs, local_correction=False, residual_trees=False)
    report = with_local.report["classes"][KEY]["local"]
    assert report is not None and report["points"] == len(fit_ops)
    assert curve_only.report["classes"][KEY]["local"] is None
    error_local = np.abs(predict_calibrated(HW, test_ops, with_local).time_s / test_s - 1.0)
    error_curve = np.abs(predict_calibrated(HW, test_ops, curve_only).time_s / test_s - 1.0)
    bump = _in_bump(test_ops)
    assert bump.sum() >= 15
    assert np.median(error_curve[bump]) > 0.05  # the smooth curve follows the bump only in part ...
    assert np.median(error_local[bump]) < 0.6 * np.median(error_curve[bump])  # ... the correction does
    assert np.percentile(error_local, 90) < 0.7 * np.percentile(error_curve, 90)
    assert np.median(error_local) <= np.median(error_curve)  # and is no worse elsewhere


def test_far_from_the_measured_shapes_nothing_is_corrected() -> None:
    fit_ops, fit_s, _, _ = _split(seed=6)
    cal = fit_calibration(HW, list(zip(fit_ops, fit_s.tolist(), strict=True)))
    entry = cal.classes[KEY]
    assert entry.local is not None
    far = [{"kind": "matmul", "m": 65536, "n": 65536, "k": 65536, "dtype": "fp16"},  # 1000x the largest fitted
           {"kind": "matmul", "m": 16, "n": 16, "k": 16, "dtype": "fp16"}]
    f = curve.features(perfmodel.predict_many(HW, far))
    assert entry.local.log_factor(f) == pytest.approx([0.0, 0.0], abs=1e-6)


def test_noise_gets_no_correction() -> None:
    """Residuals with no neighbourhood structure: smoothing them cannot beat leaving them alone."""
    rng = np.random.default_rng(7)
    ops = _gemms(rng, 200)
    measured = perfmodel.predict_many(HW, ops).time_s * np.exp(0.08 * rng.standard_normal(len(ops)))
    cal = fit_calibration(HW, list(zip(ops, measured.tolist(), strict=True)))
    assert cal.classes[KEY].local is None
    assert cal.report["classes"][KEY]["local"] is None


@pytest.mark.parametrize(("distinct", "corrected"), [(MIN_OPS - 1, False), (40, True)])
def test_fit_local_needs_a_dozen_distinct_ops(distinct: int, corrected: bool) -> None:
    """Residuals that follow size smoothly, on each op twice: corrected only with enough distinct ops."""
    rng = np.random.default_rng(8)
    ops = _gemms(rng, distinct) * 2
    f = curve.features(perfmodel.predict_many(HW, ops))
    residuals = 0.3 * np.sin(2.0 * f.log10_flops)
    groups = np.tile(np.arange(distinct), 2)
    assert (fit_local(f, residuals, groups) is not None) == corrected


def test_local_correction_round_trips_and_old_params_load() -> None:
    fit_ops, fit_s, test_ops, _ = _split(seed=9)
    cal = fit_calibration(HW, list(zip(fit_ops, fit_s.tolist(), strict=True)))
    again = Calibration.from_params(cal.params)
    assert again.classes[KEY].local is not None
    np.testing.assert_allclose(predict_calibrated(HW, test_ops, again).time_s,
                               predict_calibrated(HW, test_ops, cal).time_s, rtol=1e-12)
    old = cal.params
    for entry in old["classes"].values():
        entry.pop("local")
    stored_before = Calibration.from_params(old)
    assert stored_before.classes[KEY].local is None


@pytest.mark.parametrize("broken", [
    {"points": [[1.0, 2.0]], "residuals": [0.1, 0.2], "runs": [1], "bandwidth": 0.1, "shrink": 1.0,
     "shape_scale": 0.3},
    {"points": [[1.0, 2.0]], "residuals": [0.1], "runs": [1], "bandwidth": 0.0, "shrink": 1.0, "shape_scale": 0.3},
    {"points": [[1.0, 2.0]], "residuals": [0.1], "runs": [1], "bandwidth": 0.1, "shrink": 1.0},
    {"points": "<script>", "residuals": [0.1], "runs": [1], "bandwidth": 0.1, "shrink": 1.0, "shape_scale": 0.3},
])
def test_a_malformed_local_correction_is_refused(broken: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="local correction"):
        LocalCorrection.from_json(broken)


def test_applying_in_blocks_gives_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    fit_ops, fit_s, test_ops, _ = _split(seed=10)
    cal = fit_calibration(HW, list(zip(fit_ops, fit_s.tolist(), strict=True)))
    whole = predict_calibrated(HW, test_ops, cal).time_s
    monkeypatch.setattr(local_module, "CHUNK_ROWS", 7)
    np.testing.assert_allclose(predict_calibrated(HW, test_ops, cal).time_s, whole, rtol=1e-12)


def test_a_class_with_very_many_ops_keeps_a_bounded_subset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_module, "MAX_POINTS", 50)
    rng = np.random.default_rng(12)
    ops = _gemms(rng, 120)
    f = curve.features(perfmodel.predict_many(HW, ops))
    correction = fit_local(f, 0.3 * np.sin(2.0 * f.log10_flops), np.arange(len(ops)))
    assert correction is not None
    assert len(correction.points) == 50 and correction.loo_residuals.size == len(ops)  # every run held out


def test_a_transferred_class_leaves_its_local_correction_behind() -> None:
    """Residuals are one device's kernel choices: a related device gets the curve, not the points."""
    fit_ops, fit_s, _, _ = _split(seed=13)
    source = fit_calibration(HW, list(zip(fit_ops, fit_s.tolist(), strict=True)))
    assert source.classes[KEY].local is not None
    seeded = fit_calibration("nvidia-a40", [], base=source)
    assert seeded.classes[KEY].source == "transferred"
    assert seeded.classes[KEY].local is None
    kept = fit_calibration(HW, [], base=source)  # the same device: an earlier calibration is kept whole
    assert kept.classes[KEY].local is not None


def test_a_variant_never_measured_gets_its_class_curve_without_the_points() -> None:
    """The class's points are other kernels' residuals: a variant unseen at fit time (LayerNorm on an
    RMSNorm-only fit) is predicted by the class's curve alone, borrowed (``BORROWED_WEIGHT`` of it),
    as a variant with too few runs is."""
    rng = np.random.default_rng(14)
    rows = [int(r) for r in np.round(2.0 ** rng.uniform(4.0, 14.0, 60))]
    ops = [{"kind": "rmsnorm", "shape": [r, 4096], "dtype": "fp16"} for r in rows]
    batch = perfmodel.predict_many(HW, ops)
    bump = np.log(1.5) * np.exp(-0.5 * ((np.log10(batch.compulsory_bytes) - 7.0) / 0.3) ** 2)
    cal = fit_calibration(HW, list(zip(ops, (batch.time_s * np.exp(bump)).tolist(), strict=True)))
    assert cal.classes["norm/rmsnorm:fp16"].local is not None or cal.classes["norm:fp16"].local is not None
    unseen = [{"kind": "layernorm", "shape": [r, 4096], "dtype": "fp16"} for r in (300, 1000, 3000)]
    assert "norm/layernorm:fp16" not in cal.classes
    got = predict_calibrated(HW, unseen, cal).time_s
    parent = cal.classes["norm:fp16"]
    assert parent.shape_range is not None
    f = curve.clip_shape(curve.features(perfmodel.predict_many(HW, unseen)), *map(np.array, parent.shape_range))
    np.testing.assert_allclose(got, curve.time_s(curve.share(parent.theta, BORROWED_WEIGHT), f), rtol=1e-9)


def test_one_pass_residuals_match_their_definitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of ops left out of the points: residual less the correction over every point; every run's fold
    residual: less the correction smoothed over the other folds' points only (computed here directly)."""
    monkeypatch.setattr(local_module, "MAX_POINTS", 50)
    monkeypatch.setattr(local_module, "CHUNK_ROWS", 13)
    rng = np.random.default_rng(14)
    distinct = _gemms(rng, 120)
    op_of_run = np.concatenate([np.arange(120), rng.integers(0, 120, 60)])  # repeats: weighed once per distinct op
    ops = [distinct[int(i)] for i in op_of_run]
    f = curve.features(perfmodel.predict_many(HW, ops))
    residuals = 0.3 * np.sin(2.0 * f.log10_flops) + 0.01 * rng.standard_normal(len(ops))
    fold = op_of_run % 3
    correction = fit_local(f, residuals, op_of_run, fold=fold)
    assert correction is not None
    x = local_module.coordinates(f, correction.shape_scale)
    point_of = {tuple(p): i for i, p in enumerate(correction.points)}
    is_point = np.array([tuple(row) in point_of for row in x])
    assert len(correction.points) == 50
    weight = np.exp(-0.5 * ((x[:, None, :] - correction.points[None]) ** 2).sum(axis=2)
                    / correction.bandwidth ** 2) * correction.runs
    every = residuals - weight @ correction.residuals / (correction.shrink + weight.sum(axis=1))
    # the fit's pass runs in float32 (centred coordinates): within 1e-5 in log time of the float64 definition
    np.testing.assert_allclose(correction.loo_residuals[~is_point], every[~is_point], rtol=0, atol=1e-5)
    point_fold = np.array([fold[int(np.flatnonzero((x == p).all(axis=1))[0])] for p in correction.points])
    weight[fold[:, None] == point_fold[None, :]] = 0.0
    by_fold = residuals - weight @ correction.residuals / (correction.shrink + weight.sum(axis=1))
    np.testing.assert_allclose(correction.fold_residuals, by_fold, rtol=0, atol=1e-5)


def test_compiled_calibration_equals_numpy_up_to_round_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """``predict_calibrated`` with the compiled kernels loaded (the local correction's smoother and the distance
    band's nearest point: ``near_jit``; the trees' walk) against the numpy path (``PERFMODEL_NO_JIT``)."""
    from perfmodel.search import gemm_kernel

    fit_ops, fit_s, test_ops, _ = _split(seed=5)
    cal = fit_calibration(HW, list(zip(fit_ops, fit_s.tolist(), strict=True)))
    assert cal.classes[KEY].local is not None and cal.classes[KEY].distance is not None
    ops = [*test_ops, {"kind": "matmul", "m": 1, "n": 8192, "k": 8192, "dtype": "fp16"}]
    assert gemm_kernel.load()
    fast = predict_calibrated(HW, ops, cal)
    monkeypatch.setenv("PERFMODEL_NO_JIT", "1")
    slow = predict_calibrated(HW, ops, cal)
    np.testing.assert_allclose(fast.time_s, slow.time_s, rtol=1e-12)
    assert fast.interval_s is not None and slow.interval_s is not None
    np.testing.assert_allclose(fast.interval_s, slow.interval_s, rtol=1e-12)
    assert fast.in_calibrated_range is not None and slow.in_calibrated_range is not None
    assert (fast.in_calibrated_range == slow.in_calibrated_range).all() and fast.in_calibrated_range.any()
    assert fast.notes == slow.notes and fast.notes
