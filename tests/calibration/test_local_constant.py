"""The local correction's compiled distances without the coordinates every point and row share
(``LocalCorrection._smoothed``, ``USE_CONSTANT``) against the kernel over every coordinate, to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from perfmodel.calibration import local, near_jit
from perfmodel.calibration.local import LocalCorrection
from perfmodel.search import gemm_kernel


def _correction(rng: np.random.Generator, shared: dict[int, float], screen_spread: bool) -> LocalCorrection:
    points = rng.normal(0, 0.4, size=(300, 6))
    points[:, 0] = rng.uniform(4, 8, 300)
    if screen_spread:
        points[:, 4] *= 5  # the widest spread: the screen
    for j, value in shared.items():
        points[:, j] = value
    return LocalCorrection(points, rng.normal(0, 0.2, 300), rng.integers(1, 4, 300).astype(float), 0.3, 1.0, 1.0,
                           np.zeros(0))


def _every_coordinate(correction: LocalCorrection, x: np.ndarray) -> np.ndarray:
    points, runs, residuals = correction._by_first
    lo = np.searchsorted(points[:, 0], x[:, 0] - correction.reach, side="left")
    hi = np.searchsorted(points[:, 0], x[:, 0] + correction.reach, side="right")
    out = np.empty(len(x))
    near_jit.smooth(np.ascontiguousarray(x), points, runs, residuals, -0.5 / correction.bandwidth ** 2,
                    float(correction.shrink), lo, hi, correction.reach ** 2, out)
    return out


@pytest.mark.parametrize(("shared", "screen_spread"), [({2: 0.0, 5: -1.5}, True), ({4: 0.25, 1: 0.0}, False),
                                                        ({}, True), ({1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0, 5: 0.0}, False)])
def test_shared_coordinates_left_out_give_the_same_bits(shared: dict[int, float], screen_spread: bool,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Points sharing some coordinates (the screen's among them, or all but log10 FLOPs); rows sharing them too, and
    rows where one of those coordinates differs (kept: its squares are not 0); -0.0 against a shared 0.0."""
    assert gemm_kernel.load()
    rng = np.random.default_rng(len(shared))
    correction = _correction(rng, shared, screen_spread)
    x = rng.normal(0, 0.4, size=(700, 6))
    x[:, 0] = rng.uniform(4, 8, 700)
    for j, value in shared.items():
        x[:, j] = -0.0 if value == 0.0 else value
    kernels = local.near_kernels()
    assert kernels is not None
    smooth = kernels[0]
    assert np.isnan(correction._constant).sum() == 6 - len(shared)
    same = correction._smoothed(x, smooth)
    assert np.array_equal(same.view(np.int64), _every_coordinate(correction, x).view(np.int64))
    assert np.abs(same).max() > 0.01
    if shared:
        moved = x.copy()
        moved[::7, next(iter(shared))] += 0.3  # one shared coordinate no longer shared by every row
        got = correction._smoothed(moved, smooth)
        assert np.array_equal(got.view(np.int64), _every_coordinate(correction, moved).view(np.int64))
        assert not np.array_equal(got, same)
    monkeypatch.setattr(local, "USE_CONSTANT", False)
    assert np.array_equal(correction._smoothed(x, smooth).view(np.int64), same.view(np.int64))


@pytest.mark.parametrize("shared", [{3: 0.0, 5: 0.30103, 9: 0.0}, {}, {j: 0.0 for j in range(1, 10)}])
def test_the_nearest_point_without_shared_coordinates_gives_the_same_bits(shared: dict[int, float],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``DistanceScale.factor`` through ``near_jit.nearest`` with the coordinates every point and row share left out
    (``distance.USE_SHARED``) against the kernel over every coordinate; rows where a shared one moves keep it."""
    from perfmodel.calibration import distance

    assert gemm_kernel.load()
    rng = np.random.default_rng(len(shared) + 40)
    points = rng.normal(0, 0.5, size=(400, 10))
    points[:, 0] = rng.uniform(3, 9, 400)
    x = rng.normal(0, 0.5, size=(900, 10))
    x[:, 0] = rng.uniform(2, 10, 900)
    for j, value in shared.items():
        points[:, j] = value
        x[:, j] = -0.0 if value == 0.0 else value
    scale = distance.DistanceScale(points, 0.4, 0.7, 0.2, 3.0)
    moved = x.copy()
    if shared:
        moved[::5, next(iter(shared))] += 0.25
    got = [scale.factor(rows) for rows in (x, moved)]
    monkeypatch.setattr(distance, "USE_SHARED", False)
    for rows, fast in zip((x, moved), got, strict=True):
        assert np.array_equal(fast.view(np.int64), scale.factor(rows).view(np.int64))
    assert np.isnan(scale._shared).sum() == 10 - len(shared)
    assert np.ptp(got[0]) > 0.1
