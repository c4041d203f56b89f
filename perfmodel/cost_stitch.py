"""One ``CostBatch`` from the batches of consecutive row ranges (a table predicted chunk by chunk).

Each chunk's arrays are copied into arrays allocated once for the whole table, and the chunk is then
dropped, so the memory a prediction holds at once is the result plus one chunk's intermediates instead of
every intermediate column of the whole table. ``add`` answers False when a chunk's batch is not shaped as
the first one's (other level, engine or schedule keys, or dtypes): its rows would not line up, and the
caller predicts the table in one piece instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from perfmodel.cost import CostBatch
from perfmodel.labels import Labels
from perfmodel.ops import Op

_ARRAYS = ("time_s", "overhead_s", "compulsory_bytes", "utilization", "interval_s", "in_calibrated_range",
           "uncalibrated_interval_s")
_GROUPS = ("flops_by_engine", "bytes_by_level", "time_s_by_level", "time_s_by_engine", "schedule")


def _layout(batch: CostBatch) -> tuple[Any, ...]:
    """What must agree between chunks for their rows to be stacked: keys, dtypes and row shapes."""
    def shape(values: np.ndarray[Any, Any] | None) -> tuple[Any, ...] | None:
        return None if values is None else (values.dtype.str, values.shape[1:])

    arrays = tuple(shape(getattr(batch, name)) for name in _ARRAYS)
    groups = tuple(tuple((k, shape(v)) for k, v in getattr(batch, name).items()) for name in _GROUPS)
    return arrays, groups, batch.bound.names, batch.bound.codes.dtype.str


def _as_slice(rows: np.ndarray[Any, np.dtype[np.intp]]) -> slice | np.ndarray[Any, np.dtype[np.intp]]:
    """``rows`` as the slice it names when they are consecutive ascending rows (a kind's rows in a table sorted by
    kind: copied as one block instead of scattered element by element), else ``rows`` itself."""
    if rows.ndim != 1 or rows.size == 0:
        return rows
    first = int(rows[0])
    if first < 0 or int(rows[-1]) - first != rows.size - 1:
        return rows
    if rows.size > 1 and not bool((np.diff(rows) == 1).all()):
        return rows
    return slice(first, first + rows.size)


class Stitch:
    """The rows of ``n``-row table, filled a chunk (a ``CostBatch`` of consecutive rows) at a time."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._layout: tuple[Any, ...] | None = None
        self._arrays: dict[str, np.ndarray[Any, Any] | None] = {}
        self._groups: dict[str, dict[str, np.ndarray[Any, Any]]] = {}
        self._bound = Labels(np.empty(0, dtype=np.uint8), ())
        self._notes: dict[int, list[str]] = {}
        self._hardware: Any = None

    def add(self, start: int | np.ndarray[Any, np.dtype[np.intp]], batch: CostBatch) -> bool:
        """Copy ``batch`` in, to the rows ``start:start + len(batch)`` or, given an index array, to the rows it
        names (one per row of ``batch``); False when its layout differs from the first's."""
        layout = _layout(batch)
        if self._layout is None:
            self._layout, self._hardware = layout, batch.hardware
            # the same label table and code dtype in every chunk (the layout)
            self._bound = Labels(np.empty(self.n, batch.bound.codes.dtype), batch.bound.names)
            for name in _ARRAYS:
                values = getattr(batch, name)
                self._arrays[name] = None if values is None else np.empty((self.n, *values.shape[1:]), values.dtype)
            self._groups = {name: {k: np.empty(self.n, v.dtype) for k, v in getattr(batch, name).items()}
                            for name in _GROUPS}
        elif layout != self._layout:
            return False
        rows: Any = slice(start, start + len(batch)) if isinstance(start, int) else _as_slice(start)
        for name, out in self._arrays.items():
            if out is not None:
                out[rows] = getattr(batch, name)
        for name, group in self._groups.items():
            for k, values in getattr(batch, name).items():
                group[k][rows] = values
        self._bound.codes[rows] = batch.bound.codes
        if batch.notes:
            noted = np.fromiter(batch.notes, dtype=np.intp, count=len(batch.notes))
            at = (noted + start if isinstance(start, int) else start[noted]).tolist()
            self._notes.update(zip(at, batch.notes.values(), strict=True))
        return True

    def batch(self, ops: Sequence[Op]) -> CostBatch:
        """The whole table's batch (every row added), with ``ops`` as its ops."""
        a, g = self._arrays, self._groups
        return CostBatch(
            hardware=self._hardware, ops=ops, time_s=a["time_s"], bound=self._bound,  # type: ignore[arg-type]
            overhead_s=a["overhead_s"], flops_by_engine=g["flops_by_engine"],  # type: ignore[arg-type]
            bytes_by_level=g["bytes_by_level"], time_s_by_level=g["time_s_by_level"],
            time_s_by_engine=g["time_s_by_engine"], compulsory_bytes=a["compulsory_bytes"],  # type: ignore[arg-type]
            utilization=a["utilization"], schedule=g["schedule"], notes=self._notes,  # type: ignore[arg-type]
            interval_s=a["interval_s"], in_calibrated_range=a["in_calibrated_range"],
            uncalibrated_interval_s=a["uncalibrated_interval_s"])
