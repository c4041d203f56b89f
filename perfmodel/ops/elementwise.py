"""Elementwise chains, reductions and layout ops (transpose, reshape): bytes-bound streams."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.ops.base import (
    DTYPE_BYTES,
    MAX_DIMENSION,
    FloatArray,
    IntArray,
    Op,
    OpColumns,
    OpError,
    Work,
    check_shape,
    column,
    dtype_codes,
    dtype_column,
    last_dim,
    numel,
    positive_invalid,
    register,
    require_non_negative,
    require_positive,
    shape_elements,
    shape_invalid,
)

ELEMENTS_PER_BLOCK = 2048.0  # 256 threads x 8 elements: the usual grid of a streaming kernel
# PyTorch's vectorized_elementwise_kernel loads 4 elements per thread per access (vec4).
DEFAULT_VECTOR_WIDTH = 4


def _stream_work(ops: Sequence[Op] | OpColumns, elements: FloatArray, read: FloatArray, written: FloatArray,
                 vector: FloatArray, special: FloatArray, kernels: FloatArray,
                 dtypes: Sequence[DType] | IntArray, width: FloatArray | None = None) -> Work:
    """Work of a streaming kernel: one thread per ``width`` elements, its loads in flight (``dtypes``: the
    ops' dtypes, or their codes)."""
    codes = dtypes if isinstance(dtypes, np.ndarray) else dtype_codes(dtypes)
    width = np.full(len(ops), float(DEFAULT_VECTOR_WIDTH)) if width is None else width
    threads = np.ceil(elements / width)
    return Work(
        n=len(ops), flops_matrix=np.zeros(len(ops)), flops_vector=vector, flops_special=special,
        bytes_by_role={"activations_in": read, "activations_out": written},
        matrix_dtype=codes, vector_dtype=codes,
        parallel_items=np.ceil(elements / ELEMENTS_PER_BLOCK), kernels=kernels,
        threads=threads, bytes_per_thread=(read + written) / np.maximum(threads, 1.0),
    )


def _elements(ops: Sequence[Op], name: str = "shape") -> FloatArray:
    return np.array([float(numel(getattr(o, name))) for o in ops])


@register
@dataclass(frozen=True)
class Elementwise(Op):
    """A fused chain over ``shape``: reads ``inputs`` tensors, writes ``outputs`` tensors.

    ``vector_width``: elements each thread loads per access (4 in PyTorch's vectorized kernels,
    1 in a scalar loop); with the latency it bounds the bytes in flight (Little's law).
    ``threads_per_row``: the kernel runs one thread block per row (the last dimension) of up to this many
    threads, each looping over the row (vLLM's activation kernels: 1024; its rotary kernel: 512), so a few
    rows keep few loads in flight; None: one thread per ``vector_width`` elements over the whole tensor.
    ``dependent_loads``: loads a thread waits for one after another before its data's address is known (vLLM's
    rotary kernel: the token's position, then the cos/sin cache row it indexes): the kernel lasts at least that
    many DRAM round trips.
    """

    kind = "elementwise"

    shape: tuple[int, ...]
    dtype: DType
    inputs: int = 1
    outputs: int = 1
    flops_per_element: float = 1.0
    transcendentals_per_element: float = 0.0
    vector_width: int = DEFAULT_VECTOR_WIDTH
    threads_per_row: int | None = None
    dependent_loads: int = 0

    columnar: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_shape(self.kind, "shape", self.shape)
        require_non_negative(self.kind, inputs=self.inputs, outputs=self.outputs,
                             dependent_loads=self.dependent_loads,
                             flops_per_element=self.flops_per_element,
                             transcendentals_per_element=self.transcendentals_per_element)
        require_positive(self.kind, vector_width=self.vector_width)
        if self.threads_per_row is not None:
            require_positive(self.kind, threads_per_row=self.threads_per_row)
        if self.inputs + self.outputs == 0:
            raise OpError(self.kind, "inputs", "an op with no inputs and no outputs moves nothing")

    @classmethod
    def invalid_rows(cls, cols: OpColumns) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """The rows ``__post_init__`` may reject, found at once (NaN: an unset ``threads_per_row``)."""
        v = cols.values
        bad: np.ndarray[Any, np.dtype[np.bool_]] = shape_invalid(cols) | positive_invalid(cols, "vector_width")
        for name in ("inputs", "outputs", "dependent_loads", "flops_per_element", "transcendentals_per_element"):
            bad |= v[name] < 0
        per_row = v["threads_per_row"]
        bad |= (per_row <= 0) | (per_row > MAX_DIMENSION)  # NaN compares False: unset is valid
        bad |= v["inputs"] + v["outputs"] == 0
        if "shape#rank" in v:
            bad |= v["shape#rank"] == 0
        return bad

    def loop_dims(self) -> dict[str, int]:
        return {"elements": numel(self.shape)}

    @classmethod
    def work(cls, ops: Sequence[Self] | OpColumns, granularity_bytes: float = 1.0) -> Work:
        n = shape_elements(ops)
        codes = dtype_column(ops, "dtype")
        elem = DTYPE_BYTES[codes]
        ins = column(ops, "inputs")
        outs = column(ops, "outputs")
        flops = column(ops, "flops_per_element") * n
        special = column(ops, "transcendentals_per_element") * n
        width = column(ops, "vector_width")
        work = _stream_work(ops, n, n * elem * ins, n * elem * outs, flops, special,
                            np.ones(len(ops)), codes, width)
        per_row = np.nan_to_num(_optional_column(ops, "threads_per_row"), nan=0.0)
        if per_row.any():
            cols = last_dim(ops)
            rows = n / cols
            row_wise = per_row > 0
            # one block per row, each thread looping over it: its loads in flight are one access per tensor
            work.threads = np.where(row_wise, rows * np.minimum(np.ceil(cols / width), per_row), work.threads)
            work.bytes_per_thread = np.where(row_wise, width * elem * (ins + outs), work.bytes_per_thread)
            work.parallel_items = np.where(row_wise, rows, work.parallel_items)
        work.dependent_round_trips = column(ops, "dependent_loads")
        return work


def _optional_column(ops: Sequence[Op] | OpColumns, name: str) -> FloatArray:
    """An optional numeric field as floats, NaN where unset (``None``)."""
    if isinstance(ops, OpColumns):
        values: FloatArray = ops.values[name].astype(np.float64, copy=False)
        return values
    return np.array([np.nan if (v := getattr(o, name)) is None else float(v) for o in ops], dtype=np.float64)


@register
@dataclass(frozen=True)
class Reduce(Op):
    """Reduce ``shape`` over ``axes`` with sum/mean/max/min (one FLOP per input element)."""

    kind = "reduce"

    shape: tuple[int, ...]
    axes: tuple[int, ...]
    dtype: DType
    op: Literal["sum", "mean", "max", "min"] = "sum"

    def __post_init__(self) -> None:
        check_shape(self.kind, "shape", self.shape)
        rank = len(self.shape)
        if not self.axes:
            raise OpError(self.kind, "axes", "give at least one axis")
        for axis in self.axes:
            if not -rank <= axis < rank:
                raise OpError(self.kind, "axes", f"axis {axis} out of range for rank {rank}")

    @property
    def out_elements(self) -> int:
        reduced = {a % len(self.shape) for a in self.axes}
        return numel(tuple(d for i, d in enumerate(self.shape) if i not in reduced) or (1,))

    def loop_dims(self) -> dict[str, int]:
        total = numel(self.shape)
        return {"outputs": self.out_elements, "reduced": total // self.out_elements}

    @classmethod
    def work(cls, ops: Sequence[Self], granularity_bytes: float = 1.0) -> Work:
        n = _elements(ops)
        out = np.array([float(o.out_elements) for o in ops])
        elem = np.array([o.dtype.bytes for o in ops])
        return _stream_work(ops, n, n * elem, out * elem, n, np.zeros(len(ops)),
                            np.ones(len(ops)), [o.dtype for o in ops])


@register
@dataclass(frozen=True)
class Transpose(Op):
    """Materialise ``shape`` permuted by ``perm``: one read and one write of every element."""

    kind = "transpose"

    shape: tuple[int, ...]
    perm: tuple[int, ...]
    dtype: DType

    def __post_init__(self) -> None:
        check_shape(self.kind, "shape", self.shape)
        if sorted(self.perm) != list(range(len(self.shape))):
            raise OpError(self.kind, "perm", f"{list(self.perm)} is not a permutation of "
                          f"0..{len(self.shape) - 1}")

    def loop_dims(self) -> dict[str, int]:
        return {f"d{i}": d for i, d in enumerate(self.shape)}

    @classmethod
    def work(cls, ops: Sequence[Self], granularity_bytes: float = 1.0) -> Work:
        n = _elements(ops)
        elem = np.array([o.dtype.bytes for o in ops])
        return _stream_work(ops, n, n * elem, n * elem, np.zeros(len(ops)), np.zeros(len(ops)),
                            np.ones(len(ops)), [o.dtype for o in ops])


@register
@dataclass(frozen=True)
class Reshape(Op):
    """A contiguous reshape is a view (no bytes, no kernel); otherwise a copy."""

    kind = "reshape"

    shape: tuple[int, ...]
    new_shape: tuple[int, ...]
    dtype: DType
    contiguous: bool = True

    def __post_init__(self) -> None:
        check_shape(self.kind, "shape", self.shape)
        check_shape(self.kind, "new_shape", self.new_shape)
        if numel(self.shape) != numel(self.new_shape):
            raise OpError(self.kind, "new_shape", f"{list(self.new_shape)} has {numel(self.new_shape)} "
                          f"elements, shape {list(self.shape)} has {numel(self.shape)}")

    def loop_dims(self) -> dict[str, int]:
        return {"elements": numel(self.shape)}

    @classmethod
    def work(cls, ops: Sequence[Self], granularity_bytes: float = 1.0) -> Work:
        n = _elements(ops)
        copy = np.array([not o.contiguous for o in ops], dtype=np.float64)
        moved = copy * n * np.array([o.dtype.bytes for o in ops])
        return _stream_work(ops, n, moved, moved, np.zeros(len(ops)), np.zeros(len(ops)),
                            copy, [o.dtype for o in ops])
