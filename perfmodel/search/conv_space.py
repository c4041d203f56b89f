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

Only the tile shapes and the absence of split-K are the library's; the K-step and pipeline depth are the compact
space's for a 128-row tile on the same device (``gemm_space.compact_space``).
"""

from __future__ import annotations

import numpy as np

from perfmodel.machine import MachineTables
from perfmodel.search.gemm_space import GemmCandidates, compact_space

SIMT_CONV_TILE_M = 128  # output pixels (implicit GEMM) or Winograd tiles per CTA
# output channels per CTA, by ``Work.gemm_simt_conv`` code: 1 implicit GEMM, 2 fused Winograd
SIMT_CONV_TILES_N: dict[int, tuple[int, ...]] = {1: (32, 64, 128), 2: (128,), 3: (32, 64, 128)}
# families whose kernels split the reduction (the gradients' ``*_stridedB_splitK_*``): every split of the compact space
SIMT_CONV_SPLIT_FAMILIES = frozenset({3})

_SPACES: dict[tuple[object, ...], GemmCandidates] = {}


def simt_conv_space(t: MachineTables, family: int = 1) -> GemmCandidates:
    """cuDNN's SIMT forward-convolution tiles of a family (``SIMT_CONV_TILES_N``; 128 x BN, no split-K) with the
    compact space's K-step and stages for a 128-row tile."""
    key = (family, t.mma_n, t.mma_m, t.hardware.kind, t.scratchpad_bytes_per_unit)
    if key not in _SPACES:
        base = compact_space(t)
        rows = []
        splits = np.unique(base.split) if family in SIMT_CONV_SPLIT_FAMILIES else np.array([1.0])
        for bn in SIMT_CONV_TILES_N[family]:
            same = np.nonzero((base.bm == SIMT_CONV_TILE_M) & (base.split == 1))[0]
            nearest = same[np.argmin(np.abs(base.bn[same] - bn) + 1e-3 * base.bk_bytes[same])]
            rows += [(float(SIMT_CONV_TILE_M), float(bn), base.bk_bytes[nearest], base.stages[nearest], float(split),
                      base.group[nearest]) for split in splits]
        grid = np.array(rows, dtype=np.float64)
        _SPACES[key] = GemmCandidates(*(grid[:, i] for i in range(grid.shape[1])))
    return _SPACES[key]


__all__ = ["SIMT_CONV_TILES_N", "SIMT_CONV_TILE_M", "simt_conv_space"]
