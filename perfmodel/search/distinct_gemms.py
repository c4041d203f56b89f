"""GEMM schedule choices over many rows: repeated shapes searched once, choices made over disjoint row sets merged
(used by ``perfmodel.roofline``; split from it to keep the module small)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from perfmodel.machine import MachineTables
from perfmodel.ops.base import FloatArray
from perfmodel.search import choice_memo
from perfmodel.search.gemm_cost import GemmChoice, best_gemms
from perfmodel.search.gemm_space import GemmCandidates


def merge_choices(parts: Sequence[tuple[np.ndarray[Any, np.dtype[np.bool_]], GemmChoice]], name: str
           ) -> np.ndarray[Any, Any]:
    """One field of choices made over disjoint row sets: each part's values at its rows."""
    out = np.empty(sum(int(where.sum()) for where, _ in parts), dtype=getattr(parts[0][1], name).dtype)
    for where, part in parts:
        out[where] = getattr(part, name)
    return out


DISTINCT_FROM_GEMMS = 64  # from this many GEMMs, repeated shapes are searched once (np.unique costs less)


def best_distinct(t: MachineTables, space: GemmCandidates, *columns: FloatArray) -> GemmChoice:
    """``best_gemms`` of each distinct row of ``columns`` (batch, m, n, k, element size, peak, compulsory bytes),
    spread back to every row: the same answers, one search per shape (a model or a table repeats shapes)."""
    if columns[0].size < DISTINCT_FROM_GEMMS:
        return best_gemms(t, space, *columns)
    bits = [np.asarray(c, dtype=np.float64).view(np.int64) for c in columns]  # rows equal bit for bit
    order = np.lexsort(bits)
    starts = np.zeros(order.size, dtype=bool)
    starts[0] = True
    for values in bits:  # one column at a time: no ops x 7 copy
        ordered = values[order]
        starts[1:] |= ordered[1:] != ordered[:-1]
    if starts.all():
        return best_gemms(t, space, *columns)
    inverse = np.empty(order.size, dtype=np.intp)
    inverse[order] = np.cumsum(starts) - 1
    first = order[starts]
    distinct = tuple(c[first] for c in columns)
    memo = choice_memo.active()  # a chunked table's earlier chunks searched most of its shapes already
    choice = best_gemms(t, space, *distinct) if memo is None else memo.search(
        t, space, distinct, lambda *c: best_gemms(t, space, *c))
    return GemmChoice(*(getattr(choice, f.name)[inverse] for f in dataclasses.fields(GemmChoice)))
