"""Gradient-boosted regression trees: LightGBM's least-absolute-deviation boosting, stored as numpy arrays.

``fit_trees`` boosts with LightGBM (``objective="l1"``: each round fits a tree to the sign of the residuals,
leaves grown best-first up to ``max_leaves``, each leaf at least ``min_leaf`` rows, its value the median
residual times ``learning_rate``; features cut into at most ``max_bins`` bins) on one thread, and exports the
trees (``Booster.dump_model``) into padded arrays (``TreeEnsemble``): the stored calibration needs no
LightGBM to load or predict, and calibrations stored by the earlier hand-written numpy boosting (the same
arrays) still load. All trees are walked together, level by level, so predicting costs about ``depth``
numpy operations whatever the number of trees.

LightGBM replaced the hand-written numpy boosting (same rounds, rate, leaves, bins) after a comparison on
the trees' own 3-fold held-out loss (docs/calibration.md): as accurate (Vidur A100 0.054 vs 0.055,
DeepBench V100 0.125 vs 0.121, T4 0.127 vs 0.128) and 9-15x faster; scikit-learn's
``HistGradientBoostingRegressor`` was as accurate and 3-5x slower than LightGBM.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightgbm
import numpy as np

from perfmodel.ops.base import FloatArray, IntArray

ROUNDS = 300
LEARNING_RATE = 0.05
MAX_LEAVES = 31
MIN_LEAF = 5
MAX_BINS = 64
PROGRESS_ROUNDS = 30  # rounds between two progress calls
PREDICT_ROWS = 2048  # rows walked through the trees at once
MAX_MASK_BYTES = 64 * 2 ** 20  # the leaf masks' words at most (else the walk)
USE_MASKS = True  # the compiled prediction through leaf masks (``trees_jit.mask_walk``), else the walk: same bits
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
        """Sum of the trees per row of ``x`` (rows x columns): compiled where the process uses the compiled kernels
        (``gemm_kernel.use_kernel``), one row of each set the splits cannot tell apart (``_alike_rows``), through
        the leaf masks (``trees_jit.mask_walk``) where the trees allow them (``_masks``), else the walk
        (``trees_jit.walk``, rows sorted by their first two columns): the same answers to the bit; else in numpy
        ``PREDICT_ROWS`` rows at a time (memory: a few trees x ``PREDICT_ROWS`` arrays)."""
        walk = _compiled_walk(len(x) * len(self.feature))
        if walk is not None:
            x = np.asarray(x, dtype=float)
            codes = self._codes(x)
            if codes is None:
                return self._walk(walk, x)
            first, row_of = _alike(codes)
            masks = self._masks if USE_MASKS else None
            if masks is not None and codes.dtype == np.uint8:
                return self._mask_walk(masks, codes[first])[row_of]
            return self._walk(walk, x[first])[row_of]
        if len(x) > PREDICT_ROWS:
            return np.concatenate([self._predict(x[i:i + PREDICT_ROWS]) for i in range(0, len(x), PREDICT_ROWS)])
        return self._predict(x)

    def _walk(self, walk: Callable[..., None], x: FloatArray) -> FloatArray:
        """``walk`` over the rows sorted by their first two columns (residual trees: class, log10 FLOPs)."""
        order = np.lexsort((x[:, 1], x[:, 0])) if x.ndim == 2 and x.shape[1] >= 2 else np.arange(len(x))
        walked = np.empty(len(x))
        walk(np.ascontiguousarray(x[order], dtype=float), self.feature, self.threshold, self.left, self.right,
             self.value, self.missing_left, self.base, walked)
        out = np.empty(len(x))
        out[order] = walked
        return out

    @functools.cached_property
    def _split_points(self) -> tuple[IntArray, FloatArray, IntArray]:
        """The columns the trees split on, each one's distinct thresholds (ascending) one after another, and where
        each column's start (and the last one's end)."""
        used = np.unique(self.feature[self.feature >= 0])
        cuts = [np.unique(self.threshold[self.feature == j]) for j in used]
        starts = np.cumsum([0] + [len(c) for c in cuts], dtype=np.int64)
        return used.astype(np.int64), np.concatenate(cuts or [np.empty(0)]).astype(float), starts

    def _alike_rows(self, x: FloatArray) -> tuple[IntArray | None, IntArray]:
        """Rows of ``x`` that every split sends the same way: ``(first, row_of)`` with ``x[first]`` one row of each
        such set and ``row_of`` each row's set, or ``(None, ...)`` where the rows cannot be told apart this way
        (``_codes``: rows with equal codes in every split column reach the same leaf in every tree, and their sums
        are the same floats: the walk adds leaf values in tree order)."""
        codes = self._codes(x)
        if codes is None or len(x) < 2:
            return None, np.arange(len(x))
        return _alike(codes)

    def _codes(self, x: FloatArray) -> np.ndarray[Any, np.dtype[np.unsignedinteger[Any]]] | None:
        """Rows x split columns (``_split_points``): how many of the column's distinct thresholds lie below the
        row's value, or that count + 1 where it is nan (None where ``x`` lacks a split column). A split on column j
        at threshold t sends v left when v <= t; with column j's distinct thresholds t_0 < t_1 < ..., v <= t_k
        exactly when k >= (the number of t_i < v), so that number (nan: a code of its own) fixes every split on
        column j."""
        used, cuts, starts = self._split_points
        if x.ndim != 2 or not len(used) or int(used[-1]) >= x.shape[1]:
            return None
        counts = np.diff(starts)
        codes = np.empty((len(x), len(used)), dtype=np.uint8 if counts.max() < 255 else np.uint32)
        if codes.dtype == np.uint8 and (kernel := _codes_kernel()) is not None:
            kernel(np.ascontiguousarray(x), used, cuts, starts, codes)
        else:
            for c, j in enumerate(used):
                column = x[:, j]
                codes[:, c] = np.searchsorted(cuts[starts[c]:starts[c + 1]], column, side="left")
                codes[np.isnan(column), c] = counts[c] + 1
        return codes

    @functools.cached_property
    def _masks(self) -> tuple[IntArray, np.ndarray[Any, Any], IntArray] | None:
        """(column_start, words, leaf_node) for ``trees_jit.mask_walk``: ``trees_jit.leaf_masks``' tables laid out by
        split column, ``words[column_start[c] + k, t]`` tree t's word for code k of column c (all bits set where t
        does not split on c; 32-bit words where every tree has at most 32 leaves); None where the kernels do not
        load, a reachable split's threshold is nan, the trees do not allow masks or the words would take more than
        ``MAX_MASK_BYTES``."""
        kernels = _masks_kernels()
        used, cuts, starts = self._split_points
        inner = self.feature >= 0
        if kernels is None or not len(used) or np.isnan(self.threshold[inner]).any():
            return None
        counts = np.diff(starts).astype(np.int64)
        column_start = np.concatenate([[0], np.cumsum(counts + 2)]).astype(np.int64)
        n_trees = len(self.feature)
        if column_start[-1] * n_trees * 8 > MAX_MASK_BYTES:
            return None
        slot = np.full(self.feature.shape, -1, dtype=np.int64)
        cut = np.zeros(self.feature.shape, dtype=np.int64)
        for c, j in enumerate(used.tolist()):
            on = self.feature == j
            slot[on] = c
            cut[on] = np.searchsorted(cuts[starts[c]:starts[c + 1]], self.threshold[on], side="left")
        ok, tree_slots, slot_col, slot_off, table, leaf_node = kernels[0](
            self.feature, self.left, self.right, self.missing_left, slot, cut, counts)
        if not ok:
            return None
        leaves = int(inner.sum(axis=1).max()) + 1  # at most this many leaves a tree (inner nodes + 1)
        words = np.full((int(column_start[-1]), n_trees), np.iinfo(np.uint64).max, dtype=np.uint64)
        tree = np.repeat(np.arange(n_trees), np.diff(tree_slots))  # each slot's tree
        length = counts[slot_col] + 2
        entry = np.repeat(slot_off - np.cumsum(length) + length, length) + np.arange(int(length.sum()))
        at = np.repeat(column_start[slot_col] - np.cumsum(length) + length, length) + np.arange(int(length.sum()))
        words[at, np.repeat(tree, length)] = table[entry]
        return column_start, words.astype(np.uint32) if leaves <= 32 else words, leaf_node

    def _mask_walk(self, masks: tuple[IntArray, np.ndarray[Any, Any], IntArray],
                   codes: np.ndarray[Any, np.dtype[np.uint8]]) -> FloatArray:
        """``trees_jit.mask_walk`` of rows given by their ``_codes``."""
        kernels = _masks_kernels()
        assert kernels is not None
        out = np.empty(len(codes))
        kernels[1](np.ascontiguousarray(codes), *masks, self.value, self.base, out)
        return out

    def _predict(self, x: FloatArray) -> FloatArray:
        """All trees walked together, one level a step, on flat indices (tree × nodes + node; row × columns +
        column): ``np.take`` on 1-D arrays instead of 2-D fancy indexing."""
        n_trees, n_nodes = self.feature.shape
        x = np.ascontiguousarray(x, dtype=float)
        values, row_start = x.ravel(), (np.arange(len(x)) * x.shape[1])[None, :]
        feature, threshold = self.feature.ravel(), self.threshold.ravel()
        left, right, missing_left = self.left.ravel(), self.right.ravel(), self.missing_left.ravel()
        tree_start = (np.arange(n_trees) * n_nodes)[:, None]
        node = np.repeat(tree_start, len(x), axis=1)  # each tree's root, per row
        for _ in range(n_nodes):
            split = feature.take(node)
            inner = split >= 0
            if not inner.any():
                break
            value = values.take(row_start + np.maximum(split, 0))
            go_left = np.where(np.isnan(value), missing_left.take(node), value <= threshold.take(node))
            node = np.where(inner, tree_start + np.where(go_left, left.take(node), right.take(node)), node)
        out: FloatArray = self.base + self.value.ravel().take(node).sum(axis=0)
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


def _alike(codes: np.ndarray[Any, np.dtype[np.unsignedinteger[Any]]]) -> tuple[IntArray, IntArray]:
    """(first, row_of): one row of each set of equal rows of ``codes`` and each row's set."""
    keys = np.ascontiguousarray(codes).view(np.dtype((np.void, codes.shape[1] * codes.itemsize))).ravel()
    _, first, row_of = np.unique(keys, return_index=True, return_inverse=True)
    return first, row_of.ravel()


