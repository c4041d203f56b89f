"""Ops grouped by their class, as the per-class column readers of applying a calibration want them (``shape``,
``classes``, ``fields``): computed once per batch in C loops (``map``, ``np.argsort``, ``operator.itemgetter``)
rather than a Python loop over the ops in each reader (10k ops: ~1.5 ms each); and the distinct ops of a batch told
apart by the model's own numbers first (``distinct_by_rows``), hashing only the ops those cannot tell apart."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import itemgetter
from typing import TYPE_CHECKING

import numpy as np

from perfmodel.ops.base import IntArray, Op

if TYPE_CHECKING:
    from perfmodel.cost import CostBatch

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
    """Whether ``SAMPLE`` ops spread evenly over ``ops`` are all distinct (a guess: which way is faster, never what
    the answer is). False where one does not hash."""
    step = max(1, len(ops) // SAMPLE)
    try:
        sample = set(ops[::step])
    except TypeError:
        return False
    return len(sample) == len(range(0, len(ops), step))


def _fingerprints(batch: CostBatch, groups: Sequence[Group]) -> np.ndarray[tuple[int], np.dtype[np.uint64]]:
    """Per row of ``batch`` (the model on ``ops``, ``groups``: ``by_type(ops)``), a number mixed from its op's class
    and the bits of its time, overhead, compulsory bytes and FLOPs per engine: a function of the row's op alone, so
    equal ops have equal numbers (distinct ops may share one: they are then told apart by hash and ``==``)."""
    key = np.zeros(len(batch), dtype=np.uint64)
    for code, (_, rows, _) in enumerate(groups):
        key[rows] = code
    for values in (batch.time_s, batch.overhead_s, batch.compulsory_bytes, *batch.flops_by_engine.values()):
        bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
        key *= np.uint64(0x9E3779B97F4A7C15)  # wraps modulo 2^64
        key ^= bits
    return key


def distinct_by_rows(ops: Sequence[Op], batch: CostBatch,
                     groups: Sequence[Group]) -> tuple[list[Op], IntArray, list[Group]]:
    """``model.distinct_ops(ops)`` (the distinct ops in first-seen order and each op's index among them) and
    ``by_type`` of the distinct ops, where ``batch`` is the model on ``ops`` (``groups``: ``by_type(ops)``). Rows
    whose number (``_fingerprints``) no other row has hold ops that no other row holds (equal ops have equal
    numbers): only the others are hashed and compared (a dict: hash, then ``==``). An op that does not hash: each op
    its own."""
    n = len(ops)
    key = _fingerprints(batch, groups)
    ordered = np.sort(key)
    alike = ordered[1:][ordered[1:] == ordered[:-1]]  # numbers more than one row has
    if not alike.size:
        return list(ops), np.arange(n), list(groups)
    same = np.arange(n)  # per row, the first row holding an equal op
    first: dict[Op, int] = {}
    try:
        for i in np.flatnonzero(np.isin(key, alike)).tolist():
            same[i] = first.setdefault(ops[i], i)
    except TypeError:
        return list(ops), np.arange(n), list(groups)
    leads = same == np.arange(n)
    if leads.all():
        return list(ops), np.arange(n), list(groups)
    position = np.cumsum(leads) - 1
    kept: list[Group] = []  # ``by_type`` of the distinct ops: each class's first op leads, so the same classes
    for cls, rows, members in groups:
        mine = leads[rows]
        kept.append((cls, position[rows[mine]], list(compress(members, mine.tolist()))))
    return list(compress(ops, leads.tolist())), position[same], kept


__all__ = ["Group", "by_type", "distinct_by_rows", "probably_distinct"]
