"""Compute cycles of a GEMM on one rows x cols systolic array, per dataflow (no memory stalls).

A GEMM C[M,N] = A[M,K] · B[K,N] maps two of its dimensions onto the array and streams the third
(T) through it; each mapping of one array-sized block is a *fold*. A fold costs its streamed
length plus the array's skew (docs/model.md §3, "Systolic arrays"):

    output stationary  (M on rows, N on cols, K streams):  T + rows + cols − 2
    weight stationary  (K on rows, N on cols, M streams):  T + 2·rows + cols − 2
    input stationary   (K on rows, M on cols, N streams):  T + 2·rows + cols − 2

The stationary operand of WS / IS first shifts into the array (rows cycles); the first operand
wave reaches the last row after rows − 1 cycles; the last partial sum leaves the last column after
cols − 1. Folds = ⌈Sr/rows⌉ · ⌈Sc/cols⌉ over the two mapped dimensions, and they run one after
another. SCALE-Sim (v2/v3, ``scalesim`` on PyPI) counts the same cycles; ``benchmarks/scalesim_oracle.py``
and ``tests/unit/test_systolic.py`` check it.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from perfmodel.ops.base import FloatArray

Dataflow = Literal["os", "ws", "is"]
DATAFLOWS: tuple[Dataflow, ...] = ("os", "ws", "is")


def fold_cycles(streamed: FloatArray | float, rows: float, cols: float, dataflow: Dataflow) -> FloatArray:
    """Cycles of one fold that streams ``streamed`` vectors through a rows x cols array."""
    load = 0.0 if dataflow == "os" else rows  # the stationary operand shifts in first
    out: FloatArray = np.asarray(streamed, dtype=np.float64) + load + rows + cols - 2.0
    return out


def array_cycles(m: FloatArray | float, n: FloatArray | float, k: FloatArray | float, rows: int, cols: int,
                 dataflow: Dataflow) -> FloatArray:
    """Compute cycles of M x N x K GEMMs on one rows x cols array (arrays or scalars, elementwise)."""
    if rows < 1 or cols < 1:
        raise ValueError(f"array {rows}x{cols}: rows and cols must be >= 1")
    if dataflow not in DATAFLOWS:
        raise ValueError(f"dataflow {dataflow!r}: expected one of {', '.join(DATAFLOWS)}")
    mm, nn, kk = (np.asarray(x, dtype=np.float64) for x in (m, n, k))
    if np.any(mm < 1) or np.any(nn < 1) or np.any(kk < 1):
        raise ValueError("GEMM dimensions must be >= 1")
    spatial_r, spatial_c, streamed = {"os": (mm, nn, kk), "ws": (kk, nn, mm), "is": (kk, mm, nn)}[dataflow]
    folds = np.ceil(spatial_r / rows) * np.ceil(spatial_c / cols)
    out: FloatArray = folds * fold_cycles(streamed, rows, cols, dataflow)
    return out
