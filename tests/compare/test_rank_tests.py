"""The rank tests of ``perfmodel.compare.rank_tests`` give scipy's p-values (the same floats) on random samples
with and without ties, zeros and equal values, paired and not."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats  # type: ignore[import-untyped,unused-ignore]

from perfmodel.compare.rank_tests import average_ranks, mann_whitney_p, wilcoxon_p


def _samples(rng: np.random.Generator, n: int, tied: bool) -> np.ndarray:
    if tied:  # few distinct values: long runs of ties
        return rng.integers(0, max(2, n // 4), n).astype(np.float64) * 1e-6
    return rng.lognormal(-9.0, 0.3, n)


@pytest.mark.parametrize("tied", [False, True])
def test_mann_whitney_is_scipys(tied: bool) -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        n1, n2 = int(rng.integers(5, 300)), int(rng.integers(5, 300))
        x = _samples(rng, n1, tied)
        y = _samples(rng, n2, tied) * (1.0 + 0.05 * rng.random())
        if np.ptp(np.concatenate([x, y])) == 0:
            continue
        expected = float(stats.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue)
        got = mann_whitney_p(x, y)
        assert abs(got - expected) <= 1e-12
        assert got == expected  # same operations: bit for bit


@pytest.mark.parametrize("tied", [False, True])
def test_wilcoxon_is_scipys(tied: bool) -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(5, 300))
        y = _samples(rng, n, tied)
        x = y * (1.0 + rng.normal(0.02, 0.05, n)) if not tied else _samples(rng, n, tied)
        same = rng.random(n) < 0.1
        x[same] = y[same]  # some zero differences
        if not np.any(x != y):
            continue
        expected = float(stats.wilcoxon(x, y, zero_method="zsplit", method="approx").pvalue)
        got = wilcoxon_p(x, y)
        assert abs(got - expected) <= 1e-12
        assert got == expected


def test_all_tied_as_scipy() -> None:
    x = np.full(6, 2e-6)  # zero spread: scipy's p-value from an infinite z
    expected = float(stats.mannwhitneyu(x, x.copy(), alternative="two-sided", method="asymptotic").pvalue)
    assert mann_whitney_p(x, x.copy()) == expected


def test_average_ranks() -> None:
    ranks, ties = average_ranks(np.array([3.0, 1.0, 2.0, 2.0, 5.0, 2.0]))
    assert ranks.tolist() == [5.0, 1.0, 3.0, 3.0, 6.0, 3.0]
    assert sorted(ties.tolist()) == [1.0, 1.0, 1.0, 3.0]
