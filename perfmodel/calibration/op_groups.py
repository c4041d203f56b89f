"""Ops grouped by their class, as the per-class column readers of applying a calibration want them (``shape``,
``classes``, ``fields``): computed once per batch in C loops (``map``, ``np.argsort``, ``operator.itemgetter``)
rather than a Python loop over the ops in each reader (10k ops: ~1.5 ms each); and a guess whether a batch repeats
ops (``probably_distinct``) from a sample of them."""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

import numpy as np

from perfmodel.ops.base import IntArray, Op

SAMPLE = 64  # ops hashed to guess whether a batch repeats ops (``probably_distinct``)

Group = tuple[type[Op], IntArray, list[Op]]


def by_type(ops: Sequence[Op]) -> list[Group]:
    """(class, rows, members) per op class of ``ops``, the classes in first-seen order, each class's rows ascending
    and ``members`` its ops in that order (``members[j] is ops[rows[j]]``)."""
    kinds = list(map(type, ops))
    number = {kind: i for i, kind in enumerate(dict.fromkeys(kinds))}
    if len(number) <= 1:
        return [(kinds[0], np.arange(len(ops)), list(ops))] if kinds else []
    code = np.fromiter(map(number.__getitem__, kinds), dtype=np.intp, count=len(kinds))
    order = np.argsort(code, kind="stable")
    bounds = np.searchsorted(code[order], np.arange(len(number) + 1))
    out: list[Group] = []
    for i, kind in enumerate(number):
        rows = order[bounds[i]:bounds[i + 1]]
        picked = itemgetter(*rows.tolist())(ops)
        out.append((kind, rows, list(picked) if len(rows) > 1 else [picked]))
    return out


def probably_distinct(ops: Sequence[Op]) -> bool:
    """Whether ``SAMPLE`` ops spread evenly over ``ops`` are all distinct: a guess at which way is faster
    (``model.predict_calibrated``: calibrate every row, or the distinct ops then take), never what the answer is.
    False where one does not hash."""
    step = max(1, len(ops) // SAMPLE)
    try:
        sample = set(ops[::step])
    except TypeError:
        return False
    return len(sample) == len(range(0, len(ops), step))


__all__ = ["Group", "by_type", "probably_distinct"]
