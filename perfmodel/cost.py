"""Prediction results: ``Cost`` (one op) and ``CostBatch`` (many, as arrays), and their JSON forms."""

from __future__ import annotations

import functools
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from perfmodel import __version__
from perfmodel.gc_pause import gc_paused
from perfmodel.labels import Labels
from perfmodel.ops import Op
from perfmodel.ops.base import FloatArray

if TYPE_CHECKING:
    from perfmodel.hardware import Hardware


@dataclass
class Cost:
    """One prediction with its breakdown (SI units)."""

    time_s: float
    bound: str
    op_kind: str
    hardware_id: str
    hardware_hash: str
    flops: float
    flops_by_engine: dict[str, float]
    bytes_by_level: dict[str, float]
    time_s_by_level: dict[str, float]
    time_s_by_engine: dict[str, float]
    overhead_s: float
    intensity_flops_per_byte: float
    attained_flops_per_s: float
    utilization: float
    schedule: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    interval_s: tuple[float, float] | None = None
    in_calibrated_range: bool | None = None
    # uncalibrated: time_s x the 10-90 % band of the op class's leave-one-device-out residuals
    uncalibrated_interval_s: tuple[float, float] | None = None
    model_version: str = __version__

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["interval_s"] = list(self.interval_s) if self.interval_s else None
        out["uncalibrated_interval_s"] = list(self.uncalibrated_interval_s) if self.uncalibrated_interval_s else None
        return out


