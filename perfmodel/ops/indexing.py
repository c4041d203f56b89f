"""Gather, scatter and embedding: random rows, each moved in whole sectors/lines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.ops.base import (
    DTYPE_BYTES,
    FloatArray,
    Op,
    OpColumns,
    Work,
    check_shape,
    column,
    dtype_column,
    numel,
    positive_invalid,
    register,
    require_positive,
    shape_invalid,
)
from perfmodel.ops.columns import RANK_SUFFIX

ROWS_PER_BLOCK = 4.0  # one warp per row, a few rows per thread block
# PyTorch's index_select (which embedding's forward calls), aten/src/ATen/native/cuda/Indexing.cu
# index_select_out_cuda_impl: indexSelectLargeIndex runs min(ceil(elements / 128), 8 x SM count) blocks of 128
# threads, each thread striding over elements: at most 8 x 128 = 1024 threads on an SM, whatever could be resident.
INDEX_SELECT_THREADS_PER_UNIT = 8.0 * 128.0
# Same file: at most 16 indices run indexSelectSmallIndex, whose threads stride over one row's elements and loop over
# the indices in turn; dst and src are not __restrict__, so each row's index load, then its table load, waits for
# the last row's store: one dependent DRAM round trip per row (docs/model.md, "Small index_select").
SMALL_INDEX_MAX_ROWS = 16


def _rounded(row_bytes: FloatArray, granularity_bytes: float) -> FloatArray:
    """Bytes actually moved per random row: whole sectors/lines."""
    return np.ceil(row_bytes / granularity_bytes) * granularity_bytes


@dataclass(frozen=True)
class RowAccess(Op):
    """Ops that move ``num_indices`` rows of a table of ``table_shape``."""

    table_shape: tuple[int, ...]
    num_indices: int
    dtype: DType
    index_dtype: DType = DType.INT64

    def __post_init__(self) -> None:
        check_shape(self.kind, "table_shape", self.table_shape)
        require_positive(self.kind, num_indices=self.num_indices)

    @property
    def row_bytes(self) -> float:
        return numel(self.table_shape[1:] or (1,)) * self.dtype.bytes

    def loop_dims(self) -> dict[str, int]:
        return {"indices": self.num_indices, "row_elements": numel(self.table_shape[1:] or (1,))}

    @classmethod
    def invalid_rows(cls, cols: OpColumns) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """The rows ``__post_init__`` may reject, found at once."""
        bad: np.ndarray[Any, np.dtype[np.bool_]] = (shape_invalid(cols, "table_shape")
                                                    | positive_invalid(cols, "num_indices"))
        rank = cols.values.get(f"table_shape{RANK_SUFFIX}")
        if rank is not None:
            bad |= rank == 0
        return bad

    @classmethod
    def _base(cls, ops: Sequence[Self] | OpColumns,
              granularity_bytes: float) -> tuple[FloatArray, FloatArray, FloatArray]:
        idx = column(ops, "num_indices")
        row = _row_elements(ops) * DTYPE_BYTES[dtype_column(ops, "dtype")]
        return idx, row, _rounded(row, granularity_bytes)

    @classmethod
    def _work(cls, ops: Sequence[Self] | OpColumns, roles: dict[str, FloatArray], vector: FloatArray) -> Work:
        codes = dtype_column(ops, "dtype")
        idx = column(ops, "num_indices")
        elem = DTYPE_BYTES[codes]
        row_elements = _row_elements(ops) * elem / elem  # the row's bytes over the element's, as before
        # one thread per element copied (PyTorch index_select / embedding kernels)
        return Work(n=len(ops), flops_matrix=np.zeros(len(ops)), flops_vector=vector,
                    flops_special=np.zeros(len(ops)), bytes_by_role=roles, matrix_dtype=codes,
                    vector_dtype=codes, parallel_items=np.ceil(idx / ROWS_PER_BLOCK),
                    kernels=np.ones(len(ops)), threads=idx * row_elements,
                    bytes_per_thread=2.0 * elem)


@register
@dataclass(frozen=True)
class Gather(RowAccess):
    """out[i] = table[index[i]]: random row reads, contiguous writes."""

    kind = "gather"

    @classmethod
    def work(cls, ops: Sequence[Self] | OpColumns, granularity_bytes: float = 1.0) -> Work:
        idx, row, rounded = cls._base(ops, granularity_bytes)
        index_bytes_each = DTYPE_BYTES[dtype_column(ops, "index_dtype")]
        index_bytes = idx * index_bytes_each
        roles = {"weights": idx * rounded, "indices": index_bytes, "activations_out": idx * row}
        work = cls._work(ops, roles, np.zeros(len(ops)))
        work.threads_per_unit_cap = np.full(len(ops), INDEX_SELECT_THREADS_PER_UNIT)
        work.dependent_round_trips = np.where(idx <= SMALL_INDEX_MAX_ROWS, idx, 0.0)
        # indexSelectLargeIndex: an element's index, then its row; the indices one DRAM sector holds cover that
        # many rows of output elements (docs/model.md section 3, "Large index_select: the index -> row chain")
        row_elements = row / DTYPE_BYTES[dtype_column(ops, "dtype")]
        per_sector = np.maximum(1.0, granularity_bytes / index_bytes_each)
        work.index_sector_elements = np.where(idx > SMALL_INDEX_MAX_ROWS, per_sector * row_elements, 0.0)
        return work


@register
@dataclass(frozen=True)
class Embedding(Gather):
    """Embedding lookup: a gather from a (num_embeddings, embedding_dim) table."""

    kind = "embedding"

    columnar: ClassVar[bool] = True

    @classmethod
    def _build(cls, data: dict[str, object]) -> Self:
        return super()._build(cls.json_fields(data))

    @staticmethod
    def json_fields(data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with ``num_embeddings`` / ``embedding_dim`` (missing ones 1) as the ``table_shape`` they name."""
        data = dict(data)
        if "num_embeddings" in data or "embedding_dim" in data:
            data["table_shape"] = [data.pop("num_embeddings", 1), data.pop("embedding_dim", 1)]
        return data


