"""A transferred class's band rescaled by the target's first runs (``calibration.target_band``).

The scale is the k normalised conformal scores (one per distinct op measured on the target) read at position
0.8 (k + 1) between two order statistics; below 4 distinct ops (no rank ⌈0.8 (k + 1)⌉ <= k) there is none and the
band is the uncalibrated model's, as before.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.calibration import Calibration, apply_calibration, fit_calibration, target_band
from perfmodel.calibration.target_band import conformal_scale, row_scales, scaled, scores, target_scales
from perfmodel.ops import make_op
from perfmodel.ops.base import FloatArray

SOURCE, TARGET = "nvidia-a100-sxm4-80gb", "nvidia-a40"


def test_the_conformal_position_and_its_smallest_k() -> None:
    z = np.arange(1.0, 11.0)  # 1..10: the score at position p is p itself
    assert conformal_scale(z) == pytest.approx(8.8)  # 0.8 * 11 = 8.8: 80 % of the way from the 8th to the 9th
    assert conformal_scale(z[:4]) == pytest.approx(4.0)  # 0.8 * 5 = 4: the largest, exactly
    assert conformal_scale(z[:5]) == pytest.approx(4.8)  # was the 5th (⌈4.8⌉) before calib13
    assert conformal_scale(z[:3]) is None  # ⌈3.2⌉ = 4 > 3: no rank, today's band
    assert conformal_scale(np.arange(1.0, 21.0)) == pytest.approx(16.8)
    assert conformal_scale(np.array([1.0, 2.0, math.nan, 3.0])) is None  # nan is not a score
    # unsorted scores: the order statistics, not the given order (0.8 * 6 = 4.8 between 0.5 and 4.0)
    assert conformal_scale(np.array([4.0, 0.1, 0.5, 0.3, 0.2])) == pytest.approx(0.5 + 0.8 * 3.5)


def test_repeated_runs_of_one_op_are_one_score() -> None:
    band = np.tile([-0.5, 0.5], (5, 1))  # centre 0, half-width 0.5
    residual = np.array([0.1, 0.2, 0.3, -1.0, 0.25])
    groups = np.array([7, 7, 7, 3, 9])
    np.testing.assert_allclose(scores(residual, band, groups), [2.0, 0.4, 0.5])  # op 3, op 7 (median), op 9
    # a degenerate band gives nothing to measure against
    assert scores(np.array([0.1]), np.array([[0.2, 0.2]]), np.array([0])).size == 0


def test_scaled_keeps_the_centre_and_multiplies_the_half_width() -> None:
    band = np.array([[-0.2, 0.6], [0.1, 0.3]])
    np.testing.assert_allclose(scaled(band, 2.0), [[-0.6, 1.0], [0.0, 0.4]])
    assert scaled(band, None) is band


@pytest.mark.parametrize("spread", [0.3, 3.0])
def test_coverage_of_fresh_ops_is_the_conformal_level_whatever_the_device_spread(spread: float) -> None:
    """Scores of a device whose residuals are ``spread`` times the band's half-width (too wide a band, too narrow):
    over many draws of k first ops, the rescaled band holds 0.8 of fresh ops at every k, where the unscaled one holds
    0.26 or 1.00. The ⌈0.8 (k + 1)⌉-th score (the rule before calib13) gives 0.83 / 0.82 / 0.81 at k = 5 / 10 / 20,
    the plain 80 % quantile of the k scores 0.70-0.77, the 90 % one 0.78-0.86: the test fails on each."""
    rng = np.random.default_rng(5)
    fresh = np.abs(rng.standard_normal(20000)) * spread
    for k in (5, 10, 20):
        covered = []
        for _ in range(3000):
            s = conformal_scale(np.abs(rng.standard_normal(k)) * spread)
            assert s is not None
            covered.append(float((fresh <= s).mean()))
        assert np.mean(covered) == pytest.approx(0.8, abs=0.008)
    assert (fresh <= 1.0).mean() == pytest.approx(0.26 if spread == 3.0 else 0.999, abs=0.02)


@pytest.fixture(scope="module")
def source() -> Calibration:
    rng = np.random.default_rng(3)
    dims = np.round(2 ** rng.uniform(7, 13, size=(40, 3))).astype(int)
    ops = [{"kind": "matmul", "m": int(m), "n": int(n), "k": int(k), "dtype": "fp16"} for m, n, k in dims]
    model = perfmodel.predict_many(SOURCE, ops).time_s
    return fit_calibration(SOURCE, list(zip(ops, (model * 1.2).tolist(), strict=True)))


def softmaxes(n: int) -> list[dict[str, Any]]:
    return [{"kind": "softmax", "shape": [2 ** (4 + i % 9), 1024 * (1 + i // 9)], "dtype": "fp16"} for i in range(n)]


def test_the_first_runs_on_the_target_rescale_the_transferred_band(source: Calibration) -> None:
    """Five softmaxes measured on the A40 at 3x and 1/3x the model's time (far outside the uncalibrated band): the
    transferred GEMM class keeps the model's time, and its band becomes the uncalibrated one about its centre
    times the fifth (largest) of the five scores; the JSON round trip keeps it."""
    ops = softmaxes(5)
    model_s = perfmodel.predict_many(TARGET, ops).time_s
    factor = np.array([3.0, 1 / 3, 3.0, 1 / 3, 2.0])
    seeded = fit_calibration(TARGET, list(zip(ops, (model_s * factor).tolist(), strict=True)), base=source)
    assert seeded.classes["gemm:fp16"].source == "transferred"
    band = np.log(perfmodel.predict_many(TARGET, ops).uncalibrated_interval_s / model_s[:, None])  # type: ignore
    centre, half = band.mean(axis=1), (band[:, 1] - band[:, 0]) / 2
    z = np.abs(np.log(factor) - centre) / half
    assert seeded.transfer_scale is not None and seeded.transfer_scale == pytest.approx(z.max())
    assert seeded.transfer_scale > 1.5
    assert seeded.report["transfer_scale"]["scale"] == seeded.transfer_scale
    gemm = [{"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp16"},
            {"kind": "matmul", "m": 64, "n": 4096, "k": 512, "dtype": "fp16"}]
    model = perfmodel.predict_many(TARGET, gemm)
    got = apply_calibration(seeded, model)
    np.testing.assert_allclose(got.time_s, model.time_s, rtol=1e-12)  # weight 0: the model's time
    assert got.interval_s is not None and model.uncalibrated_interval_s is not None
    uncal = np.log(model.uncalibrated_interval_s / model.time_s[:, None])
    want = uncal.mean(axis=1, keepdims=True) + seeded.transfer_scale * (uncal - uncal.mean(axis=1, keepdims=True))
    want = np.column_stack([np.minimum(want[:, 0], 0.0), np.maximum(want[:, 1], 0.0)])
    np.testing.assert_allclose(np.log(got.interval_s / got.time_s[:, None]), want, rtol=1e-9, atol=1e-12)
    again = Calibration.from_params(json.loads(json.dumps(seeded.params)))
    assert again.transfer_scale == seeded.transfer_scale
    np.testing.assert_allclose(apply_calibration(again, model).interval_s, got.interval_s)  # type: ignore[arg-type]


def test_fewer_than_four_distinct_ops_keep_the_uncalibrated_band(source: Calibration) -> None:
    """Twelve runs of three ops (one score each): no rank, so the transferred band is the model's own, as with no
    run at all; a stored scale that is not a positive number is refused."""
    ops = softmaxes(3) * 4
    model_s = perfmodel.predict_many(TARGET, ops).time_s
    seeded = fit_calibration(TARGET, list(zip(ops, (model_s * 3.0).tolist(), strict=True)), base=source)
    assert seeded.transfer_scale is None
    gemm = [{"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp16"}]
    model = perfmodel.predict_many(TARGET, gemm)
    got = apply_calibration(seeded, model)
    assert got.interval_s is not None and model.uncalibrated_interval_s is not None
    np.testing.assert_allclose(got.interval_s, model.uncalibrated_interval_s, rtol=1e-12)
    params = seeded.params
    for bad in (-1.0, 0.0, "2", math.inf):
        with pytest.raises(ValueError, match="transfer_scale"):
            Calibration.from_params({**params, "transfer_scale": bad})


def elementwises(n: int) -> list[dict[str, Any]]:
    return [{"kind": "elementwise", "shape": [2 ** (12 + i), 256], "dtype": "fp16", "inputs": 2, "outputs": 1}
            for i in range(n)]


def test_a_band_class_with_four_ops_of_its_own_gets_its_own_scale(source: Calibration) -> None:
    """Four elementwise ops measured at 3x and 1/3x the model (far outside their band) and four softmaxes at the
    model's time (about the centre): elementwise gets the largest of its own four scores (⌈0.8 x 5⌉ = 4th), softmax
    the largest of its four, and a class with no run here (the transferred GEMM) the device-wide rank of all eight
    (position 0.8 x 9 = 7.2); each transferred row's band is scaled by its own class's scale, and the JSON round trip
    keeps the per-class scales."""
    ew, sm = elementwises(4), softmaxes(4)
    ops = ew + sm
    model_s = perfmodel.predict_many(TARGET, ops).time_s
    factor = np.array([3.0, 1 / 3, 3.0, 1 / 3, 1.0, 1.0, 1.0, 1.0])
    seeded = fit_calibration(TARGET, list(zip(ops, (model_s * factor).tolist(), strict=True)), base=source)
    band = np.log(perfmodel.predict_many(TARGET, ops).uncalibrated_interval_s / model_s[:, None])  # type: ignore
    z = np.abs(np.log(factor) - band.mean(axis=1)) / ((band[:, 1] - band[:, 0]) / 2)
    ordered = np.sort(z)  # eight scores: position 0.8 x 9 = 7.2, a fifth of the way from the 7th to the 8th
    assert seeded.transfer_scale == pytest.approx(ordered[6] + 0.2 * (ordered[7] - ordered[6]))
    assert seeded.transfer_class_scales == pytest.approx({"elementwise": z[:4].max(), "softmax": z[4:].max()})
    assert seeded.transfer_class_scales["elementwise"] > 1.5 > seeded.transfer_class_scales["softmax"]
    assert seeded.report["transfer_scale"]["classes"] == seeded.transfer_class_scales
    gemm = [{"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp16"}]
    model = perfmodel.predict_many(TARGET, gemm)
    got = apply_calibration(seeded, model)
    assert got.interval_s is not None and model.uncalibrated_interval_s is not None
    uncal = np.log(model.uncalibrated_interval_s / model.time_s[:, None])
    want = scaled(uncal, seeded.transfer_scale)
    np.testing.assert_allclose(np.log(got.interval_s / got.time_s[:, None]),
                               [[min(want[0, 0], 0.0), max(want[0, 1], 0.0)]], rtol=1e-9, atol=1e-12)
    again = Calibration.from_params(json.loads(json.dumps(seeded.params)))
    assert again.transfer_class_scales == seeded.transfer_class_scales
    with pytest.raises(ValueError, match="transfer_class_scales"):
        Calibration.from_params({**seeded.params, "transfer_class_scales": {"softmax": -1.0}})
    with pytest.raises(ValueError, match="transfer_class_scales"):
        Calibration.from_params({**seeded.params, "transfer_class_scales": [1.0]})


def test_rows_take_their_band_class_scale_else_the_device_scale() -> None:
    """``row_scales``: the class's own where measured, else the device's; no device scale, no scaling; a band
    scaled per row about each row's centre."""
    ops = [make_op(o) for o in (elementwises(1) + softmaxes(1)
                                + [{"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp16"}])]
    got = row_scales(ops, 0.7, {"elementwise": 2.0, "softmax": 0.5})
    assert got is not None
    np.testing.assert_allclose(got, np.array([2.0, 0.5, 0.7]))
    assert row_scales(ops, None, {"elementwise": 2.0}) is None
    band = np.array([[-0.2, 0.4], [-0.1, 0.1]])
    np.testing.assert_allclose(scaled(band, np.array([2.0, 0.5])), [[-0.5, 0.7], [-0.05, 0.05]])


