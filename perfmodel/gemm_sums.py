"""The per-GEMM fields that add up into an op's totals (seconds and bytes), and the indexed add for them."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.ops.base import FloatArray

# GemmChoice fields summed over an op's GEMMs and over a GEMM's serial repeats (seconds, bytes)
GEMM_SUMS = ("compute_s", "dram_s", "reuse_s", "body_s", "dram_bytes", "reuse_bytes")


def add_unique(total: FloatArray, rows: np.ndarray[Any, np.dtype[np.intp]], values: FloatArray) -> None:
    """``np.add.at(total, rows, values)`` for ``rows`` without repeats (one GEMM per op): the same sums at a
    fraction of its cost."""
    total[rows] += values
