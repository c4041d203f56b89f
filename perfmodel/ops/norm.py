"""Row-wise ops over the last axis: layernorm, rmsnorm, batchnorm, softmax."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.ops.base import (
    DTYPE_INDEX,
    Op,
    OpColumns,
    Pass,
    Work,
    check_pass,
    check_shape,
    column,
    dtype_bytes,
    dtype_column,
    last_dim,
    pass_factors,
    pass_invalid,
    positive_invalid,
    register,
    require_positive,
    shape_elements,
    shape_invalid,
)

STATS_BYTES = 4.0  # fp32 mean / rstd saved per row for the backward
THREADS_PER_ROW = 1024.0  # one thread block per row (Apex / vLLM style), up to 1024 threads
# PyTorch's softmax forward (aten/src/ATen/native/cuda/SoftMax.cu, host_softmax): rows of at most 1024 elements run
# the persistent warp softmax (PersistentSoftmax.cuh), which holds a row in registers and reads it once; longer rows
# run cunn_SoftMaxForward, one block per row that reads x for the max, again for the sum of exp, and again to write
# y: three reads (docs/model.md, "Softmax passes")
PERSISTENT_SOFTMAX_MAX_COLS = 1024
SOFTMAX_BLOCK_READS = 3.0
# cunn_SoftMaxForward's block (SoftMax_getBlockSize, PyTorch 1.x-2.3): ILP = 16 B / element size, threads = the power
# of two >= min(cols / ILP, 1024) / 2, at least a warp (docs/model.md, "Softmax passes")
SOFTMAX_ILP_BYTES = 16.0
SOFTMAX_MAX_BLOCK_THREADS = 1024.0
SOFTMAX_MIN_BLOCK_THREADS = 32.0
# Per element, in fp32 (accscalar_t is float for 16-bit inputs): fp32 issue slots and transcendental-unit ops. expf
# (CUDA math_functions.h, __internal_accurate_expf) is 8 slots (two multiplies, trunc, two FMAs, the product of its
# two exp2f, two range selects) and 2 MUFU.EX2; an IEEE fp32 divide is 1 MUFU.RCP and 4 slots (Newton FMAs and the
# correction); each 16-bit <-> fp32 conversion, max, add and subtract 1 slot. The persistent kernel: cvt + max; sub +
# expf + add; divide + cvt = 17 slots, 3 MUFU. The block kernel evaluates exp twice (the sum pass and the write
# pass): cvt + max; cvt + sub + expf + add; cvt + sub + expf + divide + cvt = 28 slots, 5 MUFU. One slot = one FMA =
# 2 FLOPs of the vector peak.
SOFTMAX_PERSISTENT_SLOTS = 17.0
SOFTMAX_PERSISTENT_SPECIAL = 3.0
SOFTMAX_BLOCK_SLOTS = 28.0
SOFTMAX_BLOCK_SPECIAL = 5.0
# the bytes the L2 holds per resident block between its first read of a row and its last re-read: the row, and the
# row of output the other resident blocks write meanwhile (write-allocate L2 on NVIDIA and AMD parts)
SOFTMAX_HELD_ROWS = 2.0

@dataclass(frozen=True)
class RowOp(Op):
    """Base of the ops that normalise each row of ``shape`` over its last axis.

    ``vector_width``: elements per thread access (4 in PyTorch's vectorized layer norm, 1 in a
    scalar row loop such as 2023-era vLLM rms_norm); it sets the bytes in flight.
    ``threads_per_row``: the threads of the one block that handles a row (vLLM's rms_norm: up to 1024;
    PyTorch's vectorized layer norm: 128, a 32 x 4 block); a short row uses ceil(cols / width) of them.
    """

    shape: tuple[int, ...]
    dtype: DType
    pass_: Pass = "forward"
    vector_width: int = 4
    threads_per_row: int = int(THREADS_PER_ROW)

    columnar: ClassVar[bool] = True

    # per element: vector FLOPs forward, per row: transcendentals, parameter vectors, saved stats
    vector_flops_per_element: ClassVar[float] = 1.0
    special_per_row: ClassVar[float] = 1.0
    special_per_element: ClassVar[float] = 0.0
    param_vectors: ClassVar[float] = 0.0
    stats_per_row: ClassVar[float] = 0.0

    def __post_init__(self) -> None:
        check_shape(self.kind, "shape", self.shape)
        check_pass(self.kind, self.pass_)
        require_positive(self.kind, vector_width=self.vector_width, threads_per_row=self.threads_per_row)

    @classmethod
    def invalid_rows(cls, cols: OpColumns) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """The rows ``__post_init__`` rejects, found at once."""
        bad: np.ndarray[Any, np.dtype[np.bool_]] = (shape_invalid(cols) | pass_invalid(cols)
                                                    | positive_invalid(cols, "vector_width", "threads_per_row"))
        return bad

    def loop_dims(self) -> dict[str, int]:
        cols = self.shape[-1]
        return {"rows": int(np.prod(self.shape[:-1], dtype=np.int64)), "cols": cols}

    @classmethod
    def work(cls, ops: Sequence[Self] | OpColumns, granularity_bytes: float = 1.0) -> Work:
        elements = shape_elements(ops)
        cols = last_dim(ops)
        rows = elements / cols
        elem = dtype_bytes(ops, "dtype")
        width = column(ops, "vector_width")
        fwd, bwd = pass_factors(ops)
        tensor = elements * elem
        params = cls.param_vectors * cols * elem
        stats = cls.stats_per_row * rows * STATS_BYTES
        # backward reads x and dy (and the saved stats), writes dx and the parameter gradients.
        roles = {
            "activations_in": tensor * fwd + 2.0 * tensor * bwd,
            "activations_out": tensor * fwd + tensor * bwd,
            "weights": params * (fwd + 2.0 * bwd),
            "workspace": stats * (fwd + bwd),
        }
        special = (cls.special_per_row * rows + cls.special_per_element * elements) * (fwd + bwd)
        dtypes = dtype_column(ops, "dtype")
        return Work(
            n=len(ops),
            flops_matrix=np.zeros(len(ops)),
            flops_vector=cls.vector_flops_per_element * elements * (fwd + 2.0 * bwd),
            flops_special=special,
            bytes_by_role=roles, matrix_dtype=dtypes, vector_dtype=dtypes.copy(),
            parallel_items=rows, kernels=fwd + bwd,
            # one block per row; each thread loads and stores ``vector_width`` elements at a time
            threads=rows * np.minimum(np.ceil(cols / width), column(ops, "threads_per_row")),
            bytes_per_thread=elem * width * (2.0 + bwd),
        )


@register
@dataclass(frozen=True)
class LayerNorm(RowOp):
    """y = (x − mean) · rstd · γ + β; 8 FLOPs per element, one rsqrt per row."""

    kind = "layernorm"
    vector_flops_per_element = 8.0
    param_vectors = 2.0
    stats_per_row = 2.0


@register
@dataclass(frozen=True)
class RmsNorm(RowOp):
    """y = x · rsqrt(mean(x²) + ε) · γ; 4 FLOPs per element, one rsqrt per row."""

    kind = "rmsnorm"
    vector_flops_per_element = 4.0
    param_vectors = 1.0
    stats_per_row = 1.0


@register
@dataclass(frozen=True)
class BatchNorm(RowOp):
    """Channels last; inference applies the running statistics: y = x · scale + shift.

    ``training`` computes the batch statistics first: a second read of x.
    """

    kind = "batchnorm"
    training: bool = False
    vector_flops_per_element = 2.0
    special_per_row = 0.0
    param_vectors = 4.0

    @classmethod
    def work(cls, ops: Sequence[Self] | OpColumns, granularity_bytes: float = 1.0) -> Work:
        work = super().work(ops, granularity_bytes)
        training = column(ops, "training")
        elements = shape_elements(ops)
        elem = dtype_bytes(ops, "dtype")
        work.bytes_by_role["activations_in"] = work.bytes_by_role["activations_in"] + training * elements * elem
        work.flops_vector = work.flops_vector + training * 3.0 * elements
        work.kernels = work.kernels + training
        return work


@register
@dataclass(frozen=True)
class Softmax(RowOp):
    """y = exp(x − max) / Σ exp; 4 FLOPs and one exp per element."""

    kind = "softmax"
    vector_flops_per_element = 4.0
    special_per_row = 0.0
    special_per_element = 1.0

    @classmethod
    def work(cls, ops: Sequence[Self] | OpColumns, granularity_bytes: float = 1.0) -> Work:
        """Rows longer than ``PERSISTENT_SOFTMAX_MAX_COLS`` read x three times forward (bytes), evaluate exp twice
        (``SOFTMAX_BLOCK_SLOTS``), and re-read their row from the L2 where the resident blocks' rows fit."""
        work = super().work(ops, granularity_bytes)
        cols = last_dim(ops)
        fwd, bwd = pass_factors(ops)
        elements = shape_elements(ops)
        elem = dtype_bytes(ops, "dtype")
        tensor = elements * elem
        block = cols > PERSISTENT_SOFTMAX_MAX_COLS
        extra = np.where(block, (SOFTMAX_BLOCK_READS - 1.0) * tensor * fwd, 0.0)
        work.bytes_by_role["activations_in"] = work.bytes_by_role["activations_in"] + extra
        # the forward's work in fp32 (fp64 for fp64 inputs); the backward keeps RowOp's count
        slots = np.where(block, SOFTMAX_BLOCK_SLOTS, SOFTMAX_PERSISTENT_SLOTS)
        special = np.where(block, SOFTMAX_BLOCK_SPECIAL, SOFTMAX_PERSISTENT_SPECIAL)
        work.flops_vector = 2.0 * slots * elements * fwd + 2.0 * cls.vector_flops_per_element * elements * bwd
        work.flops_special = special * elements * fwd + cls.special_per_element * elements * bwd
        fp64 = work.vector_dtype == DTYPE_INDEX[DType.FP64]
        work.vector_dtype = np.where(fp64, DTYPE_INDEX[DType.FP64], DTYPE_INDEX[DType.FP32]).astype(np.int64)
        ilp = np.maximum(1.0, SOFTMAX_ILP_BYTES / elem)
        half = np.minimum(cols / ilp, SOFTMAX_MAX_BLOCK_THREADS) / 2.0
        threads = np.maximum(SOFTMAX_MIN_BLOCK_THREADS, 2.0 ** np.ceil(np.log2(np.maximum(half, 1.0))))
        work.reread_bytes = extra
        work.reread_bytes_per_block = np.where(block, SOFTMAX_HELD_ROWS * cols * elem, 0.0)
        work.reread_block_threads = np.where(block, threads, 0.0)
        return work
