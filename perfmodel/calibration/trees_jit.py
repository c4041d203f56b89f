"""The numba walk behind ``TreeEnsemble.predict``: imported on first use (numba costs ~0.4 s to import).

One row and one tree at a time, root to leaf, with the comparisons of the numpy walk (``TreeEnsemble._predict``:
a nan goes the ``missing_left`` side, else left when ``value <= threshold``; at most ``nodes`` steps) and the
trees' leaf values summed in tree order as numpy's sum over the trees axis does, so the answers are bit-for-bit
the numpy walk's (``tests/calibration/test_residual_trees.py`` checks them).
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from perfmodel.ops.base import FloatArray, IntArray


@numba.njit(cache=True, error_model="numpy")
def walk(x: FloatArray, feature: IntArray, threshold: FloatArray, left: IntArray, right: IntArray,
         value: FloatArray, missing_left: np.ndarray[Any, np.dtype[np.bool_]], base: float, out: FloatArray) -> None:
    """``out[r]`` = ``base`` + the sum over trees of the leaf row ``r`` of ``x`` reaches (trees x nodes arrays)."""
    n_trees, n_nodes = feature.shape
    for r in range(x.shape[0]):
        total = 0.0
        for t in range(n_trees):
            node = 0
            for _ in range(n_nodes):
                split = feature[t, node]
                if split < 0:
                    break
                v = x[r, split]
                go_left = missing_left[t, node] if math.isnan(v) else v <= threshold[t, node]
                node = left[t, node] if go_left else right[t, node]
            total = value[t, node] if t == 0 else total + value[t, node]
        out[r] = base + total
