"""The distinct rows of a table of numpy columns, found by hashing each row's bytes (``distinct_rows``).

A table of ops (``predict_columns``) repeats rows: a model's layers, a sweep's grid. Each row's bytes, over
every column (unicode names, numbers, a shape block), are folded into one 64-bit hash, column by column (8 bytes
per row alive, not a rows x words copy). Rows are then numbered by their hash, and every row is compared with
the first row of its number byte for byte, so that a hash collision is found: rows are merged only when they are
equal bit for bit (0.0 and -0.0 differ, as do two NaNs of other bits), never by the hash alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

IntArray = np.ndarray[Any, np.dtype[np.intp]]
Words = np.ndarray[Any, np.dtype[np.uint64]]

SAMPLE_ROWS = 1 << 14  # rows whose hashes are sorted, spread over the table; the others are looked up among them
# MurmurHash3's fmix64 constants (Austin Appleby, public domain: github.com/aappleby/smhasher, MurmurHash3.cpp)
_MIX1, _MIX2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)
_SHIFT1, _SHIFT2 = np.uint64(33), np.uint64(33)


def _words(values: np.ndarray[Any, Any]) -> Iterator[Words] | None:
    """The 64-bit words of each row's bytes (a row shorter than 8 bytes widened exactly; a row of 8k + r bytes
    read as k words and one overlapping the last 8 bytes), or None for a column without fixed-size raw bytes."""
    kind = values.dtype.kind
    if kind not in "biufU" or values.ndim not in (1, 2):
        return None
    if kind == "f" and values.dtype.itemsize < 8:
        values = values.astype(np.float64)  # exact: every float32 / float16 is a float64
    elif kind in "biu" and values.dtype.itemsize < 8:
        values = values.astype(np.int64)  # exact
    values = np.ascontiguousarray(values)
    n = values.shape[0]
    row_bytes = values.dtype.itemsize * (values.shape[1] if values.ndim == 2 else 1)
    if row_bytes == 0:
        return iter(())
    if row_bytes < 8:  # a short unicode name: its code points as one integer
        return iter((values.view(np.uint32).reshape(n, -1).astype(np.uint64) @ _small_weights(row_bytes // 4),))
    offsets = [*range(0, row_bytes - 7, 8)]
    if row_bytes % 8:
        offsets.append(row_bytes - 8)
    return (np.ndarray((n,), dtype=np.uint64, buffer=values, offset=o, strides=(row_bytes,)) for o in offsets)


def _small_weights(count: int) -> Words:
    """Weights that pack ``count`` (< 2) 32-bit code points into one 64-bit word without loss."""
    return np.array([np.uint64(1) << np.uint64(32 * i) for i in range(count)], dtype=np.uint64)


def row_hashes(columns: Mapping[str, np.ndarray[Any, Any]]) -> Words | None:
    """One 64-bit hash of each row's bytes over every column (in the mapping's order; a broadcast column, one
    value for every row, adds nothing); None when a column is not of numbers or unicode."""
    h: Words | None = None
    scratch: Words | None = None
    for values in columns.values():
        if values.ndim >= 1 and values.strides[0] == 0 and values.shape[0] > 1:
            continue
        words = _words(values)
        if words is None:
            return None
        for word in words:
            if h is None:
                h, scratch = word.copy(), np.empty(word.shape, dtype=np.uint64)
            else:
                np.bitwise_xor(h, word, out=h)
            assert scratch is not None
            _finalize(h, scratch)
    return h


def _finalize(h: Words, scratch: Words) -> None:
    """MurmurHash3's 64-bit finalizer in place (a bijection whose every output bit depends on every input bit), so
    that the next word's xor meets well-mixed bits: without it, (16, 64) and (64, 16) would share a hash."""
    for shift, multiplier in ((_SHIFT1, _MIX1), (_SHIFT2, _MIX2), (_SHIFT1, None)):
        np.right_shift(h, shift, out=scratch)
        np.bitwise_xor(h, scratch, out=h)
        if multiplier is not None:
            np.multiply(h, multiplier, out=h)


def distinct_rows(columns: Mapping[str, np.ndarray[Any, Any]], n: int, most_distinct: float = 1.0
                  ) -> tuple[IntArray, IntArray] | None:
    """``(first, inverse)`` of the ``n`` rows of ``columns``: the first row of each distinct row, in table order,
    and each row's index into ``first`` (``table[first][inverse]`` is ``table``, bit for bit). None when more
    than ``most_distinct`` of a spread sample's rows differ, a column is not numbers or unicode, or two different
    rows share a hash."""
    h = row_hashes(columns) if n else None
    if h is None:
        return None if n else (np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp))
    sample = h[::max(1, n // SAMPLE_ROWS)]
    table = np.unique(sample)
    if table.size > most_distinct * sample.size:
        return None
    codes = np.searchsorted(table, h)  # a binary search among the sample's hashes, not a sort of every row's
    np.minimum(codes, table.size - 1, out=codes)
    missed = np.flatnonzero(table[codes] != h)
    if missed.size:  # hashes the sample did not see: numbered after the sample's
        _, extra = np.unique(h[missed], return_inverse=True)
        codes[missed] = table.size + extra.reshape(-1)
    del h
    count = int(codes.max()) + 1
    first_of = np.full(count, n, dtype=np.intp)  # per code, its first row (n: a code no row has)
    np.minimum.at(first_of, codes, np.arange(n, dtype=np.intp))
    used = np.flatnonzero(first_of < n)
    order = np.argsort(first_of[used])
    number = np.full(count, -1, dtype=np.intp)  # per code, its distinct row's place in table order
    number[used[order]] = np.arange(order.size, dtype=np.intp)
    first, inverse = first_of[used[order]], number[codes]
    del codes
    for values in columns.values():  # a collision: two different rows with one hash
        if not _same_rows(values, first, inverse):
            return None
    return first, inverse


def _same_rows(values: np.ndarray[Any, Any], first: IntArray, inverse: IntArray) -> bool:
    """Whether every row of ``values`` is byte for byte its distinct row (``values[first][inverse]``)."""
    if values.ndim >= 1 and values.strides[0] == 0:
        return True
    rows = np.ascontiguousarray(values)
    raw = rows.view(np.dtype((np.void, rows.dtype.itemsize * (rows.shape[1] if rows.ndim == 2 else 1)))).reshape(-1)
    return bool((raw[first][inverse] == raw).all())
