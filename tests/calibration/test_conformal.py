"""Split-conformal bands and the out-of-fold residuals they come from; bounded cross-validation."""

from __future__ import annotations

import numpy as np

from perfmodel.calibration.build import LOG_BAND_LIMIT, conformal_band
from perfmodel.calibration.fit import cv_subset


def test_conformal_band_takes_the_finite_sample_ranks() -> None:
    r = np.arange(1.0, 100.0) / 100  # 99 residuals: ranks floor(0.1 * 100) = 10 and ceil(0.9 * 100) = 90
    assert conformal_band(r[::-1]) == (0.10, 0.90)
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
    assert 0.78 <= np.mean(inside) <= 0.9  # >= 0.8 in expectation, a little above at n = 40


def test_cv_subset_keeps_whole_ops_up_to_the_cap() -> None:
    groups = np.repeat(np.arange(100), 7)  # 100 ops, 7 runs each
    kept = cv_subset(groups, 300, seed=1)
    assert kept.sum() <= 300 and kept.sum() >= 294
    for g in np.unique(groups[kept]):
        assert kept[groups == g].all()  # an op is held out whole or not at all
    assert cv_subset(groups, 10_000, seed=1).all()
