"""Row-wise ops over the last axis: layernorm, rmsnorm, batchnorm, softmax."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.ops.base import (
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


# PyTorch's vectorized_layer_norm_kernel (aten/src/ATen/native/cuda/layer_norm_kernel.cu) normalizes a row in a
# loop of ceil(cols / (threads x vector_width)) steps after its statistics; gamma, beta and Y are not __restrict__, so
# a step's gamma / beta loads cannot be issued before the last step's store: one LLC round trip a step, one after
# another (docs/model.md, "Small-kernel floors per device and layer norm's normalize loop"). Off: layer norm better in
# both leave-one-out splits but the A40's rows too slow, and one device out the refit moved elementwise
# (docs/accuracy.md, ln16)
LAYER_NORM_LOOP_CHAIN = False
# PyTorch's vectorized_layer_norm_kernel (layer_norm_kernel.cu, compute_stats / cuWelfordOnlineSum) updates a Welford
# state element by element after each 8-byte load, and normalizes after the next: fp32 instructions per element,
# counted from the source (docs/model.md, "Layer norm's Welford update between its loads"): half -> float 1, delta 1,
# count + 1 1, the IEEE reciprocal's refinement 3 (its MUFU.RCP runs on the SFU beside), new mean 1, val - mean 1,
# M2 1; normalize: x, gamma, beta to float 3, x - mean 1, x rstd 1, x gamma + beta 1, float -> half 0.5 (two a pack)
WELFORD_FP32_INSTRUCTIONS_PER_ELEMENT = 9.0 + 6.5
# Threads of PyTorch's vectorized layer norm's row block (32 x num_threads() / 32 = 128 on CUDA): the description the
# term applies to (measured_data.TORCH_LAYER_NORM); Inductor's Triton kernels keep more loads in flight a thread
TORCH_VECTORIZED_THREADS = 128
# On since ln17: layer norm 17.3 -> 12.7 % one device out, 17.5 -> 11.7 % one vendor out, no other class moved
# (docs/accuracy.md, ln17)
LAYER_NORM_WELFORD_BETWEEN_LOADS = True


@register
@dataclass(frozen=True)
class LayerNorm(RowOp):
    """y = (x − mean) · rstd · γ + β; 8 FLOPs per element, one rsqrt per row."""

    kind = "layernorm"
    vector_flops_per_element = 8.0
    param_vectors = 2.0
    stats_per_row = 2.0

    @classmethod
    def work(cls, ops: Sequence[Self] | OpColumns, granularity_bytes: float = 1.0) -> Work:
        """With ``LAYER_NORM_LOOP_CHAIN``, the forward's normalize loop steps as dependent LLC round trips; with
        ``LAYER_NORM_WELFORD_BETWEEN_LOADS``, PyTorch's kernel's per-element fp32 work between its loads."""
        work = super().work(ops, granularity_bytes)
        fwd, _ = pass_factors(ops)
        if LAYER_NORM_LOOP_CHAIN:
            cols = last_dim(ops)
            width = column(ops, "vector_width")
            threads = np.minimum(np.ceil(cols / width), column(ops, "threads_per_row"))
            work.llc_round_trips = np.ceil(cols / (threads * width)) * fwd
        if LAYER_NORM_WELFORD_BETWEEN_LOADS:
            torch_kernel = column(ops, "threads_per_row") == TORCH_VECTORIZED_THREADS
            work.fp32_instructions_between_loads = np.where(
                torch_kernel, WELFORD_FP32_INSTRUCTIONS_PER_ELEMENT * shape_elements(ops) * fwd, 0.0)
        return work


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
        """Rows longer than ``PERSISTENT_SOFTMAX_MAX_COLS`` read x three times forward (bytes)."""
        work = super().work(ops, granularity_bytes)
        cols = last_dim(ops)
        fwd, _ = pass_factors(ops)
        tensor = shape_elements(ops) * dtype_bytes(ops, "dtype")
        extra = np.where(cols > PERSISTENT_SOFTMAX_MAX_COLS, (SOFTMAX_BLOCK_READS - 1.0) * tensor * fwd, 0.0)
        work.bytes_by_role["activations_in"] = work.bytes_by_role["activations_in"] + extra
        return work
