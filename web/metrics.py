"""Roofline figures of merit for a list of ops on one device: predicted time and bound, modelled bytes per
level, and the speed-of-light (roof) time that '% of roof' and headroom are measured against."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.hardware import Hardware
from perfmodel.machine import tables
from perfmodel.ops import Op
from perfmodel.ops.base import FloatArray
from perfmodel.roofline import predict_many, predict_valid, work_of
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


def op_metrics(hw: Hardware, ops: Sequence[dict[str, Any] | Op]) -> OpMetrics:
    index, batch, errors = predict_valid(ops, lambda built: predict_many(hw, built))
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
