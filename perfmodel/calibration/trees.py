"""Gradient-boosted regression trees in numpy: least-absolute-deviation boosting on binned features.

Each round fits a tree to the sign of the current residuals (least squares on the gradient, leaves
grown best-first up to ``max_leaves``, each leaf holding at least ``min_leaf`` rows) and sets each
leaf to the median residual of its rows times ``learning_rate``, as Friedman's LAD-TreeBoost and
scikit-learn's ``HistGradientBoostingRegressor(loss="absolute_error")`` do. Features are cut into at
most ``max_bins`` bins at their quantiles; a missing value (nan) has a bin of its own and goes the side
its split learnt. All trees are stored as padded arrays and walked together, level by level, so
predicting costs about ``depth`` numpy operations whatever the number of trees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.ops.base import FloatArray, IntArray

ROUNDS = 300
LEARNING_RATE = 0.05
MAX_LEAVES = 31
MIN_LEAF = 5
MAX_BINS = 64
LOWEST = -float(np.finfo(float).max)  # the threshold of a split that sends only the missing values left (finite: JSON)


@dataclass(frozen=True)
class TreeEnsemble:
    """Trees x nodes arrays: a node with ``feature`` >= 0 sends a row left when its value is <= ``threshold``
    (nan: when ``missing_left``); a leaf (``feature`` -1) adds ``value``. ``base``: the starting prediction."""

    feature: IntArray
    threshold: FloatArray
    left: IntArray
    right: IntArray
    value: FloatArray
    base: float
    missing_left: np.ndarray[Any, np.dtype[np.bool_]]

    @property
    def features(self) -> int:
        """Columns the trees were fitted on (at least the highest one they split on, plus one)."""
        return int(self.feature.max()) + 1 if self.feature.size else 0

    def predict(self, x: FloatArray) -> FloatArray:
        """Sum of the trees per row of ``x`` (rows x columns)."""
        rows = np.arange(len(x))[None, :]
        trees = np.arange(self.feature.shape[0])[:, None]
        node = np.zeros((self.feature.shape[0], len(x)), dtype=np.int64)
        for _ in range(self.feature.shape[1]):
            feature = self.feature[trees, node]
            inner = feature >= 0
            if not inner.any():
                break
            value = x[rows, np.maximum(feature, 0)]
            go_left = np.where(np.isnan(value), self.missing_left[trees, node], value <= self.threshold[trees, node])
            node = np.where(inner, np.where(go_left, self.left[trees, node], self.right[trees, node]), node)
        out: FloatArray = self.base + self.value[trees, node].sum(axis=0)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"base": self.base, "feature": self.feature.tolist(), "threshold": _finite(self.threshold),
                "left": self.left.tolist(), "right": self.right.tolist(), "value": self.value.tolist(),
                "missing_left": self.missing_left.astype(int).tolist()}

    @staticmethod
    def from_json(data: dict[str, Any]) -> TreeEnsemble:
        try:
            feature = np.asarray(data["feature"], dtype=np.int64)
            threshold = np.asarray([[np.inf if v is None else v for v in row] for row in data["threshold"]],
                                   dtype=float).reshape(feature.shape)
            left, right = np.asarray(data["left"], dtype=np.int64), np.asarray(data["right"], dtype=np.int64)
            value, base = np.asarray(data["value"], dtype=float), float(data["base"])
            missing_left = np.asarray(data["missing_left"], dtype=bool)
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"calibration trees: expected base, feature, threshold, left, right and value "
                             f"as numbers ({err})") from None
        nodes = feature.shape[1] if feature.ndim == 2 else -1
        if nodes < 1 or any(a.shape != feature.shape for a in (threshold, left, right, value, missing_left)):
            raise ValueError("calibration trees: feature, threshold, left, right, value and missing_left must be "
                             "trees x nodes")
        inner = feature >= 0
        if ((inner & ((left <= 0) | (left >= nodes) | (right <= 0) | (right >= nodes))).any()
                or not np.isfinite(value).all()):
            raise ValueError("calibration trees: a child index outside its tree, or a leaf value not finite")
        return TreeEnsemble(feature, threshold, left, right, value, base, missing_left)


def _finite(a: FloatArray) -> list[list[float | None]]:
    return [[float(v) if np.isfinite(v) else None for v in row] for row in a]


def _bin_edges(column: FloatArray, max_bins: int) -> FloatArray:
    """Thresholds between bins: midpoints of distinct values, or quantiles when there are too many."""
    present = column[~np.isnan(column)]
    values = np.unique(present)
    if values.size > max_bins:
        values = np.unique(np.quantile(present, np.linspace(0.0, 1.0, max_bins)))
    out: FloatArray = 0.5 * (values[:-1] + values[1:])
    return out


def _binned(x: FloatArray, edges: list[FloatArray]) -> IntArray:
    """Bin per cell: 0 for nan, 1 + the number of edges below the value otherwise."""
    out = np.zeros(x.shape, dtype=np.int64)
    for j, cuts in enumerate(edges):
        col = x[:, j]
        present = ~np.isnan(col)
        out[present, j] = 1 + np.searchsorted(cuts, col[present], side="left")
    return out


@dataclass(eq=False)
class _Leaf:
    rows: IntArray
    node: int
    sums: FloatArray  # features x bins: gradient sum per bin
    counts: FloatArray  # features x bins: rows per bin
    gain: float = 0.0
    feature: int = -1
    split_bin: int = -1
    missing_left: bool = True


def _histogram(rows: IntArray, flat_bins: IntArray, gradient: FloatArray,
               shape: tuple[int, int]) -> tuple[FloatArray, FloatArray]:
    """Per feature and bin: the gradient sum and the row count of ``rows`` (``flat_bins``: bin + feature offset)."""
    cells = flat_bins[rows].ravel()
    size = shape[0] * shape[1]
    weights = np.repeat(gradient[rows], shape[0])
    sums: FloatArray = np.bincount(cells, weights=weights, minlength=size).astype(float).reshape(shape)
    counts: FloatArray = np.bincount(cells, minlength=size).astype(float).reshape(shape)
    return sums, counts


def _choose_split(leaf: _Leaf, min_leaf: int) -> None:
    """Fill ``leaf``'s best split (largest drop of squared gradient error) over every feature, bin and side
    for the missing values."""
    total_n = float(leaf.rows.size)
    if total_n < 2 * min_leaf:
        return
    total_sum = float(leaf.sums[0].sum())
    cum_sum, cum_n = np.cumsum(leaf.sums, axis=1)[:, :-1], np.cumsum(leaf.counts, axis=1)[:, :-1]
    width = leaf.sums.shape[1] - 1
    best_gain, best = 1e-12, None
    for missing_left in (True, False):  # bin 0 (nan) with the low bins, or with the high ones
        left_sum = cum_sum if missing_left else cum_sum - leaf.sums[:, :1]
        left_n = cum_n if missing_left else cum_n - leaf.counts[:, :1]
        right_sum, right_n = total_sum - left_sum, total_n - left_n
        ok = (left_n >= min_leaf) & (right_n >= min_leaf)
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.where(ok, left_sum ** 2 / left_n + right_sum ** 2 / right_n, -np.inf) - total_sum ** 2 / total_n
        at = int(np.argmax(gain))
        if gain.flat[at] > best_gain:
            best_gain, best = float(gain.flat[at]), (at // width, at % width, missing_left)
    if best is not None:
        leaf.gain, (leaf.feature, leaf.split_bin, leaf.missing_left) = best_gain, best


def _grow(binned: IntArray, flat_bins: IntArray, gradient: FloatArray, shape: tuple[int, int], max_leaves: int,
          min_leaf: int) -> tuple[list[_Leaf], list[tuple[int, int, int, bool, int, int]]]:
    """One tree, best-first: its leaves and its splits (node, feature, bin, missing left, left, right node).
    A child's histogram is counted for the smaller side only; the other is the parent's minus it."""
    rows = np.arange(gradient.size)
    leaves = [_Leaf(rows, 0, *_histogram(rows, flat_bins, gradient, shape))]
    _choose_split(leaves[0], min_leaf)
    splits: list[tuple[int, int, int, bool, int, int]] = []
    used = 1
    while len(leaves) < max_leaves:
        leaf = max(leaves, key=lambda candidate: candidate.gain)
        if leaf.feature < 0:
            break
        cell = binned[leaf.rows, leaf.feature]
        goes_left = np.where(cell == 0, leaf.missing_left, cell <= leaf.split_bin)
        sides = [leaf.rows[goes_left], leaf.rows[~goes_left]]
        small = int(sides[1].size < sides[0].size)
        small_hist = _histogram(sides[small], flat_bins, gradient, shape)
        large_hist = (leaf.sums - small_hist[0], leaf.counts - small_hist[1])
        hists = [small_hist, large_hist] if small == 0 else [large_hist, small_hist]
        children = [_Leaf(side, used + i, *hist) for i, (side, hist) in enumerate(zip(sides, hists, strict=True))]
        splits.append((leaf.node, leaf.feature, leaf.split_bin, leaf.missing_left, used, used + 1))
        used += 2
        leaves.remove(leaf)
        for child in children:
            _choose_split(child, min_leaf)
            leaves.append(child)
    return leaves, splits


def fit_trees(x: FloatArray, y: FloatArray, *, rounds: int = ROUNDS, learning_rate: float = LEARNING_RATE,
              max_leaves: int = MAX_LEAVES, min_leaf: int = MIN_LEAF, max_bins: int = MAX_BINS) -> TreeEnsemble:
    """Boost ``rounds`` trees of |y − f(x)| (rows x columns of ``x``; nan: missing)."""
    edges = [_bin_edges(x[:, j], max_bins) for j in range(x.shape[1])]
    binned = _binned(x, edges)
    shape = (x.shape[1], max((len(e) for e in edges), default=0) + 2)  # features x bins (bin 0: nan)
    flat_bins = binned + np.arange(shape[0]) * shape[1]
    nodes = 2 * max_leaves - 1
    feature, left, right = (np.full((rounds, nodes), -1, dtype=np.int64) for _ in range(3))
    threshold, value = np.full((rounds, nodes), np.inf), np.zeros((rounds, nodes))
    missing = np.ones((rounds, nodes), dtype=bool)
    base = float(np.median(y)) if y.size else 0.0
    prediction = np.full(y.shape, base)
    for t in range(rounds):
        residual = y - prediction
        leaves, splits = _grow(binned, flat_bins, np.sign(residual), shape, max_leaves, min_leaf)
        for node, column, split_bin, missing_left, left_node, right_node in splits:
            feature[t, node], missing[t, node] = column, missing_left
            threshold[t, node] = edges[column][split_bin - 1] if split_bin >= 1 else LOWEST  # nan only, left
            left[t, node], right[t, node] = left_node, right_node
        for leaf in leaves:
            step = learning_rate * float(np.median(residual[leaf.rows]))
            value[t, leaf.node] = step
            prediction[leaf.rows] += step
    return TreeEnsemble(feature, threshold, left, right, value, base, missing)


__all__ = ["TreeEnsemble", "fit_trees"]