def _compiled_walk(elements: int) -> Callable[..., None] | None:
    """``trees_jit.walk`` where ``elements`` (rows x trees) go through the compiled kernels (once they are loaded,
    always: ``gemm_kernel.use_kernel``), else None (numpy)."""
    from perfmodel.search import gemm_kernel

    return _walk_kernel() if gemm_kernel.use_kernel(elements) else None


@functools.cache
def _walk_kernel() -> Callable[..., None] | None:
    try:
        from perfmodel.calibration import trees_jit
    except ImportError:  # pragma: no cover - numba is a dependency; the numpy walk covers its absence
        return None
    walk: Callable[..., None] = trees_jit.walk
    return walk


@functools.cache
def _masks_kernels() -> tuple[Callable[..., Any], Callable[..., None]] | None:
    """(``trees_jit.leaf_masks``, ``trees_jit.mask_walk``), or None where numba does not import."""
    try:
        from perfmodel.calibration import trees_jit
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    return trees_jit.leaf_masks, trees_jit.mask_walk


@functools.cache
def _codes_kernel() -> Callable[..., None] | None:
    try:
        from perfmodel.calibration import trees_jit
    except ImportError:  # pragma: no cover - numba is a dependency
        return None
    codes: Callable[..., None] = trees_jit.split_codes
    return codes


