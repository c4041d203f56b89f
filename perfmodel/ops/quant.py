"""Quantize / dequantize with per-tensor, per-channel (per row) or per-group scales."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Self

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.ops.base import (
    Op,
    Work,
    check_shape,
    dtype_codes,
    numel,
    register,
    require_positive,
)
from perfmodel.ops.elementwise import DEFAULT_VECTOR_WIDTH, ELEMENTS_PER_BLOCK


@dataclass(frozen=True)
class QuantOp(Op):
    """Convert ``shape`` from ``from_dtype`` to ``to_dtype`` with scales of ``scale_dtype``.

    Scales: one per tensor, one per row (``channel``: all axes but the last), or one per
    ``group_size`` elements along the last axis (``group``).
    """

    shape: tuple[int, ...]
    from_dtype: DType
    to_dtype: DType
    granularity: Literal["tensor", "channel", "group"] = "tensor"
    group_size: int = 128
    scale_dtype: DType = DType.FP32

    flops_per_element: ClassVar[float] = 1.0

    def __post_init__(self) -> None:
        check_shape(self.kind, "shape", self.shape)
        require_positive(self.kind, group_size=self.group_size)

    @property
    def compute_dtype(self) -> DType:
        """The side the conversion computes in: ``from_dtype`` where it is a float type, else ``to_dtype``
        (int8 -> fp16 computes in fp16)."""
        return self.from_dtype if self.from_dtype.is_float else self.to_dtype

    @property
    def scales(self) -> int:
        rows = numel(self.shape[:-1] or (1,))
        if self.granularity == "tensor":
            return 1
        if self.granularity == "channel":
            return rows
        return rows * -(-self.shape[-1] // self.group_size)

    def loop_dims(self) -> dict[str, int]:
        return {"elements": numel(self.shape), "scales": self.scales}

    @classmethod
    def work(cls, ops: Sequence[Self], granularity_bytes: float = 1.0) -> Work:
        n = np.array([float(numel(o.shape)) for o in ops])
        src = n * np.array([o.from_dtype.bytes for o in ops])
        dst = n * np.array([o.to_dtype.bytes for o in ops])
        scales = np.array([o.scales * o.scale_dtype.bytes for o in ops], dtype=np.float64)
        codes = dtype_codes([o.compute_dtype for o in ops])
        return Work(
            n=len(ops), flops_matrix=np.zeros(len(ops)), flops_vector=n * cls.flops_per_element,
            flops_special=np.zeros(len(ops)),
            bytes_by_role={"activations_in": src, "activations_out": dst, "scales": scales},
            matrix_dtype=codes, vector_dtype=codes,
            parallel_items=np.ceil(n / ELEMENTS_PER_BLOCK), kernels=np.ones(len(ops)),
            threads=np.ceil(n / DEFAULT_VECTOR_WIDTH), bytes_per_thread=(src + dst) / np.ceil(n / DEFAULT_VECTOR_WIDTH),
        )


@register
@dataclass(frozen=True)
class Quantize(QuantOp):
    """q = clamp(round(x / scale)): multiply, round, two compares per element."""

    kind = "quantize"
    flops_per_element = 4.0


@register
@dataclass(frozen=True)
class Dequantize(QuantOp):
    """x = (q − zero) · scale: convert and multiply per element."""

    kind = "dequantize"
    flops_per_element = 2.0
