"""Pooled embedding lookups (embedding bags): random table rows gathered, each bag's rows pooled into one output row.

The layout follows FBGEMM's table-batched embedding (``split_embedding_codegen_forward_*_kernel``: one warp per
bag, 16 bags per 512-thread block, each lane loading 4-element vectors of a row) and its fused backward
(``split_embedding_backward_codegen_<optimizer>_*``: the indices sorted by a radix sort, then each looked-up row's
gradient summed from its bags' gradient rows and the row updated in place with its optimizer state).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Self

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.ops.base import (
    MAX_DIMENSION,
    FloatArray,
    Op,
    OpError,
    Pass,
    Work,
    check_pass,
    column,
    dtype_codes,
    register,
    require_non_negative,
    require_positive,
)

WARP_THREADS = 32.0  # one warp per bag
BAGS_PER_BLOCK = 16.0  # FBGEMM's kForwardMaxThreads (512) / warp size
VECTOR_ELEMENTS = 4.0  # Vec4T: each lane loads 4 elements of a row at a time


def _rounded(row_bytes: FloatArray, granularity_bytes: float) -> FloatArray:
    """Bytes moved per random row: whole sectors/lines."""
    return np.ceil(row_bytes / granularity_bytes) * granularity_bytes


MAX_SORT_PASSES = 64  # passes of a radix sort over int64 keys with one-bit digits: the most any sort takes


@register
@dataclass(frozen=True)
class EmbeddingBag(Op):
    """Pooled embedding lookup: ``num_indices`` rows of ``embedding_dim`` elements gathered into ``num_bags`` bags.

    Forward: each row read in whole sectors, the indices and bag offsets read, each bag's pooled row written
    (``output_dtype``); ``weighted``: a per-lookup fp32 weight read and multiplied. Backward (FBGEMM's fused
    training step): the indices radix-sorted (``sort_passes`` passes over int64 keys and int32 positions), each
    lookup's bag gradient row read, each looked-up row read and written with ``state_bytes_per_row`` of optimizer
    state (an upper bound: repeated indices are merged after the sort, and how many repeat is not known); weighted:
    each lookup weight's gradient (its row and its bag's gradient row read, the fp32 gradient written).
    """

    kind = "embedding_bag"

    num_indices: int
    embedding_dim: int
    num_bags: int
    dtype: DType
    output_dtype: DType = DType.FP32
    index_dtype: DType = DType.INT64
    weighted: bool = False
    pass_: Pass = "forward"
    sort_passes: int = 0
    state_bytes_per_row: float = 0.0

    def __post_init__(self) -> None:
        require_positive(self.kind, num_indices=self.num_indices, embedding_dim=self.embedding_dim,
                         num_bags=self.num_bags)
        require_non_negative(self.kind, sort_passes=self.sort_passes, state_bytes_per_row=self.state_bytes_per_row)
        if self.sort_passes > MAX_SORT_PASSES:  # 1e308 passes made the forward's bytes NaN (0 x inf) and its time 2 µs
            raise OpError(self.kind, "sort_passes", f"{self.sort_passes:g} passes: a radix sort of 64-bit keys takes "
                                                    f"at most {MAX_SORT_PASSES} (one bit a pass)")
        if self.state_bytes_per_row > MAX_DIMENSION:
            raise OpError(self.kind, "state_bytes_per_row", f"{self.state_bytes_per_row:g} is larger than "
                                                            f"{MAX_DIMENSION:g}: not a real workload")
        check_pass(self.kind, self.pass_)

    def loop_dims(self) -> dict[str, int]:
        return {"indices": self.num_indices, "row_elements": self.embedding_dim, "bags": self.num_bags}

    @classmethod
    def work(cls, ops: Sequence[Self], granularity_bytes: float = 1.0) -> Work:
        lookups, dim, bags = column(ops, "num_indices"), column(ops, "embedding_dim"), column(ops, "num_bags")
        table_bytes = np.array([o.dtype.bytes for o in ops])
        out_bytes = np.array([o.output_dtype.bytes for o in ops])
        index_bytes = np.array([o.index_dtype.bytes for o in ops])
        weighted = np.array([o.weighted for o in ops], dtype=np.float64)
        backward = np.array([o.pass_ != "forward" for o in ops], dtype=np.float64)
        forward = np.array([o.pass_ != "backward" for o in ops], dtype=np.float64)
        rows = lookups * _rounded(dim * table_bytes, granularity_bytes)
        offsets = (bags + 1.0) * index_bytes
        sort = column(ops, "sort_passes") * 2.0 * lookups * (index_bytes + 4.0)
        state = np.array([o.state_bytes_per_row for o in ops])
        state_rows = np.where(state > 0, lookups * _rounded(state, granularity_bytes), 0.0)
        grads = lookups * _rounded(dim * out_bytes, granularity_bytes)  # each lookup's bag gradient row
        # backward of a weighted bag: also each lookup weight's gradient, its row . its bag's gradient row
        weight_grads = backward * weighted * (rows + grads + lookups * 4.0)
        roles = {
            "weights": rows * (forward + 2.0 * backward) + 2.0 * state_rows * backward,
            "indices": (lookups * index_bytes + offsets) * (forward + backward) + sort * backward,
            "activations_in": lookups * 4.0 * weighted * (forward + backward) + backward * grads,
            "activations_out": forward * bags * dim * out_bytes,
            "workspace": weight_grads,
        }
        flops = lookups * dim * ((1.0 + weighted) * forward + (4.0 + 2.0 * weighted) * backward)
        codes = dtype_codes([o.output_dtype for o in ops])
        threads = bags * WARP_THREADS
        return Work(n=len(ops), flops_matrix=np.zeros(len(ops)), flops_vector=flops,
                    flops_special=np.zeros(len(ops)), bytes_by_role=roles, matrix_dtype=codes,
                    vector_dtype=codes, parallel_items=np.ceil(bags / BAGS_PER_BLOCK),
                    kernels=1.0 + backward * (2.0 + column(ops, "sort_passes")), threads=threads,
                    bytes_per_thread=VECTOR_ELEMENTS * table_bytes)
