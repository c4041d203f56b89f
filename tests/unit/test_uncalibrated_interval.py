"""The uncalibrated model's intervals: the band table, how it is built, and that predictions carry it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.ops import make_op
from perfmodel.uncalibrated_interval import (
    MIN_DEVICES,
    POOLED,
    QUANTILES,
    ClassBand,
    band_key,
    build_bands,
    device_balanced_band,
    device_shifts,
    interval_s,
    load_bands,
    weighted_quantiles,
)


def test_weighted_quantiles_equal_weights_match_the_midpoint_rule() -> None:
    values = np.array([4.0, 1.0, 3.0, 2.0])
    # midpoints of equal weights sit at 1/8, 3/8, 5/8, 7/8 of the total
    got = weighted_quantiles(values, np.ones(4), [0.125, 0.5, 0.875])
    np.testing.assert_allclose(got, [1.0, 2.5, 4.0])


def test_a_device_with_many_rows_weighs_as_much_as_one_with_few() -> None:
    # 1000 rows at ratio 1 on one device, 10 rows at ratio 4 on another: the band reaches 4 only when weighed
    ratio = np.concatenate([np.ones(1000), np.full(10, 4.0)])
    devices = ["big"] * 1000 + ["small"] * 10
    low, high = device_balanced_band(ratio, devices)
    assert low == pytest.approx(1.0) and high == pytest.approx(4.0)


def test_coverage_counts_each_device_against_the_others_band() -> None:
    # three devices agree (ratios 0.9..1.1), a fourth is 3x off: its rows fall outside the others' band
    rng = np.random.default_rng(0)
    ratio = np.concatenate([rng.uniform(0.9, 1.1, 300), np.full(100, 3.0)])
    devices = ["a"] * 100 + ["b"] * 100 + ["c"] * 100 + ["d"] * 100
    bands = build_bands(ratio, ["matmul"] * 400, devices)
    band = bands["matmul"]
    assert band.rows == 400 and band.devices == 4
    # the 100 rows of d miss the band of a..c (a band built with d among its devices may hold a..c whole)
    assert band.coverage is not None and band.coverage <= 0.75
    assert bands[POOLED].rows == 400


def test_a_class_on_one_device_has_no_coverage_figure() -> None:
    bands = build_bands(np.array([1.0, 1.2, 0.8]), ["softmax"] * 3, ["only"] * 3)
    assert bands["softmax"].coverage is None


def test_stored_table_has_the_quantiles_and_ordered_bands() -> None:
    table = load_bands()
    assert POOLED in table and "matmul" in table and "elementwise" in table
    for name, band in table.items():
        assert 0 < band.low_ratio < band.high_ratio, name
        assert band.rows > 0 and band.devices >= 1
    assert QUANTILES == (0.1, 0.9)


def test_band_key_splits_training_passes() -> None:
    conv = {"kind": "conv2d", "batch": 8, "in_channels": 64, "out_channels": 64, "height": 56, "width": 56,
            "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp16"}
    assert band_key(make_op(conv)) == "conv2d"
    assert band_key(make_op({**conv, "pass": "backward"})) == "conv2d_bwd"


def test_predictions_carry_their_class_band_and_unknown_classes_the_pooled_one() -> None:
    ops: list[dict[str, Any]] = [{"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp16"},
           {"kind": "quantize", "shape": [4096, 4096], "from_dtype": "fp16", "to_dtype": "int8"}]
    bands = {"matmul": ClassBand(0.8, 1.5, 10, 2, 0.8), POOLED: ClassBand(0.5, 3.0, 20, 3, 0.8)}
    built = [make_op(op) for op in ops]
    got = interval_s(built, np.array([2.0, 1.0]), bands)
    np.testing.assert_allclose(got, [[1.6, 3.0], [0.5, 3.0]])

    batch = perfmodel.predict_many("nvidia-a100-sxm4-80gb", ops)
    table = load_bands()
    assert batch.uncalibrated_interval_s is not None
    expected = [table["matmul"], table.get("quantize", table[POOLED])]
    for i, band in enumerate(expected):
        low, high = batch.uncalibrated_interval_s[i]
        assert low == pytest.approx(batch.time_s[i] * band.low_ratio)
        assert high == pytest.approx(batch.time_s[i] * band.high_ratio)
    one = batch[0]
    assert one.interval_s is None and one.uncalibrated_interval_s is not None
    assert one.to_dict()["uncalibrated_interval_s"] == list(one.uncalibrated_interval_s)
    assert batch.to_dicts()[1]["uncalibrated_interval_s"] == list(batch[1].uncalibrated_interval_s or ())
    assert batch.to_columns()["uncalibrated_interval_s"].shape == (2, 2)


def test_a_class_on_fewer_devices_than_min_devices_is_widened_by_the_pooled_band() -> None:
    # matmul on four devices lands anywhere in 0.5..2x; softmax, measured on two, agrees with itself (~1x)
    rng = np.random.default_rng(1)
    ratio = np.concatenate([np.exp(rng.uniform(np.log(0.5), np.log(2.0), 400)), rng.uniform(0.98, 1.02, 40)])
    classes = ["matmul"] * 400 + ["softmax"] * 40
    devices = [f"d{i % 4}" for i in range(400)] + ["d0"] * 20 + ["d1"] * 20
    bands = build_bands(ratio, classes, devices)
    own_low, own_high = device_balanced_band(ratio[400:], devices[400:])
    assert bands["softmax"].devices == 2 < MIN_DEVICES
    assert bands["softmax"].low_ratio == pytest.approx(min(own_low, bands[POOLED].low_ratio))
    assert bands["softmax"].high_ratio == pytest.approx(max(own_high, bands[POOLED].high_ratio))
    assert bands["softmax"].high_ratio > 1.5  # not the 1.02 its own two devices suggest
    assert bands["matmul"].devices == 4 >= MIN_DEVICES


def test_the_cli_shows_the_uncalibrated_interval() -> None:
    from perfmodel.cli import render_cost

    cost = perfmodel.predict("nvidia-a100-sxm4-80gb", {"kind": "matmul", "m": 512, "n": 512, "k": 512,
                                                       "dtype": "fp16"})
    line = next(line for line in render_cost(cost).splitlines() if line.strip().startswith("interval"))
    assert "uncalibrated" in line and "10-90 %" in line


def test_device_coverage_weighs_each_held_out_device_the_same() -> None:
    # a big device inside the others' band, a small one outside it: the row share follows the big one,
    # the device share is the mean of the devices' own shares
    rng = np.random.default_rng(2)
    ratio = np.concatenate([rng.uniform(0.9, 1.1, 100), rng.uniform(0.9, 1.1, 100), rng.uniform(0.9, 1.1, 1000),
                            np.full(10, 5.0)])
    devices = ["a"] * 100 + ["b"] * 100 + ["big"] * 1000 + ["small"] * 10
    band = build_bands(ratio, ["matmul"] * ratio.size, devices)["matmul"]
    assert band.coverage is not None and band.device_coverage is not None
    assert band.coverage > 0.6  # the big device's rows dominate the row share
    assert band.device_coverage < band.coverage - 0.1  # the small device's 0 % counts as a quarter


def test_a_class_on_enough_devices_carries_the_device_effect_its_devices_do_not_show() -> None:
    # matmul on four devices whose medians differ (0.8..1.25x), each tight; softmax on four devices that agree.
    # A new device lands sigma^2 (1 + 1/K) from the four's mean: matmul's band is wider than its own rows' band,
    # and softmax's own spread (none) shrinks the pooled device effect it takes (one pseudo-device of it)
    rng = np.random.default_rng(3)
    centres = [0.8, 0.9, 1.1, 1.25]
    ratio = np.concatenate([c * rng.uniform(0.98, 1.02, 50) for c in centres] + [rng.uniform(0.98, 1.02, 200)])
    classes = ["matmul"] * 200 + ["softmax"] * 200
    devices = [f"d{i // 50}" for i in range(200)] * 2
    bands = build_bands(ratio, classes, devices)
    own_low, own_high = device_balanced_band(ratio[:200], devices[:200])
    assert bands["matmul"].low_ratio < own_low and bands["matmul"].high_ratio > own_high
    soft = bands["softmax"]
    assert 0.9 < soft.low_ratio < 0.98 and 1.02 < soft.high_ratio < 1.1  # sigma_c^2 = sigma_0^2 / 4: half the spread
    shifts, weights = device_shifts(np.log(ratio), classes, devices)
    assert shifts.size == 8 and weights.sum() == pytest.approx(2.0)  # each class weighs 1
