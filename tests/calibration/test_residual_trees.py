"""Residual trees: the numpy boosting against known answers, their JSON, and the calibration stage they make."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.calibration import Calibration, curve, fit_calibration, predict_calibrated
from perfmodel.calibration.boost import ResidualTrees, op_fields
from perfmodel.calibration.trees import TreeEnsemble, fit_trees
from perfmodel.ops import make_op

HW = "nvidia-a100-sxm4-80gb"


def test_trees_find_a_step_no_smooth_curve_has() -> None:
    rng = np.random.default_rng(0)
    n = rng.choice([64.0, 96.0, 128.0], size=600)
    x = np.column_stack([np.log2(n), rng.uniform(0, 10, 600)])
    y = np.where(n == 96.0, 0.6, 0.0) + 0.01 * rng.standard_normal(600)
    trees = fit_trees(x[:400], y[:400])
    predicted = trees.predict(x[400:])
    assert np.abs(predicted - np.where(n[400:] == 96.0, 0.6, 0.0)).max() < 0.05


def test_missing_values_go_the_side_the_split_learnt() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 10, size=(500, 1))
    x[:100, 0] = np.nan  # a field this op kind does not have
    y = np.where(np.isnan(x[:, 0]), 1.0, np.where(x[:, 0] > 5, 1.0, 0.0))
    trees = fit_trees(x, y, rounds=100, learning_rate=0.2)
    assert trees.predict(np.array([[np.nan], [2.0], [8.0]])) == pytest.approx([1.0, 0.0, 1.0], abs=0.05)


def test_trees_json_round_trip_and_bad_trees_refused() -> None:
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 1, size=(200, 3))
    x[rng.random(200) < 0.2, 1] = np.nan
    trees = fit_trees(x, x[:, 0] * 2 + np.nan_to_num(x[:, 1]), rounds=20)
    again = TreeEnsemble.from_json(trees.to_json())
    np.testing.assert_array_equal(again.predict(x), trees.predict(x))
    bad = trees.to_json()
    bad["left"][0][0] = 10_000
    with pytest.raises(ValueError, match="child index"):
        TreeEnsemble.from_json(bad)
    bad = trees.to_json()
    bad["value"] = bad["value"][:-1]
    with pytest.raises(ValueError, match="trees x nodes"):
        TreeEnsemble.from_json(bad)


def test_op_fields_names_every_field_by_kind() -> None:
    fields = op_fields(make_op({"kind": "conv2d", "batch": 16, "in_channels": 64, "height": 56, "width": 56,
                                "out_channels": 128, "kernel_h": 3, "kernel_w": 3, "dtype": "fp16"}))
    assert fields["conv2d.batch"] == 4.0 and fields["conv2d.kernel_h"] == pytest.approx(np.log2(3))
    assert "conv2d.dtype" in fields and "conv2d.layout" in fields
    rows = op_fields(make_op({"kind": "layernorm", "shape": [8, 32, 4096], "dtype": "bf16"}))
    assert rows["layernorm.shape.last"] == 12.0 and rows["layernorm.shape.rows"] == 8.0


def _gemms(seed: int, count: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [{"kind": "matmul", "m": int(2 ** rng.uniform(7, 13)), "n": int(rng.choice([64, 96, 128, 192, 256])),
             "k": int(2 ** rng.uniform(7, 13)), "dtype": str(rng.choice(["fp16", "fp32"]))} for _ in range(count)]


def _measured(ops: list[dict[str, Any]]) -> np.ndarray:
    """The model's time, 1.8x where N = 96 (a library's odd kernel for one width, in both dtypes)."""
    model = perfmodel.predict_many(HW, ops).time_s
    out: np.ndarray = model * np.array([1.8 if op["n"] == 96 else 1.0 for op in ops])
    return out


@pytest.fixture(scope="module")
def odd_width() -> Calibration:
    ops = _gemms(3, 240)
    return fit_calibration(HW, list(zip(ops, _measured(ops).tolist(), strict=True)))


def test_a_per_width_kernel_switch_is_learnt_by_the_trees(odd_width: Calibration) -> None:
    report = odd_width.report["residual_trees"]
    assert report["kept"] is True
    assert report["cv"]["with_trees"]["p90_abs_pct"] < report["cv"]["without_trees"]["p90_abs_pct"]
    fresh = _gemms(4, 200)
    truth = _measured(fresh)
    with_trees = predict_calibrated(HW, fresh, odd_width).time_s
    without = predict_calibrated(HW, fresh, Calibration.from_params({**odd_width.params, "residual_trees": None}))
    error_with = np.mean(np.abs(with_trees / truth - 1))
    error_without = np.mean(np.abs(without.time_s / truth - 1))
    assert error_with < 0.75 * error_without


def test_stored_trees_predict_the_same(odd_width: Calibration) -> None:
    again = Calibration.from_params(odd_width.params)
    assert isinstance(again.residual_trees, ResidualTrees)
    ops = _gemms(5, 50)
    np.testing.assert_allclose(predict_calibrated(HW, ops, again).time_s,
                               predict_calibrated(HW, ops, odd_width).time_s, rtol=1e-12)
    bad = {**odd_width.params, "residual_trees": {**odd_width.params["residual_trees"], "weight": 2}}
    with pytest.raises(ValueError, match="weight"):
        Calibration.from_params(bad)


def test_an_exact_curve_keeps_no_trees() -> None:
    ops = _gemms(6, 150)
    truth = curve.time_s(curve.from_named({**curve.to_named(curve.IDENTITY), "compute_a": 0.2}),
                         curve.features(perfmodel.predict_many(HW, ops)))
    report = fit_calibration(HW, list(zip(ops, truth.tolist(), strict=True))).report["residual_trees"]
    assert report["kept"] is False and "above the calibration's" in report["reason"]


def test_too_few_ops_try_no_trees() -> None:
    ops = _gemms(7, 30)
    report = fit_calibration(HW, list(zip(ops, _measured(ops).tolist(), strict=True))).report["residual_trees"]
    assert report["kept"] is False and "fewer than" in report["reason"]


def test_lightgbm_export_predicts_as_lightgbm_in_chunks_and_after_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exported arrays give LightGBM's own predictions (nan rows included), walked in chunks or whole."""
    import json

    from perfmodel.calibration import trees as trees_module
    from perfmodel.calibration.trees import held_out_predict

    rng = np.random.default_rng(5)
    x = rng.normal(size=(600, 4))
    x[rng.random(600) < 0.3, 1] = np.nan
    y = np.where(x[:, 0] > 0.2, 0.5, -0.1) + np.where(np.isnan(x[:, 1]), 0.3, 0.0) + 0.05 * rng.normal(size=600)
    test = rng.normal(size=(300, 4))
    test[rng.random(300) < 0.5, 1] = np.nan
    test[rng.random(300) < 0.2, 2] = np.nan  # a column with no nan in training: LightGBM sends nan where 0 goes
    ensemble = fit_trees(x, y)
    expected = held_out_predict(x, y, test)
    np.testing.assert_allclose(ensemble.predict(test), expected, rtol=0, atol=1e-12)
    monkeypatch.setattr(trees_module, "PREDICT_ROWS", 7)
    np.testing.assert_allclose(ensemble.predict(test), expected, rtol=0, atol=1e-12)
    again = TreeEnsemble.from_json(json.loads(json.dumps(ensemble.to_json())))
    np.testing.assert_allclose(again.predict(test), expected, rtol=0, atol=1e-12)



