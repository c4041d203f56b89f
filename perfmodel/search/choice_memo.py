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
# once this many rows were looked up for a (tables, space) and fewer than this share of them were found, its later
# calls search without the memo (the same choices: the memo only keeps them)
PAYS_FROM_ROWS = 1 << 15
FEW_FOUND = 0.1

_ACTIVE: ContextVar[ChoiceMemo | None] = ContextVar("perfmodel_choice_memo", default=None)


class _Entry:
    """The rows searched for one (tables, space), sorted (each row's bits as one ``void`` key), the slot of each in
    ``choice``, and the choices (arrays in the order the rows were searched)."""

    def __init__(self, width_bytes: int) -> None:
        self.keys = np.empty(0, dtype=np.dtype((np.void, width_bytes)))
        self.slot = np.empty(0, dtype=np.intp)
        self.choice: GemmChoice | None = None
        self.searched = 0  # rows looked up, and of them found, over the calls so far
        self.found = 0

    def find(self, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.intp]]:
        """Each row's slot in ``choice``; -1 where it was not searched."""
        if self.keys.size == 0:
            return np.full(rows.size, -1, dtype=np.intp)
        at = np.minimum(np.searchsorted(self.keys, rows), self.keys.size - 1)
        found: np.ndarray[Any, np.dtype[np.intp]] = np.where(self.keys[at] == rows, self.slot[at], -1)
        return found

    def add(self, rows: np.ndarray[Any, Any], found: GemmChoice) -> np.ndarray[Any, np.dtype[np.intp]]:
        """Remember ``found`` (the choices of ``rows``); their slots."""
        start = 0 if self.choice is None else int(self.choice.index.size)
        slots = start + np.arange(rows.size, dtype=np.intp)
        keys, slot = np.concatenate([self.keys, rows]), np.concatenate([self.slot, slots])
        order = np.argsort(keys, kind="stable")
        self.keys, self.slot = keys[order], slot[order]
        self.choice = found if self.choice is None else GemmChoice(*(
            np.concatenate([getattr(self.choice, f.name), getattr(found, f.name)])
            for f in dataclasses.fields(GemmChoice)))
        return slots


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
        if entry is not None and entry.searched >= PAYS_FROM_ROWS and entry.found < FEW_FOUND * entry.searched:
            return best(*columns)  # a table of new shapes: looking up and keeping them costs more than it saves
        bits = np.stack([np.asarray(c, dtype=np.float64).view(np.int64) for c in columns], axis=1)
        rows = np.ascontiguousarray(bits).view(np.dtype((np.void, bits.shape[1] * 8))).reshape(-1)
        if entry is None or entry.keys.size > MAX_ROWS or entry.keys.dtype != rows.dtype:
            searched, found = (0, 0) if entry is None else (entry.searched, entry.found)
            entry = self._entries[key] = _Entry(bits.shape[1] * 8)
            entry.searched, entry.found = searched, found
            self._alive += [tables, space]
        at = entry.find(rows)
        new = np.flatnonzero(at < 0)
        entry.searched += int(rows.size)
        entry.found += int(rows.size - new.size)
        if new.size:
            at[new] = entry.add(rows[new], best(*(c[new] for c in columns)))
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
