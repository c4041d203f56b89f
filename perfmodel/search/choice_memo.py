"""GEMM schedule choices remembered across the chunks of one batch prediction (``predict_columns``).

A table predicted chunk by chunk repeats its GEMM shapes in every chunk; each chunk would search them again.
Inside ``scope()``, ``search`` looks each distinct row (batch, m, n, k, element bytes, peak, compulsory bytes,
compared bit for bit) up by the machine tables and candidate space it is searched with, and searches only the
rows not seen before: the same choices, since a row's choice depends on that row, its tables and its space only.
The memo lives as long as the scope (one call), holding its tables and spaces so that their ids stay theirs.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import numpy as np

from perfmodel.ops.base import FloatArray
from perfmodel.search.gemm_cost import GemmChoice

MAX_ROWS = 1 << 16  # distinct rows kept per (tables, space); past it the memo starts again (bounded memory)

_ACTIVE: ContextVar[ChoiceMemo | None] = ContextVar("perfmodel_choice_memo", default=None)


class _Entry:
    """The rows searched for one (tables, space) and their choices (arrays, grown as rows are added)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int, ...], int] = {}
        self.choice: GemmChoice | None = None


class ChoiceMemo:
    """Choices by (tables, space, row); ``search`` answers what ``best(columns)`` would."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, int], _Entry] = {}
        self._alive: list[Any] = []  # the keyed objects, so that their ids are not reused while the memo lives

    def search(self, tables: Any, space: Any, columns: tuple[FloatArray, ...],
               best: Callable[..., GemmChoice]) -> GemmChoice:
        """``best(*columns)``, searching only the rows this memo has not seen with ``tables`` and ``space``."""
        key = (id(tables), id(space))
        entry = self._entries.get(key)
        if entry is None or len(entry.rows) > MAX_ROWS:
            entry = self._entries[key] = _Entry()
            self._alive += [tables, space]
        bits = np.stack([np.asarray(c, dtype=np.float64).view(np.int64) for c in columns], axis=1)
        rows = list(map(tuple, bits.tolist()))
        known = entry.rows
        at = np.fromiter((known.get(r, -1) for r in rows), dtype=np.intp, count=len(rows))
        new = np.flatnonzero(at < 0)
        if new.size:
            found = best(*(c[new] for c in columns))
            start = 0 if entry.choice is None else int(entry.choice.index.size)
            for j, i in enumerate(new.tolist()):  # a row repeated among the new ones: its first answer is kept
                known.setdefault(rows[i], start + j)
            entry.choice = found if entry.choice is None else GemmChoice(*(
                np.concatenate([getattr(entry.choice, f.name), getattr(found, f.name)])
                for f in dataclasses.fields(GemmChoice)))
            at[new] = start + np.arange(new.size)
        assert entry.choice is not None
        return GemmChoice(*(getattr(entry.choice, f.name)[at] for f in dataclasses.fields(GemmChoice)))


def active() -> ChoiceMemo | None:
    """The memo of the enclosing ``scope()``, or None outside one."""
    return _ACTIVE.get()


@contextlib.contextmanager
def scope() -> Iterator[ChoiceMemo]:
    """A memo for the calls made inside the ``with`` block (nested scopes share the outer one)."""
    outer = _ACTIVE.get()
    if outer is not None:
        yield outer
        return
    memo = ChoiceMemo()
    token = _ACTIVE.set(memo)
    try:
        yield memo
    finally:
        _ACTIVE.reset(token)
