"""The numba walk behind ``TreeEnsemble.predict``: imported on first use (numba costs ~0.4 s to import).

One row and one tree at a time, root to leaf, with the comparisons of the numpy walk (``TreeEnsemble._predict``:
a nan goes the ``missing_left`` side, else left when ``value <= threshold``; at most ``nodes`` steps) and the
trees' leaf values summed in tree order as numpy's sum over the trees axis does, so the answers are bit-for-bit
the numpy walk's (``tests/calibration/test_residual_trees.py`` checks them). The same answers through leaf masks
(QuickScorer: ``leaf_masks`` builds them, ``mask_walk`` applies them; ``tests/calibration/test_leaf_masks.py``).
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np

from perfmodel.ops.base import FloatArray, IntArray

BLOCK_ROWS = 1024  # rows walked through each tree in turn (their running sums stay in cache)


@numba.njit(cache=True, error_model="numpy")
def walk(x: FloatArray, feature: IntArray, threshold: FloatArray, left: IntArray, right: IntArray,
         value: FloatArray, missing_left: np.ndarray[Any, np.dtype[np.bool_]], base: float, out: FloatArray) -> None:
    """``out[r]`` = ``base`` + the sum over trees of the leaf row ``r`` of ``x`` reaches (trees x nodes arrays), one
    tree at a time over each block of ``BLOCK_ROWS`` rows: where neighbouring rows are alike (``TreeEnsemble.predict``
    sorts them), each tree's branches go the same way row after row and the branch predictor follows them (4,800
    calibrated ops x 300 trees: 26 -> 19 ms against row by row through every tree; unsorted, tree by tree was 38).
    Two rows go down each tree side by side (a row at its leaf waits there for the other): two independent chains
    of loads for the core to overlap (1,268 rows x 300 trees: 8.5 -> 6.7 ms; 3, 4, 6 or 8 rows: no faster).
    Each row's leaf values are added in tree order: the same floats as row by row."""
    n_trees, n_nodes = feature.shape
    n_rows = x.shape[0]
    total = np.empty(BLOCK_ROWS)
    for start in range(0, n_rows, BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, n_rows)
        for t in range(n_trees):
            r = start
            while r + 2 <= stop:  # rows r and r + 1 together
                node0 = 0
                node1 = 0
                for _ in range(n_nodes):
                    split0 = feature[t, node0]
                    split1 = feature[t, node1]
                    if split0 < 0 and split1 < 0:
                        break
                    if split0 >= 0:
                        v = x[r, split0]
                        go_left = missing_left[t, node0] if math.isnan(v) else v <= threshold[t, node0]
                        node0 = left[t, node0] if go_left else right[t, node0]
                    if split1 >= 0:
                        v = x[r + 1, split1]
                        go_left = missing_left[t, node1] if math.isnan(v) else v <= threshold[t, node1]
                        node1 = left[t, node1] if go_left else right[t, node1]
                if t == 0:
                    total[r - start] = value[t, node0]
                    total[r + 1 - start] = value[t, node1]
                else:
                    total[r - start] += value[t, node0]
                    total[r + 1 - start] += value[t, node1]
                r += 2
            if r < stop:  # the block's last row, alone
                node = 0
                for _ in range(n_nodes):
                    split = feature[t, node]
                    if split < 0:
                        break
                    v = x[r, split]
                    go_left = missing_left[t, node] if math.isnan(v) else v <= threshold[t, node]
                    node = left[t, node] if go_left else right[t, node]
                if t == 0:
                    total[r - start] = value[t, node]
                else:
                    total[r - start] += value[t, node]
        for r in range(start, stop):
            out[r] = base + total[r - start]


@numba.njit(cache=True, error_model="numpy")
def split_codes(x: FloatArray, used: IntArray, cuts: FloatArray, starts: IntArray,
                codes: np.ndarray[Any, np.dtype[np.uint8]]) -> None:
    """``codes[r, c]`` = the number of ``cuts[starts[c]:starts[c + 1]]`` (column ``used[c]``'s distinct thresholds,
    ascending) below ``x[r, used[c]]`` (``np.searchsorted(..., side="left")``), or that count + 1 where it is nan."""
    for r in range(x.shape[0]):
        for c in range(used.shape[0]):
            v = x[r, used[c]]
            if math.isnan(v):
                codes[r, c] = starts[c + 1] - starts[c] + 1
                continue
            lo, hi = starts[c], starts[c + 1]
            while lo < hi:  # first cut >= v
                mid = (lo + hi) // 2
                if cuts[mid] < v:
                    lo = mid + 1
                else:
                    hi = mid
            codes[r, c] = lo - starts[c]


