"""Roofline figures of merit for a list of ops on one device: predicted time and bound, modelled bytes per
level, and the speed-of-light (roof) time that '% of roof' and headroom are measured against."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.cost import CostBatch
from perfmodel.hardware import Hardware
from perfmodel.machine import tables
from perfmodel.ops import Op, make_op
from perfmodel.ops.base import FloatArray
from perfmodel.roofline import predict_many, work_of
from web.ceilings import memory_roofs


@dataclass
class OpMetrics:
    """Arrays over the ops that could be predicted (``index`` maps them back to the input order)."""

    index: list[int]
    predicted_s: FloatArray
    bound: list[str]
    flops: FloatArray
    bytes_by_level: dict[str, FloatArray]
    roof_s: FloatArray
    errors: dict[int, str]

    def percent_of_roof(self, time_s: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(time_s > 0, 100.0 * self.roof_s / time_s, np.nan)

    def headroom_s(self, time_s: FloatArray) -> FloatArray:
        """Time a kernel at its roof would save."""
        return np.maximum(time_s - self.roof_s, 0.0)

    def intensity(self, level: str) -> FloatArray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.bytes_by_level[level] > 0, self.flops / self.bytes_by_level[level], np.nan)


def _predict(hw: Hardware, raw: Sequence[dict[str, Any] | Op]) -> tuple[list[int], CostBatch | None, dict[int, str]]:
    """Predict every op that parses and runs on ``hw``; the others are reported, not raised."""
    errors: dict[int, str] = {}
    built: list[Op] = []
    index: list[int] = []
    for i, op in enumerate(raw):
        try:
            built.append(op if isinstance(op, Op) else make_op(op))
            index.append(i)
        except (ValueError, TypeError) as exc:
            errors[i] = str(exc)
    if not built:
        return [], None, errors
    try:
        return index, predict_many(hw, built), errors
    except ValueError:  # one op the device cannot run (e.g. its dtype): find it, predict the rest
        keep: list[int] = []
        for j, op in enumerate(built):
            try:
                predict_many(hw, [op])
                keep.append(j)
            except ValueError as exc:
                errors[index[j]] = str(exc)
        if not keep:
            return [], None, errors
        return [index[j] for j in keep], predict_many(hw, [built[j] for j in keep]), errors


def op_metrics(hw: Hardware, ops: Sequence[dict[str, Any] | Op]) -> OpMetrics:
    index, batch, errors = _predict(hw, ops)
    if batch is None:
        empty = np.zeros(0)
        return OpMetrics([], empty, [], empty, {}, empty, errors)
    t = tables(hw)
    work = work_of(list(batch.ops), float(hw.dram.access_granularity_bytes or 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = np.maximum.reduce([work.flops_matrix / t.matrix_peak[work.matrix_dtype],
                                     work.flops_vector / t.vector_peak[work.vector_dtype],
                                     work.flops_special / t.special_peak])
    roof = compute
    bandwidth = {r.level: r.bandwidth_bytes_per_s for r in memory_roofs(hw)}
    for level, moved in batch.bytes_by_level.items():
        if level in bandwidth:
            roof = np.maximum(roof, moved / bandwidth[level])
    return OpMetrics(index=index, predicted_s=batch.time_s, bound=batch.bound.tolist(), flops=batch.flops,
                     bytes_by_level=dict(batch.bytes_by_level), roof_s=roof, errors=errors)