@dataclass
class CostBatch:
    """Predictions for many ops as arrays; index or iterate for ``Cost`` objects."""

    hardware: Hardware
    ops: Sequence[Op]
    time_s: FloatArray
    bound: Labels  # per row, the engine or level bounding it (1-byte codes; reads like a unicode array)
    overhead_s: FloatArray
    flops_by_engine: dict[str, FloatArray]
    bytes_by_level: dict[str, FloatArray]
    time_s_by_level: dict[str, FloatArray]
    time_s_by_engine: dict[str, FloatArray]
    compulsory_bytes: FloatArray
    utilization: FloatArray
    schedule: dict[str, FloatArray]
    notes: dict[int, list[str]]
    # set by calibration: per row (low, high) seconds (n x 2, nan where unknown) and whether the
    # op's size lies inside the calibrated data's range (None: uncalibrated)
    interval_s: FloatArray | None = None
    in_calibrated_range: np.ndarray[Any, np.dtype[np.bool_]] | None = None
    # uncalibrated: per row (low, high) seconds, time_s x its class's leave-one-device-out band (n x 2);
    # None once a calibration replaced time_s (interval_s is then the band)
    uncalibrated_interval_s: FloatArray | None = None

    def __len__(self) -> int:
        return int(self.time_s.size)

    def __iter__(self) -> Iterator[Cost]:
        return (self[i] for i in range(len(self)))

    @functools.cached_property
    def flops(self) -> FloatArray:
        total = np.zeros(len(self))
        for values in self.flops_by_engine.values():
            total = total + values
        return total

    @functools.cached_property
    def intensity_flops_per_byte(self) -> FloatArray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.compulsory_bytes > 0, self.flops / self.compulsory_bytes, np.inf)

    @functools.cached_property
    def attained_flops_per_s(self) -> FloatArray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.time_s > 0, self.flops / self.time_s, 0.0)

    def __getitem__(self, i: int) -> Cost:
        return Cost(**self._row(i, self._columns))

    def take(self, rows: np.ndarray[Any, np.dtype[np.intp]]) -> CostBatch:
        """A batch of the rows ``rows`` of this one (repeated or reordered): each array indexed, notes copied."""
        def pick(group: dict[str, FloatArray]) -> dict[str, FloatArray]:
            return {k: v[rows] for k, v in group.items()}

        def optional(values: FloatArray | None) -> FloatArray | None:
            return None if values is None else values[rows]

        notes: dict[int, list[str]] = {}
        if self.notes:  # the rows whose source row has notes, found as an array (not one dict lookup per row)
            noted = np.zeros(len(self), dtype=bool)
            noted[np.fromiter(self.notes, dtype=np.intp, count=len(self.notes))] = True
            at = np.flatnonzero(noted[rows])
            with gc_paused():  # one new list per noted row, no cycle: the collector would rescan them (gc_pause)
                for lo in range(0, at.size, _NOTED_BLOCK):  # Python ints of one block of rows alive at a time
                    block = at[lo:lo + _NOTED_BLOCK]
                    notes.update(zip(block.tolist(), map(list, map(self.notes.__getitem__, rows[block].tolist())),
                                     strict=True))
        in_range = self.in_calibrated_range
        return CostBatch(
            hardware=self.hardware, ops=_Rows(self.ops, rows), time_s=self.time_s[rows], bound=self.bound[rows],
            overhead_s=self.overhead_s[rows], flops_by_engine=pick(self.flops_by_engine),
            bytes_by_level=pick(self.bytes_by_level), time_s_by_level=pick(self.time_s_by_level),
            time_s_by_engine=pick(self.time_s_by_engine), compulsory_bytes=self.compulsory_bytes[rows],
            utilization=self.utilization[rows], schedule=pick(self.schedule), notes=notes,
            interval_s=optional(self.interval_s), in_calibrated_range=None if in_range is None else in_range[rows],
            uncalibrated_interval_s=optional(self.uncalibrated_interval_s))

    def to_dicts(self) -> list[dict[str, Any]]:
        """``[cost.to_dict() for cost in self]``, built column by column with ``zip`` (~20x faster)."""
        n = len(self)
        c = self._columns
        notes: list[list[str]] = [[] for _ in range(n)]
        for i, texts in self.notes.items():
            notes[i] = list(texts)
        columns = {
            "time_s": c["time_s"], "bound": c["bound"], "op_kind": [op.kind for op in self.ops],
            "hardware_id": repeat(self.hardware.id), "hardware_hash": repeat(self.hardware.content_hash),
            "flops": c["flops"], "flops_by_engine": _dict_rows(c["flops_by_engine"], n),
            "bytes_by_level": _dict_rows(c["bytes_by_level"], n),
            "time_s_by_level": _dict_rows(c["time_s_by_level"], n),
            "time_s_by_engine": _positive_dict_rows(self.time_s_by_engine, n),
            "overhead_s": c["overhead_s"], "intensity_flops_per_byte": c["intensity"],
            "attained_flops_per_s": c["attained"], "utilization": c["utilization"],
            "schedule": _positive_dict_rows(self.schedule, n), "notes": notes,
            "interval_s": [list(v) if v else None for v in c["interval_s"]],
            "in_calibrated_range": c["in_range"],
            "uncalibrated_interval_s": [list(v) if v else None for v in c["uncalibrated_interval_s"]],
            "model_version": repeat(__version__),
        }
        keys = tuple(columns)
        return [dict(zip(keys, values, strict=False)) for values in zip(*columns.values(), strict=False)]

    def to_columns(self, order: Sequence[int] | None = None) -> dict[str, Any]:
        """The batch as named numpy columns (SI units), rows picked by ``order`` (default all).

        Absent schedule/engine entries are 0; ``notes`` maps a row index to its notes.
        """
        pick = np.arange(len(self)) if order is None else np.asarray(order, dtype=np.int64)

        def group(values: dict[str, FloatArray]) -> dict[str, FloatArray]:
            return {k: v[pick] for k, v in values.items()}

        notes: dict[int, list[str]] = {}
        if self.notes:
            for row, source in enumerate(pick.tolist()):
                if source in self.notes:
                    notes[row] = list(self.notes[source])
        return {
            "time_s": self.time_s[pick], "bound": self.bound[pick].tolist(),
            "op_kind": [self.ops[i].kind for i in pick.tolist()], "flops": self.flops[pick],
            "flops_by_engine": group(self.flops_by_engine), "bytes_by_level": group(self.bytes_by_level),
            "time_s_by_level": group(self.time_s_by_level), "time_s_by_engine": group(self.time_s_by_engine),
            "overhead_s": self.overhead_s[pick], "intensity_flops_per_byte": self.intensity_flops_per_byte[pick],
            "attained_flops_per_s": self.attained_flops_per_s[pick], "utilization": self.utilization[pick],
            "schedule": group(self.schedule), "notes": notes,
            "interval_s": None if self.interval_s is None else self.interval_s[pick],
            "in_calibrated_range": None if self.in_calibrated_range is None else self.in_calibrated_range[pick],
            "uncalibrated_interval_s": None if self.uncalibrated_interval_s is None
            else self.uncalibrated_interval_s[pick],
        }

    @functools.cached_property
    def _columns(self) -> dict[str, Any]:
        """Every array as a Python list, once (``tolist`` beats per-element ``float``)."""
        def listed(group: dict[str, FloatArray]) -> list[tuple[str, list[float]]]:
            return [(k, v.tolist()) for k, v in group.items()]

        return {
            "time_s": self.time_s.tolist(), "bound": self.bound.tolist(), "overhead_s": self.overhead_s.tolist(),
            "flops": self.flops.tolist(), "utilization": self.utilization.tolist(),
            "intensity": self.intensity_flops_per_byte.tolist(), "attained": self.attained_flops_per_s.tolist(),
            "flops_by_engine": listed(self.flops_by_engine), "bytes_by_level": listed(self.bytes_by_level),
            "time_s_by_level": listed(self.time_s_by_level), "time_s_by_engine": listed(self.time_s_by_engine),
            "schedule": listed(self.schedule),
            "interval_s": _interval_rows(self.interval_s, len(self)),
            "in_range": [None] * len(self) if self.in_calibrated_range is None else self.in_calibrated_range.tolist(),
            "uncalibrated_interval_s": _interval_rows(self.uncalibrated_interval_s, len(self)),
        }

    def _row(self, i: int, c: dict[str, Any]) -> dict[str, Any]:
        return {
            "time_s": c["time_s"][i], "bound": c["bound"][i], "op_kind": self.ops[i].kind,
            "hardware_id": self.hardware.id, "hardware_hash": self.hardware.content_hash,
            "flops": c["flops"][i], "flops_by_engine": {k: v[i] for k, v in c["flops_by_engine"]},
            "bytes_by_level": {k: v[i] for k, v in c["bytes_by_level"]},
            "time_s_by_level": {k: v[i] for k, v in c["time_s_by_level"]},
            "time_s_by_engine": {k: v[i] for k, v in c["time_s_by_engine"] if v[i] > 0},
            "overhead_s": c["overhead_s"][i], "intensity_flops_per_byte": c["intensity"][i],
            "attained_flops_per_s": c["attained"][i], "utilization": c["utilization"][i],
            "schedule": {k: v[i] for k, v in c["schedule"] if v[i] > 0},
            "notes": list(self.notes.get(i, ())), "interval_s": c["interval_s"][i],
            "in_calibrated_range": c["in_range"][i],
            "uncalibrated_interval_s": c["uncalibrated_interval_s"][i],
            "model_version": __version__,
        }