# de Bruijn sequence for the index of a 64-bit word's lowest set bit: ((b & -b) * DE_BRUIJN) >> 58 -> its position
DE_BRUIJN = 0x03F79D71B4CB0A89
LOWEST_BIT = np.zeros(64, dtype=np.int64)
for _bit in range(64):
    LOWEST_BIT[(((1 << _bit) * DE_BRUIJN) & (2 ** 64 - 1)) >> 58] = _bit
MAX_LEAVES = 64  # leaves a tree may have for the leaf masks (one 64-bit word per tree)


@numba.njit(cache=True, error_model="numpy")
def _tree_order(t: int, feature: IntArray, left: IntArray, right: IntArray, order: IntArray, first_leaf: IntArray,
                leaf_node: IntArray, seen: np.ndarray[Any, np.dtype[np.bool_]], stack: IntArray) -> tuple[int, int]:
    """Tree ``t``'s nodes reachable from its root, depth first, left before right (``order``; the leaves then come
    left to right: ``leaf_node[t, i]`` the node of leaf i, ``first_leaf[node]`` the number of its subtree's first
    leaf): (nodes reached, leaves), or (-1, -1) where a node is reached twice or a child is out of range, or the
    tree has more than ``MAX_LEAVES`` leaves."""
    n_nodes = feature.shape[1]
    seen[:] = False
    reached, leaves, top = 0, 0, 1
    stack[0] = 0
    while top > 0:
        top -= 1
        node = stack[top]
        if node < 0 or node >= n_nodes or seen[node]:
            return -1, -1
        seen[node] = True
        order[reached] = node
        reached += 1
        first_leaf[node] = leaves
        if feature[t, node] < 0:
            if leaves == MAX_LEAVES:
                return -1, -1
            leaf_node[t, leaves] = node
            leaves += 1
        else:
            stack[top] = right[t, node]
            stack[top + 1] = left[t, node]
            top += 2
    return reached, leaves


@numba.njit(cache=True, error_model="numpy")
def _low_bits(count: int) -> np.uint64:
    """A 64-bit word with its ``count`` lowest bits set (0..64)."""
    if count >= 64:
        return np.uint64(0xFFFFFFFFFFFFFFFF)
    return (np.uint64(1) << np.uint64(count)) - np.uint64(1)


