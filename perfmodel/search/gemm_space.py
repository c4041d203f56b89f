"""Schedule space of GEMM-like work: the candidates as numpy arrays, one element per schedule.

A GEMM schedule is the CTA / scratchpad tile (BM x BN x BK), the pipeline depth (stages: 1 =
no buffering, 2 = double buffering, ...), split-K, and the raster group (output tile-rows
walked together, the "swizzle" that keeps A panels in L2). Per kind:

- GPU: BM, BN from 16 to 256 (multiples of the MMA shape), BK 16-128 elements, 1-5 stages;
- TPU / NPU (systolic array + scratchpad + DMA): BN a multiple of the array width, BM the rows
  streamed through it (8 to 2048), BK a multiple of the array depth, 1-2 buffers;
- CPU: cache blocking, BM x BN register/L1 blocks and BK panels sized for L2.

``compact_space`` is the small fixed set used by ``predict_many`` (CUTLASS-like tiles); the
search explores ``full_space``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.machine import MachineTables
from perfmodel.ops.base import FloatArray

SPLITS = (1, 2, 4, 8, 16)
GROUPS = (1, 2, 4, 8, 16)
COMPACT_GPU_TILES = ((256, 256), (256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64),
                     (32, 64), (64, 32))
SYSTOLIC_ROWS = (8, 32, 128, 512, 2048)
K_STEP_BYTES = 64.0  # the compact space's BK: 32 fp16 / 16 fp32 / 64 int8 elements per stage
# and its deep-pipeline variant (128 fp16 elements, as many stages as the SMEM holds, up to 5): with few CTAs a
# schedule streams DRAM only as fast as the K-slabs it keeps in flight (gemm_cost: Little's law)
DEEP_K_STEP_BYTES = 256.0


@dataclass(frozen=True)
class GemmCandidates:
    """Schedules as parallel arrays (one element per candidate). BK in bytes per element row:
    ``bk_bytes`` is the K-slice width in bytes (BK elements x element size), so a space is
    valid for every dtype."""

    bm: FloatArray
    bn: FloatArray
    bk_bytes: FloatArray
    stages: FloatArray
    split: FloatArray
    group: FloatArray

    @property
    def size(self) -> int:
        return int(self.bm.size)

    def take(self, index: np.ndarray[Any, np.dtype[np.intp]]) -> GemmCandidates:
        return GemmCandidates(*(getattr(self, f)[index] for f in ("bm", "bn", "bk_bytes", "stages", "split",
                                                                   "group")))


def concat_spaces(*spaces: GemmCandidates) -> GemmCandidates:
    """The candidates of ``spaces`` one after the other (indices of the first unchanged)."""
    return GemmCandidates(*(np.concatenate([getattr(s, f) for s in spaces])
                            for f in ("bm", "bn", "bk_bytes", "stages", "split", "group")))


def _product(bm: tuple[int, ...], bn: tuple[int, ...], bk_bytes: tuple[int, ...], stages: tuple[int, ...],
             splits: tuple[int, ...], groups: tuple[int, ...]) -> GemmCandidates:
    """Every combination, in ``itertools.product`` order (the last axis fastest): a meshgrid, not a list of
    tuples (12,500 H100 candidates in 0.7 ms instead of 12 ms, paid by every `perfmodel predict`)."""
    axes = (np.asarray(a, dtype=np.float64) for a in (bm, bn, bk_bytes, stages, splits, groups))
    return GemmCandidates(*(grid.reshape(-1) for grid in np.meshgrid(*axes, indexing="ij")))


def is_systolic(t: MachineTables) -> bool:
    """TPUs and NPUs: weight-stationary systolic arrays fed by DMA into a scratchpad."""
    return t.hardware.kind in ("tpu", "npu")


_SPACES: dict[tuple[object, ...], GemmCandidates] = {}


def full_space(t: MachineTables) -> GemmCandidates:
    """Every schedule worth considering on this device (thousands of candidates), built once."""
    key = ("full", t.mma_n, t.mma_m, t.hardware.kind)
    if key not in _SPACES:
        _SPACES[key] = _full_space(t)
    return _SPACES[key]


def _full_space(t: MachineTables) -> GemmCandidates:
    if is_systolic(t):
        width = max(t.mma_n, 8)
        return _product((*SYSTOLIC_ROWS, 64, 256, 1024), tuple(width * f for f in (1, 2, 4, 8)),
                        (128, 256, 512, 1024), (1, 2), SPLITS, (1, 4, 16))
    if t.hardware.kind == "cpu":
        return _product((16, 32, 64, 128, 256), (16, 32, 64, 128, 256), (64, 256, 1024), (1, 2), SPLITS,
                        (1, 4))
    sizes = (16, 32, 64, 128, 256)
    return _product(sizes, sizes, (32, 64, 128, 256), (1, 2, 3, 4, 5), SPLITS, GROUPS)


def compact_space(t: MachineTables) -> GemmCandidates:
    """The small fixed set ``predict_many`` uses: a few tiles, split-K, group 8; each tile with a 64-byte K-step in 3
    stages (2 where 3 do not fit the device's shared memory but 2 do) and a 256-byte K-step in as many stages as fit
    (2 to 5), the deep pipeline a few-CTA grid needs to keep DRAM busy."""
    key = ("compact", t.mma_n, t.mma_m, t.hardware.kind, t.scratchpad_bytes_per_unit)
    if key not in _SPACES:
        _SPACES[key] = _compact_space(t)
    return _SPACES[key]


def _compact_space(t: MachineTables) -> GemmCandidates:
    if is_systolic(t):
        width = max(t.mma_n, 8)
        pairs = tuple((bm, width * f) for bm in SYSTOLIC_ROWS for f in (1, 2, 4, 8))
        stages = 2.0
        bk = 256.0
        rows = [(bm, bn, bk, stages, s, 8.0) for (bm, bn) in pairs for s in SPLITS]
    else:
        # a 64 KB LDS (MI300X, T4) holds 128x256 tiles double- but not triple-buffered: without the 2-stage
        # variant the compact set would fall back to 128x128 and predict 25 % slower than the full space
        bk = K_STEP_BYTES
        rows = [(bm, bn, bk, _stages_that_fit(bm, bn, t), s, 8.0) for (bm, bn) in COMPACT_GPU_TILES for s in SPLITS]
        rows += [(bm, bn, DEEP_K_STEP_BYTES, _deep_stages(bm, bn, t), s, 8.0) for (bm, bn) in COMPACT_GPU_TILES
                 for s in SPLITS if _deep_stages(bm, bn, t) >= 2.0]
    grid = np.array(rows, dtype=np.float64)
    return GemmCandidates(*(grid[:, i].copy() for i in range(6)))


def _deep_stages(bm: float, bn: float, t: MachineTables) -> float:
    """As many stages of a ``DEEP_K_STEP_BYTES`` K-slice as fit the shared memory, at most 5 (0 where 2 do not)."""
    fit = float(t.scratchpad_bytes_per_unit // ((bm + bn) * DEEP_K_STEP_BYTES))
    return min(fit, 5.0) if fit >= 2.0 else 0.0


def _stages_that_fit(bm: float, bn: float, t: MachineTables) -> float:
    """3 stages of a ``K_STEP_BYTES`` K-slice, or 2 where only 2 fit the shared memory (bytes per unit)."""
    operands = (bm + bn) * K_STEP_BYTES
    return 2.0 if 3.0 * operands > t.scratchpad_bytes_per_unit >= 2.0 * operands else 3.0