@register
@dataclass(frozen=True)
class Scatter(RowAccess):
    """table[index[i]] (+)= updates[i]: contiguous reads, random row writes.

    ``reduce='add'`` is a read-modify-write of each row with atomics (one add per element).
    """

    kind = "scatter"

    reduce: Literal["none", "add"] = "none"

    @classmethod
    def work(cls, ops: Sequence[Self], granularity_bytes: float = 1.0) -> Work:
        idx, row, rounded = cls._base(ops, granularity_bytes)
        add = np.array([o.reduce == "add" for o in ops], dtype=np.float64)
        index_bytes = idx * np.array([o.index_dtype.bytes for o in ops])
        elements = idx * row / np.array([o.dtype.bytes for o in ops])
        roles = {"activations_in": idx * row, "indices": index_bytes,
                 "activations_out": idx * rounded * (1.0 + add)}
        return cls._work(ops, roles, add * elements)


def _row_elements(ops: Sequence[RowAccess] | OpColumns) -> FloatArray:
    """Elements of one table row (``numel(table_shape[1:] or (1,))``) of many ops, as floats: in columns, the
    right-aligned block's product over its first real dimension."""
    if isinstance(ops, OpColumns):
        block = ops.values["table_shape"]
        rank = ops.values.get(f"table_shape{RANK_SUFFIX}")
        first = block[:, 0] if rank is None else block[np.arange(ops.n), block.shape[1] - np.maximum(rank, 1)]
        out: FloatArray = block.prod(axis=1) / first
        return out
    return np.fromiter((float(numel(o.table_shape[1:] or (1,))) for o in ops), dtype=np.float64, count=len(ops))
