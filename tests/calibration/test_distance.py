"""The locally adaptive band: an op's distance to the fitted ops scales its class's band."""

from __future__ import annotations

import json

import numpy as np

from perfmodel.calibration.bands import conformal_band
from perfmodel.calibration.distance import (
    MAX_EXPONENT,
    DistanceScale,
    fitted_points,
    held_out_distances,
    nearest,
    spread_exponent,
)


def test_nearest_and_held_out_distances() -> None:
    points = np.array([[0.0, 0.0], [3.0, 4.0]])
    np.testing.assert_allclose(nearest(np.array([[0.0, 1.0], [3.0, 4.0], [6.0, 8.0]]), points), [1.0, 0.0, 5.0])
    assert np.isinf(nearest(np.zeros((1, 2)), np.zeros((0, 2))))[0]
    x = np.array([[0.0], [1.0], [3.0], [7.0]])
    fold = np.array([0, 1, 0, -1])  # the last run is not held out; it is not a neighbour either
    np.testing.assert_allclose(held_out_distances(x, fold), [1.0, 1.0, 2.0, np.nan])


def test_spread_exponent_recovers_how_the_misses_grow_with_distance() -> None:
    rng = np.random.default_rng(1)
    rho = np.exp(rng.uniform(-1, 1, 4000))
    cls = rng.integers(0, 4, 4000)
    scale = np.array([0.02, 0.05, 0.1, 0.3])[cls]  # classes differ in size: their means are taken out
    r = rng.normal(0, 1, 4000) * scale * rho ** 0.5
    assert abs(spread_exponent(rho, r, cls) - 0.5) < 0.05
    assert spread_exponent(rho, rng.normal(0, 1, 4000) * scale, cls) < 0.05  # no growth: ~0
    assert spread_exponent(rho, r * rho ** 3, cls) == MAX_EXPONENT  # clipped
    assert spread_exponent(rho[:5], r[:5], cls[:5]) == 0.0  # too few runs


def test_a_locally_adaptive_band_covers_near_and_far_ops_where_a_global_band_does_not() -> None:
    """Misses grow with distance (|r| ~ ρ): the global band over-covers near ops and under-covers far ones; the
    band scaled by the op's spread keeps both near 80 %."""
    rng = np.random.default_rng(2)
    rho = np.exp(rng.uniform(np.log(0.25), np.log(4), 400))  # k-fold held-out runs' relative distances
    r = rng.normal(0, 0.1, 400) * rho
    scale = DistanceScale(np.zeros((1, 1)), 1.0, spread_exponent(rho, r, np.zeros(400, dtype=np.int64)),
                          *np.quantile(rho, [0.1, 0.9]))
    adaptive = conformal_band(r / scale.spread(rho))
    plain = conformal_band(r)
    assert adaptive is not None and plain is not None
    for distance in (0.4, 2.5):  # a new op nearer, then farther, than most held-out runs
        new = rng.normal(0, 0.1, 4000) * distance
        factor = float(scale.factor(np.array([[distance]]))[0])
        inside = np.mean((new >= adaptive[0] * factor) & (new <= adaptive[1] * factor))
        inside_plain = np.mean((new >= plain[0]) & (new <= plain[1]))
        assert 0.72 <= inside <= 0.9
        assert inside_plain > 0.95 if distance < 1 else inside_plain < 0.65


def test_a_distance_scale_round_trips_and_never_extrapolates() -> None:
    scale = DistanceScale(np.array([[0.0, 0.0], [1.0, 1.0]]), 0.5, 0.5, 0.5, 2.0)
    again = DistanceScale.from_json(json.loads(json.dumps(scale.to_json())))
    np.testing.assert_allclose(again.points, scale.points)
    assert (again.typical, again.exponent, again.rho_low, again.rho_high) == (0.5, 0.5, 0.5, 2.0)
    far = np.array([[100.0, 100.0], [0.0, 0.0], [0.5, 0.0]])  # rho 283 -> clipped to 2; 0 -> 0.5; 1 -> 1
    np.testing.assert_allclose(scale.factor(far), [2 ** 0.5, 0.5 ** 0.5, 1.0])
    many = np.random.default_rng(3).normal(size=(3000, 2))
    assert len(fitted_points(many, 0)) == 2500
    np.testing.assert_array_equal(fitted_points(many, 0), fitted_points(many, 0))
