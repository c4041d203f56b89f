"""Rule "urn": a class's held-out residuals mixed with every class's, mirrored, at the Polya urn's weights."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import perfmodel.uncalibrated_urn as urn
from perfmodel.uncalibrated_interval import build_bands, class_band


@pytest.fixture(autouse=True)
def _switches() -> Iterator[None]:
    """Each test sets the switches it reads; the module's values are put back after it."""
    saved = (urn.ALPHA, urn.MIRROR, urn.MIRROR_OWN, urn.OTHERS_ONLY, urn.URN_BELOW, urn.JACKKNIFE_ONE_DEVICE)
    yield
    urn.ALPHA, urn.MIRROR, urn.MIRROR_OWN, urn.OTHERS_ONLY, urn.URN_BELOW, urn.JACKKNIFE_ONE_DEVICE = saved


def test_a_one_device_class_takes_half_its_own_rows_and_half_the_mirrored_others() -> None:
    # class a: one device at 1x; class b: one device at 4x. K = 1, alpha = 1: half the mass at 1x, a quarter at 4x
    # and (mirrored) a quarter at 1/4x, so the 10 % and 90 % quantiles sit in the two quarters: x0.25 .. x4
    urn.ALPHA, urn.MIRROR, urn.MIRROR_OWN, urn.OTHERS_ONLY = 1.0, True, False, True
    log_ratio = np.concatenate([np.zeros(10), np.full(10, np.log(4.0))])
    low, high = urn.urn_band(log_ratio, ["a"] * 10 + ["b"] * 10, ["d0"] * 20, "a")
    assert (low, high) == pytest.approx((0.25, 4.0))
    urn.ALPHA = 1e-9  # no base measure: the class's own rows alone
    assert urn.urn_band(log_ratio, ["a"] * 10 + ["b"] * 10, ["d0"] * 20, "a") == pytest.approx((1.0, 1.0))


def test_more_devices_give_the_base_measure_less_weight() -> None:
    # class a on K devices at 1x, class b at 4x: the base's share alpha / (K + alpha) falls under 20 % at K = 5,
    # so the 10-90 % band closes onto the class's own 1x
    urn.ALPHA, urn.MIRROR, urn.MIRROR_OWN, urn.OTHERS_ONLY = 1.0, True, False, True
    for k, closed in ((1, False), (3, False), (5, True)):
        log_ratio = np.concatenate([np.zeros(10 * k), np.full(10, np.log(4.0))])
        classes = ["a"] * (10 * k) + ["b"] * 10
        devices = [f"d{i // 10}" for i in range(10 * k)] + ["d0"] * 10
        low, high = urn.urn_band(log_ratio, classes, devices, "a")
        assert (high == pytest.approx(1.0)) is closed and low == pytest.approx(1.0 / high)


def test_the_rule_moves_only_classes_below_urn_below_and_checks_them_held_out() -> None:
    rng = np.random.default_rng(4)
    ratio = np.exp(np.concatenate([rng.normal(0.2 * (i % 4), 0.1, 30) for i in range(4)] +
                                  [rng.normal(0.0, 0.1, 30) for _ in range(2)]))
    classes = ["matmul"] * 120 + ["softmax"] * 60
    devices = [f"d{i // 30}" for i in range(120)] + ["d0"] * 30 + ["d1"] * 30
    urn.URN_BELOW = 3
    shifted, mixed = build_bands(ratio, classes, devices, rule="shifted"), build_bands(ratio, classes, devices,
                                                                                      rule="urn")
    assert mixed["matmul"] == shifted["matmul"]  # four devices: the shifted band
    assert mixed["softmax"] != shifted["softmax"] and mixed["softmax"].coverage is not None
    # held out: d1's softmax rows against the urn band of d0's softmax and every class's other rows
    left_out = np.array(devices) == "d1"
    band = class_band(ratio, classes, devices, "softmax", left_out, rule="urn")
    kept = ~left_out
    expected = urn.urn_band(np.log(ratio[kept]), np.array(classes)[kept].tolist(), np.array(devices)[kept].tolist(),
                            "softmax")
    assert band is not None and band[:2] == pytest.approx(expected) and band[2] == 1


def test_the_device_jackknife_scores_each_device_about_the_others_centre() -> None:
    # d0 at 1x, d1 at 2x: d0 is ln 2 from d1's centre (ends 1x and 4x), d1 ln 2 from d0's (ends 0.5x and 2x);
    # the 10 % end is the lower of the lows, the 90 % end the higher of the highs: x0.5 .. x4
    log_ratio = np.concatenate([np.zeros(10), np.full(10, np.log(2.0))])
    band = urn.jackknife_band(log_ratio, ["d0"] * 10 + ["d1"] * 10)
    assert band == pytest.approx((0.5, 4.0))
    assert urn.jackknife_band(np.zeros(5), ["d0"] * 5) is None  # one device: no other device's centre


def test_the_jackknife_rule_falls_back_on_one_device_as_switched() -> None:
    rng = np.random.default_rng(5)
    ratio = np.exp(np.concatenate([rng.normal(0.3 * i, 0.1, 20) for i in range(4)]))
    classes = ["matmul"] * 60 + ["softmax"] * 20
    devices = [f"d{i // 20}" for i in range(60)] + ["d0"] * 20
    union = class_band(ratio, classes, devices, "softmax", rule="shifted")
    urn.JACKKNIFE_ONE_DEVICE = "union"
    assert class_band(ratio, classes, devices, "softmax", rule="jackknife") == union
    urn.JACKKNIFE_ONE_DEVICE = "urn"
    assert class_band(ratio, classes, devices, "softmax", rule="urn") == class_band(ratio, classes, devices,
                                                                                     "softmax", rule="jackknife")
