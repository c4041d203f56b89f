"""The compiled kernel's GEMM choices kept across calls in one process (a whole-model estimate's few GEMMs).

A model estimate searches each of its distinct GEMMs (5-10 rows) against the full space: ~1.3 ms of compiled
costing per row, most of the estimate's model work. The same rows come back whenever the model (or another with
the same layer shapes) is estimated again on the same device. ``choose`` looks each row up (its seven inputs,
bit for bit) under the device vector and the candidate space it is searched with, and runs the kernel on the
rows not seen before: the same answers, since a row's choice depends on that row, the device vector and the
space only. Bounded: ``MAX_KEYS`` (device, space) pairs, least recently used dropped, ``MAX_ROWS`` rows each.
Only small calls on large spaces use it (``SMALL_CALL_ROWS``, ``MIN_SPACE``: the full spaces, built once per
device kind); a table's chunks go through ``choice_memo`` instead.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from perfmodel.ops.base import FloatArray

SMALL_CALL_ROWS = 64  # calls with more rows than this are not looked up (their per-row Python would cost more)
MIN_SPACE = 1024  # smaller spaces are not kept (the compact set, a search's one winner: cheaper to cost again,
# and a space made per call would push the full spaces' rows out)
MAX_KEYS = 32  # (device vector, space) pairs kept
MAX_ROWS = 4096  # rows kept per pair (then the pair's rows start again)

Row = tuple[int, FloatArray]  # candidate index, the kernel's CHOICE_FIELDS of the row
_LOCK = threading.Lock()
# (device vector bytes, id of the space) -> (the space, held so that its id stays its own; rows by their bytes)
_MEMO: OrderedDict[tuple[bytes, int], tuple[Any, dict[bytes, Row]]] = OrderedDict()


def choose(v: FloatArray, space: Any, columns: tuple[FloatArray, ...],
           kernel: Callable[..., tuple[np.ndarray[Any, np.dtype[np.intp]], FloatArray]]
           ) -> tuple[np.ndarray[Any, np.dtype[np.intp]], FloatArray]:
    """``kernel(*columns)`` (index per row, fields x rows block), running it only on rows not seen before with
    ``v`` and ``space``."""
    data = np.ascontiguousarray(np.stack([np.asarray(c, dtype=np.float64) for c in columns], axis=1))
    keys = [data[i].tobytes() for i in range(data.shape[0])]
    memo_key = (v.tobytes(), id(space))
    with _LOCK:
        entry = _MEMO.get(memo_key)
        if entry is None or entry[0] is not space:
            entry = _MEMO[memo_key] = (space, {})
            while len(_MEMO) > MAX_KEYS:
                _MEMO.popitem(last=False)
        else:
            _MEMO.move_to_end(memo_key)
        rows = entry[1]
        found = [rows.get(key) for key in keys]
    missing = [i for i, row in enumerate(found) if row is None]
    if missing:
        at = np.asarray(missing, dtype=np.intp)
        index, block = kernel(*(c[at] for c in columns))
        with _LOCK:
            if len(rows) + len(missing) > MAX_ROWS:
                rows.clear()
            for slot, i in enumerate(missing):
                found[i] = rows[keys[i]] = (int(index[slot]), block[:, slot].copy())
    chosen = np.fromiter((row[0] for row in found if row is not None), dtype=np.intp, count=len(found))
    out = np.stack([row[1] for row in found if row is not None], axis=1)
    return chosen, out


def clear() -> None:
    """Forget every kept choice (benchmarks time a cold estimate with it)."""
    with _LOCK:
        _MEMO.clear()
