"""The uncalibrated model's intervals: the band table, how it is built, and that predictions carry it."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.ops import make_op
from perfmodel.uncalibrated_interval import (
    MIN_DEVICES,
    POOLED,
    QUANTILES,
    RULES,
    TABLE_PATH,
    ClassBand,
    band_key,
    build_bands,
    conformal_bands,
    conformal_levels,
    device_balanced_band,
    device_shifts,
    device_spread,
    interval_s,
    load_bands,
    symmetric_band,
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


def test_the_shifted_rule_widens_a_class_on_fewer_than_min_devices_by_the_pooled_band() -> None:
    # matmul on four devices lands anywhere in 0.5..2x; softmax, measured on two, agrees with itself (~1x)
    rng = np.random.default_rng(1)
    ratio = np.concatenate([np.exp(rng.uniform(np.log(0.5), np.log(2.0), 400)), rng.uniform(0.98, 1.02, 40)])
    classes = ["matmul"] * 400 + ["softmax"] * 40
    devices = [f"d{i % 4}" for i in range(400)] + ["d0"] * 20 + ["d1"] * 20
    bands = build_bands(ratio, classes, devices, rule="shifted")
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


def test_the_shifted_rule_gives_a_class_the_device_effect_its_devices_do_not_show() -> None:
    # matmul on four devices whose medians differ (0.8..1.25x), each tight; softmax on four devices that agree.
    # A new device lands sigma^2 (1 + 1/K) from the four's mean: matmul's band is wider than its own rows' band,
    # and softmax's own spread (none) shrinks the pooled device effect it takes (one pseudo-device of it)
    rng = np.random.default_rng(3)
    centres = [0.8, 0.9, 1.1, 1.25]
    ratio = np.concatenate([c * rng.uniform(0.98, 1.02, 50) for c in centres] + [rng.uniform(0.98, 1.02, 200)])
    classes = ["matmul"] * 200 + ["softmax"] * 200
    devices = [f"d{i // 50}" for i in range(200)] * 2
    bands = build_bands(ratio, classes, devices, rule="shifted")
    own_low, own_high = device_balanced_band(ratio[:200], devices[:200])
    assert bands["matmul"].low_ratio < own_low and bands["matmul"].high_ratio > own_high
    soft = bands["softmax"]
    assert 0.9 < soft.low_ratio < 0.98 and 1.02 < soft.high_ratio < 1.1  # sigma_c^2 = sigma_0^2 / 4: half the spread
    shifts, weights = device_shifts(np.log(ratio), classes, devices)
    assert shifts.size == 8 and weights.sum() == pytest.approx(2.0)  # each class weighs 1


def _hierarchical(rng: np.random.Generator, spread: dict[str, tuple[int, float]], within: float = 0.15
                  ) -> tuple[np.ndarray[Any, Any], list[str], list[str]]:
    """log ratio = class centre + device effect (sd ``spread[class][1]``, on its first K devices) + scatter."""
    log_ratio: list[float] = []
    classes: list[str] = []
    devices: list[str] = []
    for name, (k, sd) in spread.items():
        centre = rng.normal(0.2, 0.1)
        for d in range(k):
            rows = int(rng.integers(20, 200))
            log_ratio += (centre + rng.normal(0, sd) + rng.normal(0, within, rows)).tolist()
            classes += [name] * rows
            devices += [f"d{d}"] * rows
    return np.exp(np.array(log_ratio)), classes, devices


def test_conformal_levels_widen_the_tails_by_one_held_out_group_in_n_plus_one() -> None:
    low, high = conformal_levels(26)
    assert high == pytest.approx(0.9 * 27 / 26) and low == pytest.approx(1 - 0.9 * 27 / 26)
    assert conformal_levels(9) == (0.0, 1.0)  # nine groups: the tenth's 90 % needs the largest score


def test_the_conformal_rule_holds_about_80_percent_of_a_new_device_on_data_of_its_model() -> None:
    # twelve classes on 2-7 devices whose effects are drawn as the rule assumes: the held-out devices' mean share
    # (each band rebuilt without the device: centre, spreads and levels) is near the nominal 80 %, above it by the
    # finite-sample correction's conservative tail, not at the 100 % of an unbounded band nor the 40 % of none
    rng = np.random.default_rng(4)
    shares = []
    for _ in range(3):
        spread = {f"c{i}": (int(rng.integers(2, 8)), 0.3) for i in range(12)}
        bands = build_bands(*_hierarchical(rng, spread), rule="conformal")
        shares += [b.device_coverage for name, b in bands.items() if name != POOLED and b.device_coverage is not None]
    assert 0.75 < float(np.mean(shares)) < 0.92


def test_a_class_on_two_devices_takes_its_familys_device_spread_not_its_own_two() -> None:
    # the memory classes' devices differ (sd 0.5), the matrix classes' agree (sd 0.02); softmax's two devices
    # happen to agree: its band is still as wide as a memory class needs, wider than matmul's on seven devices
    rng = np.random.default_rng(5)
    ratio, classes, devices = _hierarchical(rng, {"elementwise": (3, 0.5), "layernorm": (3, 0.5), "rmsnorm": (4, 0.5),
                                                  "matmul": (7, 0.02), "conv2d": (4, 0.02)}, within=0.05)
    agree = np.exp(rng.normal(0, 0.05, 60))
    bands = build_bands(np.concatenate([ratio, agree]), [*classes, *["softmax"] * 60],
                        [*devices, *["d0"] * 30, *["d1"] * 30], rule="conformal")
    width = {name: np.log(b.high_ratio / b.low_ratio) for name, b in bands.items()}
    assert width["softmax"] > 3 * width["matmul"]
    assert width["softmax"] > 0.5 * width["elementwise"]
    spreads = device_spread([("softmax", "d0"), ("softmax", "d1"), ("matmul", "d0"), ("matmul", "d1")],
                            np.array([0.0, 0.0, 0.0, 1.0]), np.zeros(4))
    assert spreads["softmax"].scale > 0  # no spread of its own, and no family member with any: the pooled one


def test_the_band_without_a_device_is_rebuilt_from_the_other_devices_alone() -> None:
    # a device's coverage figure is its rows against conformal_bands without it: adding rows on that device to a
    # class the others lack moves nothing the held-out band rests on
    rng = np.random.default_rng(6)
    ratio, classes, devices = _hierarchical(rng, {"matmul": (4, 0.3), "elementwise": (3, 0.3)})
    without = conformal_bands(ratio, classes, devices, left_out=np.array(devices) == "d0")
    more = np.concatenate([ratio, np.full(50, 9.0)])
    again = conformal_bands(more, [*classes, *["softmax"] * 50], [*devices, *["d0"] * 50],
                            left_out=np.array([*devices, *["d0"] * 50]) == "d0")
    assert without == again
    mine = (np.array(classes) == "matmul") & (np.array(devices) == "d0")
    low, high, _ = without["matmul"]
    bands = build_bands(ratio, classes, devices, rule="conformal")
    shares = []
    for d in sorted(set(devices)):
        band = conformal_bands(ratio, classes, devices, left_out=np.array(devices) == d)["matmul"]
        held = ratio[(np.array(classes) == "matmul") & (np.array(devices) == d)]
        shares.append(np.mean((held >= band[0]) & (held <= band[1])))
    assert bands["matmul"].device_coverage == pytest.approx(np.mean(shares))
    assert np.mean((ratio[mine] >= low) & (ratio[mine] <= high)) == pytest.approx(shares[0])


def test_stored_file_schema_and_every_band_holds_the_point_estimate() -> None:
    data = json.loads(TABLE_PATH.read_text())
    assert set(data) >= {"quantiles", "source", "rule", "classes"} and data["rule"] in RULES
    fields = {"low_ratio", "high_ratio", "rows", "devices", "coverage", "device_coverage"}
    for name, band in data["classes"].items():
        assert set(band) == fields, name
        assert band["low_ratio"] <= 1.0 <= band["high_ratio"], name  # the prediction itself lies in its interval
        for share in (band["coverage"], band["device_coverage"]):
            assert share is None or 0.0 <= share <= 1.0
    batch = perfmodel.predict_many("nvidia-a100-sxm4-80gb", [{"kind": "softmax", "shape": [4096, 4096],
                                                              "dtype": "fp16"}])
    assert batch.uncalibrated_interval_s is not None
    low, high = batch.uncalibrated_interval_s[0]
    assert low <= batch.time_s[0] <= high


def test_the_symmetric_band_counts_each_devices_bias_in_both_directions() -> None:
    # one device 2x slow, one 2x fast, each tight: the band is 0.5x..2x about the prediction, not a device's own
    ratio = np.concatenate([np.full(10, 2.0), np.full(990, 0.5)])
    low, high = symmetric_band(ratio, ["slow"] * 10 + ["fast"] * 990)
    assert low == pytest.approx(0.5) and high == pytest.approx(2.0)
    # a single device at 1.5x: the band reaches as far below the prediction as above it
    low, high = symmetric_band(np.full(20, 1.5), ["d0"] * 20)
    assert low == pytest.approx(1 / 1.5) and high == pytest.approx(1.5)


def test_the_symmetric_band_holds_80_percent_of_its_own_rows_and_the_prediction() -> None:
    rng = np.random.default_rng(7)
    ratio = np.exp(rng.normal(0.3, 0.4, 5000))
    low, high = symmetric_band(ratio, ["d0"] * 5000)
    assert low < 1.0 < high and low == pytest.approx(1 / high)
    assert np.mean((ratio >= low) & (ratio <= high)) == pytest.approx(0.8, abs=0.01)


def test_the_symmetric_rule_changes_only_classes_on_fewer_than_min_devices() -> None:
    rng = np.random.default_rng(8)
    ratio = np.concatenate([np.exp(rng.uniform(np.log(0.5), np.log(2.0), 400)), rng.uniform(1.18, 1.22, 20),
                            rng.uniform(1.45, 1.55, 20)])
    classes = ["matmul"] * 400 + ["softmax"] * 40
    devices = [f"d{i % 4}" for i in range(400)] + ["d0"] * 20 + ["d1"] * 20
    shifted = build_bands(ratio, classes, devices, rule="shifted")
    symmetric = build_bands(ratio, classes, devices, rule="symmetric")
    assert symmetric["matmul"] == shifted["matmul"] and symmetric[POOLED] == shifted[POOLED]
    # softmax (two devices, ~1.2x and ~1.5x): up to the slower one's 1.5x, and as far below the prediction
    band = symmetric["softmax"]
    assert 1.45 < band.high_ratio < 1.55 and band.low_ratio == pytest.approx(1 / band.high_ratio)
    assert shifted["softmax"].low_ratio < 0.9  # the union reaches below 1 from the pooled band alone
    # held out: d0's rows (1.2x) inside d1's band (to 1.5x), d1's (1.5x) outside d0's (to 1.21x)
    assert band.coverage == pytest.approx(0.5) and band.device_coverage == pytest.approx(0.5)