def _finite(a: FloatArray) -> list[list[float | None]]:
    return [[float(v) if np.isfinite(v) else None for v in row] for row in a]


def _export(booster: lightgbm.Booster, nodes: int) -> TreeEnsemble:
    """LightGBM's trees as ``TreeEnsemble`` arrays (``nodes`` per tree at most; node 0 the root), read from its
    text model (``Booster.model_to_string``: one line of numbers per array and tree; 10x faster than
    ``dump_model``'s JSON): internal node i stays i, leaf j (a child written ~j) becomes node num_leaves − 1 + j.

    A split whose feature had no missing value in training (missing type None) sends nan where 0.0 goes, as
    LightGBM does; with missing type NaN, nan goes the ``default_left`` side (``decision_type`` bit 1)."""
    blocks = booster.model_to_string().split("\nTree=")[1:]
    feature, left, right = (np.full((len(blocks), nodes), -1, dtype=np.int64) for _ in range(3))
    threshold, value = np.full((len(blocks), nodes), np.inf), np.zeros((len(blocks), nodes))
    missing = np.ones((len(blocks), nodes), dtype=bool)
    for t, block in enumerate(blocks):
        lines = dict(line.split("=", 1) for line in block.split("\n")[1:] if "=" in line)
        leaves = int(lines["num_leaves"])
        value[t, leaves - 1:2 * leaves - 1] = np.array(lines["leaf_value"].split(), dtype=float)
        if leaves < 2:
            continue
        inner = slice(0, leaves - 1)
        decision = np.array(lines["decision_type"].split(), dtype=np.int64)
        if (decision & 1).any():
            raise ValueError("calibration trees: LightGBM categorical splits are not supported")
        cut = np.array(lines["threshold"].split(), dtype=float)
        feature[t, inner] = np.array(lines["split_feature"].split(), dtype=np.int64)
        threshold[t, inner] = np.clip(cut, LOWEST, -LOWEST)
        missing[t, inner] = np.where((decision >> 2) & 3 == 2, (decision & 2) > 0, cut >= 0.0)
        for name, out in (("left_child", left), ("right_child", right)):
            child = np.array(lines[name].split(), dtype=np.int64)
            out[t, inner] = np.where(child >= 0, child, leaves - 1 + ~child)
    return TreeEnsemble(feature, threshold, left, right, value, 0.0, missing)


