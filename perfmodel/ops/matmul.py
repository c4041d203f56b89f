"""Matmul / batched matmul, with optional bias and weight-only quantization."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.ops.base import (
    Op,
    OpColumns,
    Pass,
    Work,
    check_pass,
    column,
    dtype_bytes,
    dtype_column,
    dtype_set,
    gemm_slots,
    pass_factors,
    pass_invalid,
    positive_invalid,
    register,
    require_positive,
)

DEQUANT_FLOPS_PER_WEIGHT = 2.0  # scale multiply + zero-point subtract (or int->float convert)
DEQUANT_TILE_M = 128  # weights are dequantized once per M-tile that loads them


@register
@dataclass(frozen=True)
class Matmul(Op):
    """C[batch, m, n] = A[batch, m, k] @ B[batch?, k, n] (+ bias[n]).

    ``weight_dtype`` stores B narrower than ``dtype`` (weight-only quantization: int4/int8
    weights, 16-bit compute): B moves at its own width plus one ``dtype`` scale per
    ``group_size`` weights (from DRAM, and into the schedule's shared-memory tiles:
    ``Work.gemm_b_bytes``), and is dequantized on the vector engine. ``b_batched=False``
    shares one B across the batch (a linear layer on a 3-D input). ``compute_dtype`` is the
    math precision when it differs from the storage (fp16 data with fp32 multiplies).
    """

    kind = "matmul"
    columnar = True

    m: int
    n: int
    k: int
    dtype: DType
    batch: int = 1
    out_dtype: DType | None = None
    compute_dtype: DType | None = None
    weight_dtype: DType | None = None
    group_size: int = 128
    transpose_a: bool = False
    transpose_b: bool = False
    bias: bool = False
    b_batched: bool = True
    pass_: Pass = "forward"

    def __post_init__(self) -> None:
        require_positive(self.kind, m=self.m, n=self.n, k=self.k, batch=self.batch,
                         group_size=self.group_size)
        check_pass(self.kind, self.pass_)

    @classmethod
    def invalid_rows(cls, cols: OpColumns) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """The rows ``__post_init__`` rejects, found at once."""
        return positive_invalid(cols, "m", "n", "k", "batch", "group_size") | pass_invalid(cols)

    def loop_dims(self) -> dict[str, int]:
        return {"batch": self.batch, "m": self.m, "n": self.n, "k": self.k}

    @classmethod
    def work(cls, ops: Sequence[Self] | OpColumns, granularity_bytes: float = 1.0) -> Work:
        m, n, k, b = (column(ops, name) for name in ("m", "n", "k", "batch"))
        fwd, bwd = pass_factors(ops)
        a_bytes = dtype_bytes(ops, "dtype")
        out_bytes = dtype_bytes(ops, "out_dtype", "dtype")
        w_bytes = dtype_bytes(ops, "weight_dtype", "dtype")
        quantized = dtype_set(ops, "weight_dtype") & (dtype_column(ops, "weight_dtype", "dtype")
                                                      != dtype_column(ops, "dtype"))
        group = column(ops, "group_size")
        b_count = np.where(column(ops, "b_batched") > 0, b, 1.0)
        has_bias = column(ops, "bias")

        gemm = 2.0 * b * m * n * k
        weights = b_count * k * n * w_bytes
        scales = np.where(quantized, b_count * np.ceil(k / group) * n * a_bytes, 0.0)
        dequant = np.where(quantized, b_count * k * n * DEQUANT_FLOPS_PER_WEIGHT
                           * np.ceil(m * b / b_count / DEQUANT_TILE_M), 0.0)
        act_in = b * m * k * a_bytes
        act_out = b * m * n * out_bytes
        bias_bytes = has_bias * n * out_bytes
        # backward: dA = dC B^T and dB = A^T dC (2 GEMMs); reads dC, A, B; writes dA, dB.
        flops_matrix = gemm * (fwd + 2.0 * bwd)
        flops_vector = (has_bias * b * m * n + dequant) * fwd + (dequant + has_bias * b * m * n) * bwd
        roles = {
            "weights": (weights + bias_bytes) * (fwd + bwd) + bwd * (b_count * k * n * a_bytes),
            "scales": scales * (fwd + bwd),
            "activations_in": act_in * fwd + bwd * (act_in + b * m * n * out_bytes),
            "activations_out": act_out * fwd + bwd * act_in,
        }
        matrix_dtype = dtype_column(ops, "compute_dtype", "dtype")
        gemms = gemm_slots((b * fwd, m, n, k), (b * bwd, m, k, n), (b * bwd, k, n, m))
        return Work(
            n=len(ops),
            flops_matrix=flops_matrix,
            flops_vector=flops_vector,
            flops_special=np.zeros(len(ops)),
            bytes_by_role=roles,
            matrix_dtype=matrix_dtype,
            vector_dtype=matrix_dtype.copy(),
            parallel_items=b * np.ceil(m / 128) * np.ceil(n / 128),
            kernels=fwd + 2.0 * bwd,
            # forward C = A B; data-gradient dA = dC Bᵀ (m x k, K = n); weight-gradient dB = Aᵀ dC
            gemm_batch=gemms[0], gemm_m=gemms[1], gemm_n=gemms[2], gemm_k=gemms[3],
            # the forward GEMM loads the stored weights (int4 / int8) into shared memory and dequantises them in
            # registers; the backward GEMMs read the dequantised or 16-bit copies
            gemm_b_bytes=np.where(quantized, w_bytes, 0.0),
        )