_NOTED_BLOCK = 1 << 16  # noted rows copied at a time by ``CostBatch.take``


class _Rows(Sequence[Op]):
    """``ops[rows[i]]`` for each i, looked up when asked for (the ops of ``CostBatch.take``)."""

    def __init__(self, ops: Sequence[Op], rows: np.ndarray[Any, np.dtype[np.intp]]) -> None:
        self._ops, self._rows = ops, rows

    def __len__(self) -> int:
        return int(self._rows.size)

    @overload
    def __getitem__(self, i: int) -> Op: ...

    @overload
    def __getitem__(self, i: slice) -> list[Op]: ...

    def __getitem__(self, i: int | slice) -> Op | list[Op]:
        if isinstance(i, slice):
            return [self._ops[j] for j in self._rows[i].tolist()]
        return self._ops[int(self._rows[i])]


def _interval_rows(interval_s: FloatArray | None, n: int) -> list[tuple[float, float] | None]:
    """Per-row (low, high) seconds, None where there is no interval (uncalibrated or nan)."""
    if interval_s is None:
        return [None] * n
    finite = typing.cast(list[bool], np.isfinite(interval_s).all(axis=1).tolist())
    return [(lo, hi) if ok else None for (lo, hi), ok in zip(interval_s.tolist(), finite, strict=True)]


def _dict_rows(group: list[tuple[str, list[float]]], n: int) -> list[dict[str, float]]:
    """Per-row dicts from named columns."""
    if not group:
        return [{} for _ in range(n)]
    keys = tuple(k for k, _ in group)
    return [dict(zip(keys, values, strict=False)) for values in zip(*(values for _, values in group), strict=False)]


def _positive_dict_rows(group: dict[str, FloatArray], n: int) -> list[dict[str, float]]:
    """Per-row dicts of the positive entries only: rows are grouped by which keys they have."""
    rows: list[dict[str, float]] = [{} for _ in range(n)]
    if not group or n == 0:
        return rows
    keys = tuple(group)
    matrix = np.stack([group[k] for k in keys])
    positive = matrix > 0
    codes = (positive.astype(np.int64) << np.arange(len(keys), dtype=np.int64)[:, None]).sum(axis=0)
    for code in np.unique(codes).tolist():
        present = [j for j in range(len(keys)) if code >> j & 1]
        if not present:
            continue
        where = np.flatnonzero(codes == code)
        present_keys = tuple(keys[j] for j in present)
        values = zip(*(matrix[j, where].tolist() for j in present), strict=False)
        for i, row_values in zip(where.tolist(), values, strict=False):
            rows[i] = dict(zip(present_keys, row_values, strict=False))
    return rows