def test_a_transferred_class_measured_here_takes_its_own_scale(source: Calibration) -> None:
    """Four GEMMs measured on the A40 at 3x and 1/3x the model (too few to fit: the class stays transferred) and
    six softmaxes at the model's time: a new GEMM's band is its uncalibrated band times the GEMMs' own scale (the
    largest of their four scores), wider than the device-wide one (the ten read at position 8.8)."""
    mm = [{"kind": "matmul", "m": 256 * (i + 1), "n": 2048, "k": 1024, "dtype": "fp16"} for i in range(4)]
    ops = mm + softmaxes(6)
    model_s = perfmodel.predict_many(TARGET, ops).time_s
    factor = np.array([3.0, 1 / 3, 2.5, 1 / 2.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    seeded = fit_calibration(TARGET, list(zip(ops, (model_s * factor).tolist(), strict=True)), base=source)
    assert seeded.classes["gemm:fp16"].source == "transferred"
    band = np.log(perfmodel.predict_many(TARGET, ops).uncalibrated_interval_s / model_s[:, None])  # type: ignore
    z = np.abs(np.log(factor) - band.mean(axis=1)) / ((band[:, 1] - band[:, 0]) / 2)
    assert seeded.transfer_class_scales["matmul"] == pytest.approx(z[:4].max())
    ordered = np.sort(z)  # ten scores: position 0.8 x 11 = 8.8, between the 8th and the 9th
    assert seeded.transfer_scale == pytest.approx(ordered[7] + 0.8 * (ordered[8] - ordered[7]))
    assert seeded.transfer_scale < z[:4].max()
    gemm = [{"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp16"}]
    model = perfmodel.predict_many(TARGET, gemm)
    got = apply_calibration(seeded, model)
    assert got.interval_s is not None and model.uncalibrated_interval_s is not None
    want = scaled(np.log(model.uncalibrated_interval_s / model.time_s[:, None]), seeded.transfer_class_scales["matmul"])
    np.testing.assert_allclose(np.log(got.interval_s / got.time_s[:, None]),
                               [[min(want[0, 0], 0.0), max(want[0, 1], 0.0)]], rtol=1e-9, atol=1e-12)


def _four_gemms_two_elementwise_two_softmax() -> tuple[list[Any], FloatArray, FloatArray, FloatArray]:
    """Eight runs on TARGET: four GEMMs at 3x, 1/3x, 2.5x and 1/2.5x the model, two elementwise ops and two softmaxes
    at the model's time; (ops, model s, measured / model, each run's score |log ratio − band centre| / half-width)."""
    mm = [{"kind": "matmul", "m": 256 * (i + 1), "n": 2048, "k": 1024, "dtype": "fp16"} for i in range(4)]
    ops = [make_op(o) for o in mm + elementwises(2) + softmaxes(2)]
    model_s = perfmodel.predict_many(TARGET, ops).time_s
    factor = np.array([3.0, 1 / 3, 2.5, 1 / 2.5, 1.0, 1.0, 1.0, 1.0])
    band = np.log(perfmodel.predict_many(TARGET, ops).uncalibrated_interval_s / model_s[:, None])  # type: ignore
    z = np.abs(np.log(factor) - band.mean(axis=1)) / ((band[:, 1] - band[:, 0]) / 2)
    return ops, model_s, factor, z


def test_classes_without_their_own_scale_take_the_rest_pooled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four GEMMs at 3x and 1/3x the model (a class scale of their own) and two elementwise ops and two softmaxes at
    the model's time: the classes without four ops take the rank of those four pooled (``REST_GROUP``: the largest
    of the four small scores), not of all eight (the GEMMs' largest)."""
    monkeypatch.setattr(target_band, "REST_GROUP", True)
    monkeypatch.setattr(target_band, "UNMEASURED_KEEP_PRIOR", False)
    ops, model_s, factor, z = _four_gemms_two_elementwise_two_softmax()
    scale, per_class = target_scales(ops, model_s, model_s * factor, np.arange(8))
    assert per_class == pytest.approx({"matmul": z[:4].max()})
    assert scale == pytest.approx(z[4:].max()) and z[4:].max() < np.sort(z)[7]


def test_a_class_never_measured_here_keeps_at_least_the_dev_set_band(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same eight runs: the classes measured here with fewer than four ops (elementwise, softmax) take the rest
    group's rank, stored as their own; a class with no run here (layer norm) takes that rank only where it is wider
    than the dev set's band (scale 1), since no run of it speaks for a narrower one (``UNMEASURED_KEEP_PRIOR``)."""
    monkeypatch.setattr(target_band, "REST_GROUP", True)
    monkeypatch.setattr(target_band, "UNMEASURED_KEEP_PRIOR", True)
    ops, model_s, factor, z = _four_gemms_two_elementwise_two_softmax()
    rest = z[4:].max()  # the four small scores' rank: a narrower band than the dev set's
    assert rest < 1.0
    scale, per_class = target_scales(ops, model_s, model_s * factor, np.arange(8))
    assert per_class == pytest.approx({"matmul": z[:4].max(), "elementwise": rest, "softmax": rest})
    assert scale == 1.0
    norm = make_op({"kind": "layernorm", "shape": [4096, 4096], "dtype": "fp16"})
    got = row_scales([*ops[3:6], norm], scale, per_class)
    assert got is not None
    np.testing.assert_allclose(got, [z[:4].max(), rest, rest, 1.0])
    # a rest rank wider than the dev set's band is kept for the unmeasured classes too
    wide, classes = target_band.unmeasured_prior(1.7, {"matmul": 0.4}, ["matmul", "softmax"])
    assert wide == 1.7 and classes == {"matmul": 0.4, "softmax": 1.7}
    narrow, classes = target_band.unmeasured_prior(0.6, {}, ["softmax", "softmax"])
    assert narrow == 1.0 and classes == {"softmax": 0.6}
