"""Computed views cached by a data version, so unchanged data is never recomputed."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from sqlalchemy import func, select

from perfmodel.store import Store
from perfmodel.store.models import CalibrationModel, HardwareModel, RunModel, TraceUploadModel

T = TypeVar("T")


def data_version(store: Store) -> tuple[Any, ...]:
    """What the stored data looks like, in one round trip: run count and max id, calibration, trace upload
    and custom hardware ids. Any write that can change a view changes this tuple."""
    stmt = select(
        select(func.count(RunModel.id)).scalar_subquery(), select(func.max(RunModel.id)).scalar_subquery(),
        select(func.count(CalibrationModel.id)).scalar_subquery(),
        select(func.max(CalibrationModel.id)).scalar_subquery(),
        select(func.count(TraceUploadModel.id)).scalar_subquery(),
        select(func.max(TraceUploadModel.id)).scalar_subquery(),
        select(func.count(HardwareModel.id)).scalar_subquery(),
        select(func.max(HardwareModel.content_hash)).scalar_subquery(),
    )
    with store.engine.connect() as conn:
        row = conn.execute(stmt).one()
    return tuple(row)


class ViewCache:
    """A small thread-safe LRU of computed views; keys include the data version."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def peek(self, key: Hashable) -> Any:
        """The cached value, or None."""
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return self._items[key]

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self.misses += 1
            self._items[key] = value
            if len(self._items) > self._size:
                self._items.popitem(last=False)

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The cached value, else ``compute()`` (stored for next time)."""
        hit = self.peek(key)
        if hit is not None:
            value: T = hit
            return value
        result = compute()
        self.put(key, result)
        return result
