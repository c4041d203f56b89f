"""The residual trees' compiled prediction through leaf masks (``trees_jit.mask_walk``, QuickScorer) against the
walk it replaced (``trees_jit.walk``) and the numpy walk, to the bit; and the trees it must leave to the walk."""

from __future__ import annotations

import numpy as np
import pytest

from perfmodel.calibration import trees as trees_module
from perfmodel.calibration import trees_jit
from perfmodel.calibration.trees import TreeEnsemble, fit_trees
from perfmodel.search import gemm_kernel


def _rows(ensemble: TreeEnsemble, rng: np.random.Generator, n: int, columns: int) -> np.ndarray:
    """Rows of values on, just above and just below the trees' thresholds, nan, ±inf, ±0.0 and uniform ones."""
    cuts = np.unique(ensemble.threshold[ensemble.feature >= 0])
    with np.errstate(over="ignore"):  # a missing-only split's threshold is the lowest float
        odd = np.concatenate([cuts, np.nextafter(cuts, np.inf), np.nextafter(cuts, -np.inf),
                              [np.nan, np.inf, -np.inf, -0.0, 0.0]])
    out = rng.uniform(-1, 11, size=(n, columns))
    picked = rng.random(out.shape) < 0.6
    out[picked] = rng.choice(odd, int(picked.sum()))
    return out


def _walked(ensemble: TreeEnsemble, x: np.ndarray) -> np.ndarray:
    walk = trees_module._walk_kernel()
    assert walk is not None
    out = np.empty(len(x))
    walk(np.ascontiguousarray(x), ensemble.feature, ensemble.threshold, ensemble.left, ensemble.right, ensemble.value,
         ensemble.missing_left, ensemble.base, out)
    return out


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


@pytest.mark.parametrize("leaves", [2, 31, 64])
def test_the_leaf_masks_give_the_walks_bits(leaves: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trees of 2, 31 and 64 leaves (a 64-bit word full) with missing values both ways: ``predict`` through the
    masks, the compiled walk row by row and the numpy walk agree to the bit on 1, 2 and 3,000 rows (more than a
    block of ``trees_jit.BLOCK_ROWS``)."""
    rng = np.random.default_rng(leaves)
    x = rng.uniform(0, 10, size=(3000, 4))
    x[rng.random(x.shape) < 0.15] = np.nan
    y = np.where(np.isnan(x[:, 0]), 1.0, np.sin(np.nan_to_num(x[:, 1]))) + np.nan_to_num(x[:, 2]) / 7
    ensemble = fit_trees(x, y + 0.1 * rng.standard_normal(3000), rounds=40, max_leaves=leaves, min_leaf=1)
    assert gemm_kernel.load()
    masks = ensemble._masks
    assert masks is not None
    assert ((ensemble.feature >= 0).sum(axis=1) + 1).max() == leaves  # the trees are as large as asked
    assert masks[1].dtype == (np.uint32 if leaves <= 32 else np.uint64)  # 64 leaves: every bit of a 64-bit word
    test = _rows(ensemble, rng, 3000, 4)
    for n in (1, 2, 3000):
        rows = test[:n]
        fast = ensemble.predict(rows)
        assert _same_bits(fast, _walked(ensemble, rows)), n
        monkeypatch.setattr(trees_module, "USE_MASKS", False)
        assert _same_bits(fast, ensemble.predict(rows)), n
        monkeypatch.setattr(trees_module, "USE_MASKS", True)
        if n > 1:  # the numpy walk of one row alone sums pairwise (docs/accuracy.md, calfit18)
            with monkeypatch.context() as m:
                m.setenv("PERFMODEL_NO_JIT", "1")
                assert _same_bits(fast, ensemble.predict(rows)), n


def test_the_masks_of_every_code_match_the_walk_of_a_value_with_that_code() -> None:
    """One row per code of each split column (below every threshold, on each, between, above all, nan), the other
    columns nan or a threshold: each row's mask walk against the walk, tree by tree via a one-tree ensemble."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 10, size=(800, 3))
    x[rng.random(x.shape) < 0.2] = np.nan
    ensemble = fit_trees(x, np.nan_to_num(x[:, 0]) + np.isnan(x[:, 1]), rounds=12, min_leaf=2)
    assert gemm_kernel.load()
    used, cuts, starts = ensemble._split_points
    values = []
    for c in range(len(used)):
        column = cuts[starts[c]:starts[c + 1]]
        values.append(np.concatenate([[column[0] - 1.0], column, (column[:-1] + column[1:]) / 2, [column[-1] + 1.0,
                                                                                                    np.nan]]))
    count = max(map(len, values))
    rows = np.full((count * 3, 3), np.nan)
    for c, j in enumerate(used):
        rows[:len(values[c]), j] = values[c]
        rows[count:count + len(values[c]), j] = values[c][::-1]
    rows[2 * count:] = _rows(ensemble, rng, count, 3)
    for t in range(len(ensemble.feature)):
        one = TreeEnsemble(*(a[t:t + 1] for a in (ensemble.feature, ensemble.threshold, ensemble.left,
                                                  ensemble.right, ensemble.value)), 0.0, ensemble.missing_left[t:t + 1])
        assert one._masks is not None
        assert _same_bits(one.predict(rows), _walked(one, rows)), t


def test_trees_the_masks_cannot_hold_are_walked() -> None:
    """More than 64 leaves in a tree, a node reached twice, a cycle, a nan threshold: no masks, the walk's answers."""
    rng = np.random.default_rng(9)
    x = rng.uniform(0, 10, size=(2000, 3))
    x[rng.random(x.shape) < 0.1] = np.nan
    y = np.sin(np.nan_to_num(x[:, 0]) * 3) + np.nan_to_num(x[:, 1]) / 5 + 0.05 * rng.standard_normal(2000)
    assert gemm_kernel.load()
    large = fit_trees(x, y, rounds=5, max_leaves=80, min_leaf=1)
    assert ((large.feature >= 0).sum(axis=1) + 1).max() > trees_jit.MAX_LEAVES
    small = fit_trees(x, y, rounds=5)
    shared = TreeEnsemble(small.feature, small.threshold, small.left.copy(), small.right.copy(), small.value, 0.5,
                          small.missing_left)
    shared.right[:, 0] = np.where(small.feature[:, 0] >= 0, small.left[:, 0], small.right[:, 0])  # both to one child
    cyclic = TreeEnsemble(small.feature, small.threshold, small.left.copy(), small.right, small.value, 0.5,
                          small.missing_left)
    cyclic.left[:, 0] = np.where(small.feature[:, 0] >= 0, 0, small.left[:, 0])  # the root its own left child
    nan_cut = TreeEnsemble(small.feature, small.threshold.copy(), small.left, small.right, small.value, 0.5,
                           small.missing_left)
    nan_cut.threshold[0, 0] = np.nan
    test = _rows(small, rng, 500, 3)
    for ensemble in (large, shared, cyclic, nan_cut):
        assert ensemble._masks is None
        assert _same_bits(ensemble.predict(test), _walked(ensemble, test))
    assert small._masks is not None
