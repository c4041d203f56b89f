"""Schedule spaces of the bandwidth-bound families: transpose, row ops, streaming ops.

Each space turns one op's ``Work`` into one ``Work`` per candidate (numpy arrays, the op
repeated), which the roofline costs all at once:

- **transpose**: tile T x T through SMEM (T = 1 is the naive kernel), padding by one element.
  The strided side of DRAM moves runs of T·e bytes: sector efficiency min(1, T·e / sector).
  Without padding a warp reading a tile column hits the same bank every gcd(T·e/4, 32) words:
  that many-way conflict multiplies the SMEM reads (32 banks x 4 B).
- **row ops** (layernorm, rmsnorm, softmax, batchnorm): vector width, threads per row, rows per
  block. A row that does not fit on chip (registers + SMEM of the block) is read again:
  2 passes (one for statistics, one to normalise; online softmax also needs 2).
- **streaming ops** (elementwise, quantize, gather, scatter, embedding, reduce): vector width
  and threads per block; the bytes each thread keeps in flight set the Little's-law ramp.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from perfmodel.machine import MachineTables
from perfmodel.ops import Op
from perfmodel.ops.base import FloatArray, Work, numel
from perfmodel.ops.elementwise import Transpose
from perfmodel.ops.norm import RowOp

BANKS = 32
BANK_BYTES = 4.0
MAX_THREADS_PER_BLOCK = 1024.0


@dataclass
class StreamSpace:
    """Candidates of one op: named parameter arrays, the per-candidate Work, on-chip footprint."""

    params: dict[str, FloatArray]
    work: Work
    footprint_bytes: FloatArray

    @property
    def size(self) -> int:
        return self.work.n


def _grid(**axes: tuple[float, ...]) -> dict[str, FloatArray]:
    rows = np.array(list(itertools.product(*axes.values())), dtype=np.float64)
    return {name: rows[:, i].copy() for i, name in enumerate(axes)}


def bank_conflict_degree(tile: FloatArray, elem_bytes: float, padded: FloatArray) -> FloatArray:
    """Ways of the conflict when a warp reads one column of a T x T tile (1 = none)."""
    words = np.maximum(tile * elem_bytes / BANK_BYTES, 1.0).astype(np.int64)
    degree = np.gcd(words, BANKS).astype(np.float64)
    return np.where(padded > 0, 1.0, np.where(tile * elem_bytes >= BANK_BYTES * 2, degree, 1.0))


def transpose_space(t: MachineTables, op: Transpose, base: Work) -> StreamSpace:
    p = _grid(tile=(1.0, 8.0, 16.0, 32.0, 64.0), pad=(0.0, 1.0))
    p = {k: v[(p["tile"] > 1) | (p["pad"] == 0)] for k, v in p.items()}  # no padding without a tile
    c = p["tile"].size
    work = base.take(np.zeros(c, dtype=np.intp))
    elem = op.dtype.bytes
    sector = float(t.dram.access_granularity_bytes or 32)
    moves_last_axis = op.perm[-1] != len(op.shape) - 1
    size = numel(op.shape) * elem
    efficiency = np.where(moves_last_axis, np.minimum(1.0, p["tile"] * elem / sector), 1.0)
    work.bytes_by_role["activations_out"] = work.bytes_by_role["activations_out"] / efficiency
    tiled = p["tile"] > 1
    conflicts = bank_conflict_degree(p["tile"], elem, p["pad"])
    work.scratchpad_bytes = np.where(tiled & moves_last_axis, size * (1.0 + conflicts), 0.0)
    footprint = np.where(tiled, p["tile"] * (p["tile"] + p["pad"]) * elem, 0.0)
    return StreamSpace(p, work, footprint)


def row_space(t: MachineTables, op: RowOp, base: Work) -> StreamSpace:
    p = _grid(vector_width=(1.0, 2.0, 4.0, 8.0), threads_per_row=(32.0, 128.0, 256.0, 512.0, 1024.0),
              rows_per_block=(1.0, 2.0, 4.0, 8.0))
    keep = p["threads_per_row"] * p["rows_per_block"] <= MAX_THREADS_PER_BLOCK
    p = {k: v[keep] for k, v in p.items()}
    c = p["vector_width"].size
    work = base.take(np.zeros(c, dtype=np.intp))
    elem = op.dtype.bytes
    cols = float(op.shape[-1])
    rows = numel(op.shape) / cols
    row_bytes = cols * elem
    # on chip per block: a register budget of 64 words per thread plus the unit's scratchpad share
    on_chip = p["threads_per_row"] * p["rows_per_block"] * 64 * 4 + min(t.scratchpad_bytes_per_unit, 1e12)
    passes = np.where(row_bytes * p["rows_per_block"] <= on_chip, 1.0, 2.0)
    work.bytes_by_role["activations_in"] = work.bytes_by_role["activations_in"] * passes
    per_thread = np.minimum(p["vector_width"], np.ceil(cols / p["threads_per_row"]))
    work.threads = rows * np.minimum(p["threads_per_row"], np.ceil(cols / p["vector_width"]))
    work.bytes_per_thread = elem * per_thread * 2.0
    work.parallel_items = np.full(c, rows) / p["rows_per_block"]
    footprint = np.minimum(row_bytes * p["rows_per_block"], on_chip)
    return StreamSpace(p, work, footprint)


def stream_space(t: MachineTables, op: Op, base: Work) -> StreamSpace:
    p = _grid(vector_width=(1.0, 2.0, 4.0, 8.0, 16.0), threads_per_block=(128.0, 256.0, 512.0, 1024.0))
    c = p["vector_width"].size
    work = base.take(np.zeros(c, dtype=np.intp))
    if base.threads[0] > 0:
        elements = base.threads[0] * float(getattr(op, "vector_width", 1))
        work.threads = np.ceil(elements / p["vector_width"])
        work.bytes_per_thread = base.dram_bytes[0] / np.maximum(work.threads, 1.0)
    work.parallel_items = np.maximum(work.threads / p["threads_per_block"], 1.0)
    footprint = p["threads_per_block"] * p["vector_width"] * 16.0  # registers holding the vectors
    return StreamSpace(p, work, footprint)


SPACES: dict[str, Callable[..., StreamSpace]] = {
    "transpose": transpose_space,
    "layernorm": row_space, "rmsnorm": row_space, "softmax": row_space, "batchnorm": row_space,
    "elementwise": stream_space, "quantize": stream_space, "dequantize": stream_space,
    "gather": stream_space, "scatter": stream_space, "embedding": stream_space, "reduce": stream_space,
}


def describe(space: StreamSpace, i: int) -> str:
    """'tile 32, pad 1' style."""
    parts = []
    for name, values in space.params.items():
        value = values[i]
        parts.append(f"{name.replace('_', ' ')} {value:g}" if not math.isnan(value) else name)
    return ", ".join(parts)