@numba.njit(cache=True, error_model="numpy")
def leaf_masks(feature: IntArray, left: IntArray, right: IntArray, missing_left: np.ndarray[Any, np.dtype[np.bool_]],
               node_slot: IntArray, node_cut: IntArray, cuts: IntArray
               ) -> tuple[bool, IntArray, IntArray, IntArray, np.ndarray[Any, np.dtype[np.uint64]], IntArray]:
    """The trees as leaf masks for ``mask_walk`` (QuickScorer, Lucchese et al., SIGIR 2015): each tree's leaves
    numbered left to right (bit i: leaf i), and per tree and split column a table, one 64-bit word per code of the
    column (0..``cuts[c]``: how many of its distinct thresholds lie below the value; ``cuts[c]`` + 1: nan), the AND
    of the masks of the tree's nodes on that column the code sends right (each mask: every leaf but those of the
    node's left subtree). ``node_slot``: a node's column among the split columns (-1: a leaf); ``node_cut``: its
    threshold's rank among that column's distinct thresholds. Returns (ok, tree_slots, slot_col, slot_off, table,
    leaf_node): tree t's tables are slots ``tree_slots[t]`` .. ``tree_slots[t + 1]``, each for column
    ``slot_col[s]`` from ``table[slot_off[s]]``; ``leaf_node[t, i]``: the node of leaf i. ok False (the rest
    meaningless) where a tree is not a tree or has too many leaves (``_tree_order``)."""
    n_trees, n_nodes = feature.shape
    leaf_node = np.zeros((n_trees, MAX_LEAVES), dtype=np.int64)
    tree_slots = np.zeros(n_trees + 1, dtype=np.int64)
    order, first_leaf = np.zeros(n_nodes, dtype=np.int64), np.zeros(n_nodes, dtype=np.int64)
    seen, stack = np.zeros(n_nodes, dtype=np.bool_), np.zeros(2 * n_nodes + 2, dtype=np.int64)
    slot_of = np.full(cuts.shape[0], -1, dtype=np.int64)  # per split column, its slot in the tree at hand
    n_slots, n_entries = 0, 0
    for t in range(n_trees):  # first pass: how many tables, how many words
        reached, _ = _tree_order(t, feature, left, right, order, first_leaf, leaf_node, seen, stack)
        if reached < 0:
            return False, tree_slots, tree_slots, tree_slots, np.zeros(0, dtype=np.uint64), leaf_node
        for k in range(reached):
            c = node_slot[t, order[k]]
            if c >= 0 and slot_of[c] != t:
                slot_of[c] = t
                n_slots += 1
                n_entries += cuts[c] + 2
    slot_col, slot_off = np.zeros(n_slots, dtype=np.int64), np.zeros(n_slots, dtype=np.int64)
    table = np.zeros(n_entries, dtype=np.uint64)
    slot_of[:] = -1
    n_slots, n_entries = 0, 0
    for t in range(n_trees):
        reached, leaves = _tree_order(t, feature, left, right, order, first_leaf, leaf_node, seen, stack)
        full = _low_bits(leaves)
        start = n_slots
        for k in range(reached):
            c = node_slot[t, order[k]]
            if c >= 0 and slot_of[c] < 0:
                slot_of[c] = n_slots
                slot_col[n_slots], slot_off[n_slots] = c, n_entries
                table[n_entries:n_entries + cuts[c] + 2] = full
                n_slots += 1
                n_entries += cuts[c] + 2
        for k in range(reached):
            node = order[k]
            c = node_slot[t, node]
            if c < 0:
                continue
            below, above = first_leaf[left[t, node]], first_leaf[right[t, node]]
            mask = full & ~(_low_bits(above - below) << np.uint64(below))
            at = slot_off[slot_of[c]]
            for code in range(node_cut[t, node] + 1, cuts[c] + 1):  # values above the threshold go right
                table[at + code] &= mask
            if not missing_left[t, node]:
                table[at + cuts[c] + 1] &= mask
        for s in range(start, n_slots):
            slot_of[slot_col[s]] = -1
        tree_slots[t + 1] = n_slots
    return True, tree_slots, slot_col, slot_off, table, leaf_node


@numba.njit(cache=True, error_model="numpy")
def mask_walk(codes: np.ndarray[Any, np.dtype[np.uint8]], column_start: IntArray, words: np.ndarray[Any, Any],
              leaf_node: IntArray, value: FloatArray, base: float, out: FloatArray) -> None:
    """``walk``'s answers from ``leaf_masks``' tables laid out by column (``TreeEnsemble._masks``:
    ``words[column_start[c] + k, t]``, tree t's word for code k of split column c, all bits set where t does not
    split on c): per row
    (``codes``: rows x split columns), the AND over the columns of the words at its codes keeps, in each tree, the
    leaves no split on the row's way rules out, and the lowest bit left is the leaf the walk reaches (QuickScorer: a
    leaf left of it lies in the left subtree of a node where the walk went right). No branch on the values, and the
    ANDs run along contiguous rows of words: 1,268 rows x 300 trees 6.7 ms (walk) -> 3.5 (tables per tree and column)
    -> 1.3 (by column, 32-bit words). Each row's leaf values are added in tree order, as ``walk`` does: the same
    floats."""
    n_rows, n_columns = codes.shape
    n_trees = words.shape[1]
    word = np.empty(n_trees, dtype=words.dtype)
    for r in range(n_rows):
        row = words[column_start[0] + codes[r, 0]]
        for t in range(n_trees):
            word[t] = row[t]
        for c in range(1, n_columns):
            row = words[column_start[c] + codes[r, c]]
            for t in range(n_trees):
                word[t] &= row[t]
        total = 0.0
        for t in range(n_trees):
            b = np.uint64(word[t])
            leaf = LOWEST_BIT[((b & (~b + np.uint64(1))) * np.uint64(DE_BRUIJN)) >> np.uint64(58)]
            if t == 0:
                total = value[t, leaf_node[t, leaf]]
            else:
                total += value[t, leaf_node[t, leaf]]
        out[r] = base + total