@pytest.mark.parametrize("helps", [True, False])
def test_two_folds_decide_as_three(monkeypatch: pytest.MonkeyPatch, helps: bool) -> None:
    """The trees' 2-fold cross-validation (``boost.FOLDS``) keeps them where 3 folds do (a per-width kernel switch)
    and drops them where 3 folds do (an exact curve): the cheaper validation makes the same decision."""
    from perfmodel.calibration import boost, build

    ops = _gemms(3, 240)
    truth = _measured(ops) if helps else curve.time_s(
        curve.from_named({**curve.to_named(curve.IDENTITY), "compute_a": 0.2}),
        curve.features(perfmodel.predict_many(HW, ops)))
    runs = list(zip(ops, truth.tolist(), strict=True))
    reports = {}
    for folds in (2, 3):
        monkeypatch.setattr(boost, "FOLDS", folds)
        monkeypatch.setattr(build, "TREE_FOLDS", folds)
        reports[folds] = fit_calibration(HW, runs).report["residual_trees"]
    assert reports[2]["folds"] == 2 and reports[3]["folds"] == 3
    assert reports[2]["kept"] is reports[3]["kept"] is helps


def test_repeated_ops_are_predicted_once_each_as_row_by_row(odd_width: Calibration,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The calibrated path's per-op work runs once per distinct op (``distinct_ops``, ``once_per_op``): the same
    answers, to the bit, as every row on its own, including ops outside the fitted range (notes) and repeats."""
    from perfmodel.calibration import model

    rng = np.random.default_rng(6)
    pool = [*_gemms(7, 40), {"kind": "matmul", "m": 1, "n": 8192, "k": 8192, "dtype": "fp16"},
            {"kind": "rmsnorm", "shape": [64, 4096], "dtype": "fp16"}]
    ops = [make_op(dict(pool[int(i)])) for i in rng.integers(0, len(pool), 300)]  # equal ops, distinct objects
    distinct, rows = model.distinct_ops(ops)
    assert len(distinct) < 50 and all(distinct[j] == op for j, op in zip(rows.tolist(), ops, strict=True))
    dicts = [op.to_dict() for op in ops]  # predicted once per distinct dict, then taken (CostBatch.take)
    once = [predict_calibrated(HW, given, odd_width) for given in (ops, dicts)]
    monkeypatch.setattr(model, "distinct_ops", lambda given: (list(given), np.arange(len(given))))
    each = predict_calibrated(HW, ops, odd_width)
    for batch in once:
        for name in ("time_s", "overhead_s", "interval_s", "in_calibrated_range", "utilization"):
            np.testing.assert_array_equal(getattr(batch, name), getattr(each, name), err_msg=name)
        assert batch.notes == each.notes and (batch.bound == each.bound).all()
        assert batch.to_dicts() == each.to_dicts()  # every field, the schedule and the op's kind included
        assert list(batch.ops) == ops
    assert each.notes and each.in_calibrated_range is not None and not each.in_calibrated_range.all()


def test_once_per_op_keeps_every_row_when_an_ops_rows_differ() -> None:
    from perfmodel.calibration.model import once_per_op

    values = np.array([[1.0, np.nan], [2.0, 0.0], [1.0, np.nan], [2.0, 0.0]])
    kept, back = once_per_op(values, np.array([0, 1, 0, 1]))
    assert kept.tolist() == [0, 1] and back.tolist() == [0, 1, 0, 1]
    values[3, 1] = -0.0  # equal as a number, another bit pattern: kept apart
    kept, back = once_per_op(values, np.array([0, 1, 0, 1]))
    assert kept.tolist() == [0, 1, 2, 3] and back.tolist() == [0, 1, 2, 3]


def test_the_compiled_walk_equals_the_numpy_walk_to_the_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """``trees_jit.walk`` (where the compiled kernels are loaded) against the numpy walk: trees with missing values
    both ways, rows with nan and values on the thresholds, more rows than ``PREDICT_ROWS``, and an ensemble with a
    cycle (stopped after ``nodes`` steps by both)."""
    from perfmodel.calibration import trees as trees_module
    from perfmodel.search import gemm_kernel

    rng = np.random.default_rng(8)
    x = rng.uniform(0, 10, size=(3000, 4))
    x[rng.random(x.shape) < 0.15] = np.nan
    y = np.where(np.isnan(x[:, 0]), 1.0, np.sin(np.nan_to_num(x[:, 1]))) + 0.1 * rng.standard_normal(3000)
    ensemble = fit_trees(x[:2000], y[:2000])
    test = np.vstack([x[2000:], ensemble.threshold[ensemble.feature >= 0][:40, None].repeat(4, axis=1)])
    cyclic = TreeEnsemble(ensemble.feature.copy(), ensemble.threshold, ensemble.left.copy(), ensemble.right.copy(),
                          ensemble.value, 0.25, ensemble.missing_left)
    cyclic.left[:, 0] = np.where(cyclic.feature[:, 0] >= 0, 0, cyclic.left[:, 0])  # node 0 loops to itself
    assert gemm_kernel.load()
    compiled = [e.predict(test) for e in (ensemble, cyclic)]
    assert trees_module._compiled_walk(len(test) * len(ensemble.feature)) is not None
    monkeypatch.setenv("PERFMODEL_NO_JIT", "1")
    assert trees_module._compiled_walk(len(test) * len(ensemble.feature)) is None
    for fast, e in zip(compiled, (ensemble, cyclic), strict=True):
        np.testing.assert_array_equal(fast, e.predict(test))


def test_rows_of_one_op_that_differ_are_calibrated_each(odd_width: Calibration,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch whose rows of one op differ (a model time, a note) is not calibrated once per op: each row as its
    own, as with no repeats at all."""
    import dataclasses

    from perfmodel.calibration import model
    from perfmodel.calibration.model import apply_calibration

    ops = [make_op(d) for d in _gemms(9, 20)] * 3
    batch = perfmodel.predict_many(HW, ops, timing=odd_width.timing)  # type: ignore[arg-type]
    slower = dataclasses.replace(batch, time_s=batch.time_s * np.where(np.arange(60) == 45, 1.5, 1.0))
    noted = dataclasses.replace(batch, notes={**batch.notes, 50: ["a note only this row has"]})
    assert model._repeated_rows(batch, model.distinct_ops(ops)[1]) is not None
    got = [apply_calibration(odd_width, b) for b in (batch, slower, noted)]
    assert [model._repeated_rows(b, model.distinct_ops(ops)[1]) for b in (slower, noted)] == [None, None]
    monkeypatch.setattr(model, "distinct_ops", lambda given: (list(given), np.arange(len(given))))
    for fast, b in zip(got, (batch, slower, noted), strict=True):
        each = apply_calibration(odd_width, b)
        np.testing.assert_array_equal(fast.time_s, each.time_s)
        np.testing.assert_array_equal(fast.interval_s, each.interval_s)
        assert fast.notes == each.notes
    assert got[1].time_s[45] != got[1].time_s[5] and got[2].notes[50] != got[2].notes.get(10)


def test_rows_the_splits_cannot_tell_apart_are_walked_once_to_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled walk of one row per set of rows every split sends the same way (``_alike_rows``) against the
    numpy walk of every row: values on, just above and just below the thresholds, nan,
    ±inf and -0.0, rows repeated; the sets must be fewer than the rows (else this checks nothing)."""
    from perfmodel.calibration import trees as trees_module
    from perfmodel.search import gemm_kernel

    rng = np.random.default_rng(11)
    x = rng.uniform(0, 10, size=(2000, 3))
    x[rng.random(x.shape) < 0.1] = np.nan
    ensemble = fit_trees(x, np.sin(np.nan_to_num(x[:, 0])) + np.nan_to_num(x[:, 1]) / 5)
    cuts = np.unique(ensemble.threshold[ensemble.feature >= 0])
    columns = []
    for _ in range(3):  # two thresholds a column, each with its neighbours on both sides, and the odd values
        on = rng.choice(cuts, 2, replace=False)
        values = np.concatenate([on, np.nextafter(on, np.inf), np.nextafter(on, -np.inf),
                                 [np.nan, np.inf, -np.inf, -0.0, 0.0]])
        columns.append(rng.choice(values, 4000))
    test = np.column_stack(columns)
    alike, row_of = ensemble._alike_rows(test)
    assert alike is not None and len(alike) < len(test) // 2
    monkeypatch.setattr(trees_module, "_codes_kernel", lambda: None)  # the numpy counting tells the same sets
    numpy_alike, numpy_row_of = ensemble._alike_rows(test)
    assert numpy_alike is not None
    np.testing.assert_array_equal(numpy_alike, alike)
    np.testing.assert_array_equal(numpy_row_of, row_of)
    assert gemm_kernel.load()
    fast = ensemble.predict(test)
    monkeypatch.setenv("PERFMODEL_NO_JIT", "1")
    np.testing.assert_array_equal(fast, ensemble.predict(test))
