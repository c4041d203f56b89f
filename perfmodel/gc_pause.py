"""The cyclic garbage collector paused while a trace is parsed or matched, or a model graph built and estimated.

Those passes build many small acyclic records (freed by reference counting); the collector would walk
them again and again as they pile up (about 20 % of a 100k-kernel parse; a third of a Llama-3.1-405B
estimate's mean time, its 1,267 nodes with their lists and tensors setting off young and, now and then,
full collections). Nested or concurrent pauses are counted: the collector runs again when the last one
ends, and only if it was on before the first.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

_LOCK = threading.Lock()
_STATE = {"depth": 0, "was_enabled": 0}
P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off inside the block (reference counting still frees every acyclic object)."""
    with _LOCK:
        if _STATE["depth"] == 0:
            _STATE["was_enabled"] = int(gc.isenabled())
            gc.disable()
        _STATE["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0 and _STATE["was_enabled"]:
                gc.enable()


def without_gc(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` run inside ``gc_paused``."""
    @functools.wraps(function)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        with gc_paused():
            return function(*args, **kwargs)
    return wrapped