def fit_trees(x: FloatArray, y: FloatArray, *, rounds: int = ROUNDS, learning_rate: float = LEARNING_RATE,
              max_leaves: int = MAX_LEAVES, min_leaf: int = MIN_LEAF, max_bins: int = MAX_BINS, seed: int = 0,
              progress: Callable[[float], None] | None = None) -> TreeEnsemble:
    """Boost ``rounds`` trees of |y − f(x)| (rows x columns of ``x``; nan: missing) with LightGBM on one thread.

    ``progress``: called with the fraction of rounds done, every ``PROGRESS_ROUNDS`` rounds."""
    booster = _train(x, y, rounds, learning_rate, max_leaves, min_leaf, max_bins, seed, progress)
    return _export(booster, 2 * max_leaves - 1)


def held_out_predict(x: FloatArray, y: FloatArray, x_test: FloatArray, *, seed: int = 0,
                     progress: Callable[[float], None] | None = None) -> FloatArray:
    """What ``fit_trees(x, y)`` predicts for ``x_test``, straight from LightGBM (no export: the trees of a
    cross-validation fold are thrown away)."""
    booster = _train(x, y, ROUNDS, LEARNING_RATE, MAX_LEAVES, MIN_LEAF, MAX_BINS, seed, progress)
    out: FloatArray = np.asarray(booster.predict(x_test, num_threads=1), dtype=float)
    return out


def _train(x: FloatArray, y: FloatArray, rounds: int, learning_rate: float, max_leaves: int, min_leaf: int,
           max_bins: int, seed: int, progress: Callable[[float], None] | None) -> lightgbm.Booster:
    if x.ndim != 2 or y.shape != (len(x),) or not len(x):
        raise ValueError(f"calibration trees: need rows x columns and one target per row, got {x.shape}, {y.shape}")
    params = {"objective": "l1", "learning_rate": learning_rate, "num_leaves": max_leaves,
              "min_data_in_leaf": min_leaf, "max_bin": max_bins, "num_threads": 1, "seed": seed,
              "deterministic": True, "force_row_wise": True, "verbose": -1, "min_data_in_bin": 1,
              "feature_pre_filter": False}
    callbacks = []
    if progress is not None:
        report = progress

        def each_round(env: Any) -> None:
            if (env.iteration + 1) % PROGRESS_ROUNDS == 0:
                report((env.iteration + 1) / rounds)
        callbacks.append(each_round)
    data = lightgbm.Dataset(x, y, params={"max_bin": max_bins, "min_data_in_bin": 1, "verbose": -1,
                                          "feature_pre_filter": False}, free_raw_data=True)
    return lightgbm.train(params, data, num_boost_round=rounds, callbacks=callbacks)


__all__ = ["TreeEnsemble", "fit_trees", "held_out_predict"]
