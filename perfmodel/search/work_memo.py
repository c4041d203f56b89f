"""The ``Work`` of one op, kept across searches: ``work_of([op], granularity)`` (70-150 µs for one matmul, ~12 % of a
GEMM search on an H100, docs/accuracy.md tenth pass) depends on the op and the DRAM access granularity alone, not
on the device's other figures, so an op searched again (cache off, another ``top_k``/``budget``/``seed``, or another
device of the same granularity, as ``compare`` does) reuses it.

The kept ``Work``'s arrays are made read-only: a caller that wrote into them would change later answers, so it
fails instead. ``MAX_ENTRIES`` are kept (least recently used dropped); ops are frozen and hashable (the search
cache keys on them too).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from perfmodel.ops import Op, Work
from perfmodel.roofline import work_of

MAX_ENTRIES = 512

_LOCK = threading.Lock()
_MEMO: OrderedDict[tuple[Op, float], Work] = OrderedDict()


def work_of_one(op: Op, granularity_bytes: float) -> Work:
    """``work_of([op], granularity_bytes)``, kept (read-only) for the next search of the same op."""
    key = (op, granularity_bytes)
    with _LOCK:
        kept = _MEMO.get(key)
        if kept is not None:
            _MEMO.move_to_end(key)
            return kept
    work = work_of([op], granularity_bytes)
    for value in (*work.__dict__.values(), *work.bytes_by_role.values()):
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
    with _LOCK:
        _MEMO[key] = work
        if len(_MEMO) > MAX_ENTRIES:
            _MEMO.popitem(last=False)
    return work


def clear() -> None:
    """Forget every kept ``Work`` (tests compare kept and fresh answers)."""
    with _LOCK:
        _MEMO.clear()
