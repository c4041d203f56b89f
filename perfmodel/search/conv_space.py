"""The tiles of cuDNN's SIMT implicit-GEMM convolutions (fp32 and pseudo-half math off tensor cores).

cuDNN's forward implicit GEMMs that run on the CUDA cores are a fixed family of kernels named by their CTA tile,
``maxwell_scudnn_128x128_relu_*``, ``*_128x64_*`` and ``*_128x32_*`` (``volta_scudnn_*`` on Volta and Turing): 128
output pixels (rows of M = N·P·Q) by 32, 64 or 128 output channels, the whole reduction C·R·S in one CTA. The
forward family has no split-K (only the ``*_stridedB_splitK_*`` gradient kernels split), so a convolution with
few output tiles (small N·P·Q x K, a deep C·R·S: ResNet's 7x7 and 14x14 layers) leaves SMs idle that the free GEMM
search would fill with 32x64 tiles split 4-16 ways. Kernel names from nvprof profiles in
pytorch/pytorch#13412 (``maxwell_scudnn_128x64_relu_medium_nn``, on a V100) and apache/mxnet#14684
(``volta_scudnn_128x128_stridedB_interior_nn_v1``, ``volta_scudnn_128x128_stridedB_splitK_interior_nn_v1``).
The fused Winograd F(2x2, 3x3) is one tile only, ``maxwell_scudnn_winograd_128x128_ldg1_ldg4_relu_tile418n_nt``
(nvprof, kblomdahl/dream-go#25): 128 transformed tiles by 128 output channels per CTA in each of its 16 GEMMs.

On the tensor cores the forward runs cuDNN 7's own menu too (family 5, ``TENSOR_FORWARD``): 256x128, 256x64 and
128x128 unsplit (``volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_*``, ``*_256x64_ldg8_relu_*``, Turing's
``*_s1688cudnn_fp16_256x128_*`` / ``*_256x64_sliced1x2_*``: pytorch/pytorch#54324) and the 128x128 ``*_splitK_*``
kernel at every split; the data gradient 128x128 / 256x128 unsplit (family 4).

Only the tile shapes and the absence of split-K are the library's; the K-step and pipeline depth are the compact
space's for a 128-row tile on the same device (``gemm_space.compact_space``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from perfmodel.machine import MachineTables
from perfmodel.ops.base import FloatArray
from perfmodel.search.gemm_cost import GemmChoice
from perfmodel.search.gemm_space import GemmCandidates, compact_space

SIMT_CONV_TILE_M = 128  # output pixels (implicit GEMM) or Winograd tiles per CTA
# ``Work.gemm_simt_conv`` codes, per GEMM slot: which of cuDNN's kernels runs it (0: a GEMM the free search schedules)
FORWARD, FUSED_WINOGRAD, DATA_GRADIENT, WEIGHT_GRADIENT = 1, 2, 3, 4
# kernel families: (CTA tiles (rows x columns), whether the family splits the reduction)
FAMILY_TILES: dict[int, tuple[tuple[tuple[int, int], ...], bool]] = {
    1: (((128, 32), (128, 64), (128, 128)), False),  # SIMT forward implicit GEMM: *_scudnn_128x{32,64,128}_*
    2: (((128, 128),), False),  # SIMT fused Winograd: *_scudnn_winograd_128x128_*
    3: (((128, 32), (128, 64), (128, 128)), True),  # SIMT gradients: *_scudnn_128x128_stridedB_splitK_*
    4: (((128, 128), (256, 128)), False),  # tensor-core data gradient (s884cudnn 128x128, 256x128), no split-K
    # tensor-core forward implicit GEMM (cuDNN 7): *_s884cudnn_fp16_256x128_ldg8_relu_*, *_256x64_ldg8_relu_* (Volta),
    # *_s1688cudnn_fp16_256x128_* and *_256x64_sliced1x2_* (Turing), no split-K; plus the 128x128 *_splitK_* kernel
    # (FAMILY_SPLIT_TILES)
    5: (((256, 128), (256, 64), (128, 128)), False),
    # MIOpen 1.x's direct 1x1 forward, ConvOclDirectFwd1x1 "version 1" (MIOpenConv1x1J1.cl): a 64-work-item
    # work-group of 64 output pixels (of N·P·Q) x 32 output maps (MIOPEN_DIRECT_1X1)
    6: (((64, 32),), False),
}
# tiles of a family that also run split-K (every split of the compact space) beside its unsplit ones
FAMILY_SPLIT_TILES: dict[int, tuple[tuple[int, int], ...]] = {5: ((128, 128),)}
SIMT_CONV_TILES_N: dict[int, tuple[int, ...]] = {f: tuple(bn for _, bn in tiles) for f, (tiles, _) in
                                                 FAMILY_TILES.items()}
# code -> family, off the tensor cores (SIMT) and on them (NVIDIA tensor cores): 0 = the free search
SIMT_FAMILY = {FORWARD: 1, FUSED_WINOGRAD: 2, DATA_GRADIENT: 3, WEIGHT_GRADIENT: 3}
TENSOR_FAMILY = {DATA_GRADIENT: 4}
# the tensor-core forward on cuDNN's own tiles (family 5) instead of the free search: "all" (shipped: the unsplit
# tiles and the split 128x128; one device out conv2d 21.0 -> 19.9 %, docs/accuracy.md, convfill21), "unsplit" (the
# unsplit tiles only), "none" (the free search)
TENSOR_FORWARD = "all"
# ... on the tensor cores cuDNN 7's menu was seen on: Volta's HMMA (mma.m8n8k4, the ``s884`` kernels) and Turing's
# (mma.m16n8k8, ``s1688``); Ampere and later (m16n8k16 and wider) run cuDNN 8's ``sm80_xmma`` kernels, whose other
# tile menu (down to 64x32) is not this one, so their forward keeps the free search
CUDNN7_MMA_K_MAX = 8
# MIOpen's direct 1x1 forward (``algorithm='direct'``, 1x1 filter) on its own work-group tile (family 6) instead of
# the free search, its input channels split in groups of ``MIOPEN_1X1_IN_MAPS`` whose partial sums the work-groups
# add atomically (ConvOclDirectFwd1x1 with the legacy default n_in_data_tiles = 128, n_out_pix_tiles = 32, ROCm/MIOpen
# src/kernels/MIOpenConv1x1J1.cl; docs/model.md section 5). Off: findings only (docs/accuracy.md, fifteenth pass, mio22)
MIOPEN_DIRECT_1X1 = False
MIOPEN_1X1 = 5  # ``Work.gemm_simt_conv`` code of that forward's GEMM slot
MIOPEN_1X1_IN_MAPS = 128  # input channels per work-group (N_LCL_IN_MAPS) where C is larger

# A tensor-core implicit-GEMM convolution (NHWC) steps through its reduction one filter tap and one interval of
# channels at a time, 64 bytes of them (32 fp16 values: CUTLASS's conv2d fprop iterators advance (r, s, c) -> (0, 0,
# c + 32) after the last tap, and assume C a multiple of 32; NVIDIA/cutlass media/docs/implicit_gemm_convolution.md):
# a tap with fewer channels runs the whole interval's MMAs on zeros, loaded as zero-fill, not read (docs/model.md
# section 1): the padded reduction sets the MMA time, the real one the bytes
CHANNEL_INTERVAL_BYTES = 64.0


def channel_intervals(k: FloatArray, channels: FloatArray, elem: FloatArray, tensor: np.ndarray[Any, Any]
                       ) -> FloatArray:
    """The reduction a tensor-core implicit GEMM runs: taps x channels rounded up to whole channel intervals per
    tap, where ``tensor`` and the slot has ``channels`` (> 0) per tap; ``k`` elsewhere."""
    interval = CHANNEL_INTERVAL_BYTES / elem
    padded = k / np.maximum(channels, 1.0) * np.ceil(channels / interval) * interval
    out: FloatArray = np.where(tensor & (channels > 0), np.maximum(padded, k), k)
    return out


# A fixed-tile library kernel's unit reaches its sustained rate only with ``UNIT_CONCURRENCY`` of its CTAs resident
# at once: one CTA alone stalls at every K-step's barrier and shared-memory refill, which a second CTA's math covers
# (docs/model.md section 1, "A partly filled machine"). The busiest unit with j = ceil(tiles / units) < that many
# CTAs runs its tiles in the time of that many: compute = fill + t_tile · max(j, min(UNIT_CONCURRENCY, resident)).
# 1.0: off (each tile at the unit's full rate, time ∝ j: the shipped model)
UNIT_CONCURRENCY = 1.0
CONCURRENCY_FAMILIES = (1, 2)  # the forward families (SIMT implicit GEMM, fused Winograd): no split-K partials

_SPACES: dict[tuple[object, ...], GemmCandidates] = {}


def unit_concurrency(t: MachineTables, choice: GemmChoice, family: int) -> GemmChoice:
    """``choice`` (a fixed family's schedules) with its compute time stretched where the busiest unit holds fewer
    than ``UNIT_CONCURRENCY`` CTAs (its resident limit at most); unchanged when off or for another family."""
    if UNIT_CONCURRENCY <= 1.0 or family not in CONCURRENCY_FAMILIES:
        return choice
    units = float(t.gemm_units or t.units)
    per_unit = np.maximum(np.ceil(choice.tiles / units), 1.0)
    fill = t.latency_s(t.dram)
    t_tile = np.maximum(choice.compute_s - fill, 0.0) / per_unit
    wanted = np.minimum(UNIT_CONCURRENCY, choice.resident)
    compute = choice.compute_s + t_tile * np.maximum(wanted - per_unit, 0.0)
    body = np.maximum(choice.body_s, compute)
    return dataclasses.replace(choice, compute_s=compute, body_s=body)


def family_of(codes: np.ndarray, simt: np.ndarray, tensor: np.ndarray, mma_k: int = CUDNN7_MMA_K_MAX
              ) -> np.ndarray:
    """The kernel family of each GEMM slot (0: the free search) from its ``Work.gemm_simt_conv`` code, by whether it
    runs on an NVIDIA GPU's CUDA cores (``simt``) or its tensor cores (``tensor``); the tensor-core forward takes
    cuDNN 7's menu only on a device whose MMA reduces ``mma_k`` <= ``CUDNN7_MMA_K_MAX`` per instruction."""
    out = np.zeros(codes.shape, dtype=np.float64)
    for code, family in SIMT_FAMILY.items():
        out = np.where(simt & (codes == code), float(family), out)
    cudnn7 = TENSOR_FORWARD != "none" and mma_k <= CUDNN7_MMA_K_MAX
    tensor_family = {**TENSOR_FAMILY, FORWARD: 5} if cudnn7 else TENSOR_FAMILY
    for code, family in tensor_family.items():
        out = np.where(tensor & (codes == code), float(family), out)
    if MIOPEN_DIRECT_1X1:  # only MIOpen's direct forward carries the code, on any device
        out = np.where(codes == MIOPEN_1X1, 6.0, out)
    return out


def simt_conv_space(t: MachineTables, family: int = 1) -> GemmCandidates:
    """cuDNN's convolution tiles of a family (``FAMILY_TILES``: no split-K, or every split of the compact space)
    with the compact space's K-step and stages for a tile of that many rows."""
    key = (family, t.mma_n, t.mma_m, t.hardware.kind, t.scratchpad_bytes_per_unit, TENSOR_FORWARD)
    if key not in _SPACES:
        base = compact_space(t)
        tiles, splits_k = FAMILY_TILES[family]
        splits = np.unique(base.split) if splits_k else np.array([1.0])
        rows = []
        split_tiles = FAMILY_SPLIT_TILES.get(family, ()) if TENSOR_FORWARD == "all" else ()
        # the family's tiles at its splits, then its split-K kernels' tiles at every split but 1
        menu = [(tile, splits) for tile in tiles] + [(tile, np.unique(base.split)[1:]) for tile in split_tiles]
        for (bm, bn), own in menu:
            same = np.nonzero((base.bm == bm) & (base.split == 1))[0]
            nearest = same[np.argmin(np.abs(base.bn[same] - bn) + 1e-3 * base.bk_bytes[same])]
            rows += [(float(bm), float(bn), base.bk_bytes[nearest], base.stages[nearest], float(split),
                      base.group[nearest]) for split in own]
        grid = np.array(rows, dtype=np.float64)
        _SPACES[key] = GemmCandidates(*(grid[:, i] for i in range(grid.shape[1])))
    return _SPACES[key]


__all__ = ["CHANNEL_INTERVAL_BYTES", "CUDNN7_MMA_K_MAX", "DATA_GRADIENT", "FAMILY_TILES", "FORWARD", "FUSED_WINOGRAD",
           "MIOPEN_1X1", "MIOPEN_1X1_IN_MAPS",
           "SIMT_CONV_TILES_N", "SIMT_CONV_TILE_M", "WEIGHT_GRADIENT", "channel_intervals", "family_of",
           "simt_conv_space", "unit_concurrency"]
