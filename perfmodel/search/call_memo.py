"""Small numpy calls kept across calls: an estimate's attention tile choice and collective times come back whenever
the same model (or one with the same attention and collective shapes) is estimated again on the same device.

``kept(name, holders, arrays, make, copy)`` returns ``copy`` of what ``make()`` returned for the same ``name``, the
same holder objects (the machine tables, the candidate space: by identity, held so that their ids stay theirs) and
arrays equal bit for bit (dtype, shape and bytes). Only calls whose arrays total at most ``MAX_CALL_BYTES`` are kept,
``MAX_ENTRIES`` in all (least recently used dropped); the functions kept are pure (tables are immutable).
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

import numpy as np

MAX_CALL_BYTES = 1 << 16
MAX_ENTRIES = 256
T = TypeVar("T")

_LOCK = threading.Lock()
_MEMO: OrderedDict[Hashable, tuple[tuple[Any, ...], Any]] = OrderedDict()
_ON: ContextVar[bool] = ContextVar("perfmodel_call_memo_on", default=True)


def enabled() -> bool:
    """False inside ``not_kept()`` (``gemm_memo`` asks too)."""
    return _ON.get()


@contextlib.contextmanager
def not_kept() -> Iterator[None]:
    """Nothing looked up or kept inside the block: a sweep's device variants never repeat (each would only add an
    entry, pushing out the ones worth keeping, and pay for its key)."""
    token = _ON.set(False)
    try:
        yield
    finally:
        _ON.reset(token)


def kept(name: str, holders: tuple[Any, ...], arrays: Sequence[np.ndarray[Any, Any]], make: Callable[[], T],
         copy: Callable[[T], T]) -> T:
    """``copy(make())``, ``make`` run only when this call was not seen before (see the module)."""
    if not _ON.get() or sum(a.nbytes for a in arrays) > MAX_CALL_BYTES:
        return make()
    key = (name, tuple(map(id, holders)),
           tuple((a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes()) for a in arrays))
    with _LOCK:
        hit = _MEMO.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], holders, strict=True)):
            _MEMO.move_to_end(key)
            return copy(hit[1])
    value = make()
    with _LOCK:
        _MEMO[key] = (holders, copy(value))
        while len(_MEMO) > MAX_ENTRIES:
            _MEMO.popitem(last=False)
    return value


def clear() -> None:
    with _LOCK:
        _MEMO.clear()
