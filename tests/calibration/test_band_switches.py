"""The calibrated bands' three switches tried for LLMCompass's coverage (issue 22, cov22), all off by default: the
distance bridge below a class's own held-out runs, unbiased conformal ranks, and unvaried-only rows keeping the
in-range band (docs/accuracy.md, "Fifteenth pass: LLMCompass's calibrated coverage")."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from perfmodel.calibration import bands, bands_apply, distance
from perfmodel.calibration.distance import DistanceScale


def test_the_shipped_switches() -> None:
    """Unbiased ranks ship on (the band aims at 0.8 on average, the issue's 75-85 %, not at least 0.8: swapped
    DeepBench 0.852 -> 0.845 on the fifteenth pass's merged tree); the other two are findings, off."""
    assert bands.UNBIASED_RANKS
    assert not distance.BRIDGE and not bands_apply.UNVARIED_KEEP_IN_RANGE


def test_the_bridge_falls_as_a_wiener_process_with_a_nugget() -> None:
    """Below ``bridge_rho`` the spread is at · sqrt(g² + (1 − g²) ρ / bridge_rho): continuous at bridge_rho, g · at at a
    fitted op, 1/√2 · at half way with no nugget (a Brownian bridge's midpoint against a run held out one step from
    both neighbours); above it the clipped ρ^p as before."""
    scale = DistanceScale(np.zeros((1, 1)), 1.0, 0.5, 0.8, 2.0, bridge_rho=1.0, nugget=0.6)
    at = 1.0  # clip(1.0, 0.8, 2.0) ** 0.5
    got = scale.spread(np.array([1.0, 0.0, 0.5, 1.5, 9.0, math.nan]))
    expect = [at, 0.6 * at, at * math.sqrt(0.36 + 0.64 * 0.5), 1.5**0.5, 2.0**0.5, 1.0]
    np.testing.assert_allclose(got, expect)
    bare = DistanceScale(np.zeros((1, 1)), 1.0, 0.0, 1.0, 1.0, bridge_rho=1.0, nugget=0.0)
    np.testing.assert_allclose(bare.spread(np.array([0.5, 0.0])), [2**-0.5, 0.0])


def test_a_bridged_scale_round_trips_and_an_unbridged_one_writes_what_it_did() -> None:
    plain = DistanceScale(np.zeros((1, 2)), 0.5, 0.5, 0.5, 2.0)
    assert "bridge" not in plain.to_json()  # stored calibrations without the switch are unchanged
    bridged = DistanceScale(np.zeros((1, 2)), 0.5, 0.5, 0.5, 2.0, bridge_rho=0.9, nugget=0.3)
    again = DistanceScale.from_json(json.loads(json.dumps(bridged.to_json())))
    assert (again.bridge_rho, again.nugget) == (0.9, 0.3)
    assert DistanceScale.from_json(json.loads(json.dumps(plain.to_json()))).bridge_rho == 0.0


def test_unbiased_ranks_take_the_weibull_positions(monkeypatch: pytest.MonkeyPatch) -> None:
    """16 residuals 1..16: the split-conformal ranks are the extremes (1, 16: expected coverage 15/17 = 0.88); at the
    fractional ranks 0.1 · 17 = 1.7 and 0.9 · 17 = 15.3 the band is (1.7, 15.3), expected coverage 13.6/17 = 0.8.
    8 residuals: 0.9 and 8.1 are held at the extremes (7/9 either way)."""
    r16, r8 = np.arange(1.0, 17.0) / 100, np.arange(1.0, 9.0) / 100
    monkeypatch.setattr(bands, "UNBIASED_RANKS", False)
    assert bands.conformal_band(r16) == (0.01, 0.16)
    monkeypatch.setattr(bands, "UNBIASED_RANKS", True)
    np.testing.assert_allclose(bands.conformal_band(r16), (0.017, 0.153))
    np.testing.assert_allclose(bands.conformal_band(r8), (0.01, 0.08))


def test_unvaried_only_rows_keep_the_in_range_band(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows beyond the fit: the first only through a shape number the fit never varied (low = high), the second in
    bytes too, the third in a shape number the fit varied; only the first leaves the beyond band, and only with the
    switch on."""
    beyond_fit = np.array([True, True, True, False])
    outside = np.array(
        [
            [False, False, True, False],
            [False, True, True, False],
            [False, False, False, True],
            [False, False, False, False],
        ]
    )
    low, high = np.array([[12.0, 1.0]] * 4), np.array([[12.0, 5.0]] * 4)
    np.testing.assert_array_equal(bands_apply.extrapolated(beyond_fit, outside, low, high), beyond_fit)
    monkeypatch.setattr(bands_apply, "UNVARIED_KEEP_IN_RANGE", True)
    np.testing.assert_array_equal(bands_apply.extrapolated(beyond_fit, outside, low, high), [False, True, True, False])


def test_a_regular_sweep_fitted_with_the_bridge_narrows_a_midpoint_op(monkeypatch: pytest.MonkeyPatch) -> None:
    """12 elementwise sizes a factor 4 apart, measured at the model's time times a wavy factor: with the bridge
    the class gets a distance scale (k-fold's held-out runs sit one fitted step from their neighbours), and an op
    half a step from two fitted ones gets a narrower band than the fitted op's neighbour held out did."""
    import perfmodel
    from perfmodel.calibration import fit_calibration, predict_calibrated

    monkeypatch.setattr(distance, "BRIDGE", True)
    hw = "nvidia-a100-sxm4-80gb"
    ops = [{"kind": "elementwise", "shape": [4**i * 1024], "dtype": "fp16"} for i in range(12)]
    model = perfmodel.predict_many(hw, ops).time_s
    runs = [(op, float(t) * (1.3 + 0.1 * math.sin(2.0 * i))) for i, (op, t) in enumerate(zip(ops, model, strict=True))]
    cal = fit_calibration(hw, runs)
    entry = next(e for e in cal.classes.values() if e.source == "fitted")
    assert entry.distance is not None and entry.distance.bridge_rho > 0 and 0.0 <= entry.distance.nugget <= 1.0
    assert entry.interval_log is not None
    mid = predict_calibrated(hw, [{"kind": "elementwise", "shape": [2 * 4**5 * 1024], "dtype": "fp16"}], cal)
    assert mid.interval_s is not None and mid.in_calibrated_range is not None and bool(mid.in_calibrated_range[0])
    width = float(np.log(mid.interval_s[0, 1] / mid.interval_s[0, 0]))
    assert width < entry.interval_log[1] - entry.interval_log[0]
