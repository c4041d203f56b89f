"""FlashAttention-2's own tiles: the (Q tile, KV tile, warps) its launch templates pick per head dim and device.

FlashAttention-2 is not autotuned: ``run_mha_fwd_hdim*`` / ``run_mha_bwd_hdim*`` (Dao-AILab/flash-attention,
``csrc/flash_attn/src/flash_fwd_launch_template.h`` and ``flash_bwd_launch_template.h``) hard-code one
``Flash_fwd_kernel_traits<Headdim, kBlockM, kBlockN, kNWarps>`` / ``Flash_bwd_kernel_traits<Headdim, kBlockM, kBlockN,
kNWarps, ...>`` per head dim (rounded up: 32, 64, 96, 128, 192, 256), chosen by the device's compute capability
(sm86 / sm89 against sm80 / sm90) or its shared memory per block and per SM. kBlockM is the Q tile (rows), kBlockN
the KV tile (keys). No dropout (the published benchmarks run without).

Forward (4 warps unless stated):
    d ≤ 64: 128 x 128;  d ≤ 96: 128 x 64 (sm8x causal 64 x 64);  d ≤ 128: 128 x 64 (sm8x: causal 64 x 64, else
    128 x 32);  d ≤ 192: 128 x 64, 8 warps;  d ≤ 256: 128 x 64, 8 warps where SMEM per block ≥ 2·256·(128 + 2·64) B
    and per SM < 4·256·(64 + 2·64) B (A100), else 64 x 64 (H100: two CTAs per SM; sm8x);
    split-KV (``run_mha_fwd_splitkv_dispatch``, flash-decoding): 64 x (256 for d ≤ 64, 128 for d ≤ 128, else 64).
Backward (8 warps):
    d ≤ 32: 128 x 128;  d ≤ 64: 128 x 128 with ≥ 144 KB SMEM per block, else 64 x 128;  d ≤ 96: 64 x 128;
    d ≤ 128: 64 x 128 with ≥ 144 KB, else 64 x 64;  d ≤ 192: 64 x 64;  d ≤ 256: 64 x 64 with ≥ 144 KB, else 64 x 32.

sm8x (compute capability 8.6 / 8.9: A40, A10, L4, L40, RTX 30/40) is told apart by its 100 KB of shared memory per
SM (CUDA C++ Programming Guide, 'Compute Capabilities', technical specifications: 164 KB on 8.0, 228 KB on 9.0,
100 KB on 8.6 and 8.9); the opt-in maximum per block is 1 KB less (the same table: 163 / 227 / 99 KB).

``LIBRARY_TILES``: restrict the FA2-style (mma.sync) attention search to these tiles. Off by default: findings only
(docs/accuracy.md, fourteenth pass fa15).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.ops.base import FloatArray

LIBRARY_TILES = False
# experiment (off): FA2's forward softmax partly under other resident CTAs' MMAs, at FA3's exposed share
FORWARD_OVERLAP = False
# experiment (off): the share of an asynchronous-MMA device's (wgmma, tcgen05) matrix peak that its mma.sync issues
# (FlashAttention-2 on Hopper); None: the full peak. 0.5 would be the Ampere SM's dense rate over Hopper's
# (2048 / 4096 FP16 FLOP/clk/SM, A100 and H100 whitepapers), a reading no public figure confirms
MMA_SYNC_SHARE: float | None = None

KB = 1024.0
SM8X_SMEM_PER_SM = 100.0 * KB  # compute capability 8.6 / 8.9 (CUDA C++ Programming Guide, technical specifications)
RESERVED_PER_BLOCK = 1.0 * KB  # shared memory the system reserves per block: opt-in max per block = per SM - 1 KB
BWD_LARGE_SMEM = 144.0 * KB  # flash_bwd_launch_template.h: ``max_smem_per_block >= 144 * 1024`` (A100, H100)


def _bucket(d: FloatArray) -> FloatArray:
    """The head dim FA2 compiles for: 32, 64, 96, 128, 192 or 256 (160 runs as 192, flash_api.cpp's switch)."""
    buckets = np.array([32.0, 64.0, 96.0, 128.0, 192.0, 256.0])
    idx = np.clip(np.searchsorted(buckets, d, side="left"), 0, buckets.size - 1)
    out: FloatArray = buckets[idx]
    return out


def forward_tiles(d: FloatArray, causal: FloatArray, smem_per_sm: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(Q tile rows, KV tile keys, warps) of FA2's forward kernel per op (``run_mha_fwd_hdim*``)."""
    hd = _bucket(np.asarray(d, dtype=float))
    c = np.asarray(causal, dtype=float) > 0
    sm8x = smem_per_sm <= SM8X_SMEM_PER_SM
    per_block = smem_per_sm - RESERVED_PER_BLOCK
    big256 = per_block >= 2 * 256 * (128 + 2 * 64) and smem_per_sm < 4 * 256 * (64 + 2 * 64)
    bq = np.where(hd <= 64, 128.0, np.where(hd <= 128, np.where(sm8x & c, 64.0, 128.0),
                                            np.where(hd <= 192, 128.0, 128.0 if big256 else 64.0)))
    bkv = np.where(hd <= 64, 128.0, np.where(hd <= 96, 64.0, np.where(
        hd <= 128, np.where(sm8x, np.where(c, 64.0, 32.0), 64.0), 64.0)))
    warps = np.where((hd > 128) & (bq == 128.0), 8.0, 4.0)
    return bq, bkv, warps


def splitkv_tiles(d: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(Q tile, KV tile) of the split-KV forward (``run_mha_fwd_splitkv_dispatch``: kBlockM 64)."""
    hd = _bucket(np.asarray(d, dtype=float))
    return np.full_like(hd, 64.0), np.where(hd <= 64, 256.0, np.where(hd <= 128, 128.0, 64.0))


def backward_tiles(d: FloatArray, smem_per_sm: float) -> tuple[FloatArray, FloatArray]:
    """(Q tile rows, KV tile keys) of FA2's backward kernel per op (``run_mha_bwd_hdim*``, 8 warps)."""
    hd = _bucket(np.asarray(d, dtype=float))
    large = smem_per_sm - RESERVED_PER_BLOCK >= BWD_LARGE_SMEM
    bq = np.where(hd <= 32, 128.0, np.where(hd <= 64, 128.0 if large else 64.0, 64.0))
    bkv = np.where(hd <= 96, 128.0, np.where(hd <= 128, 128.0 if large else 64.0,
                                            np.where(hd <= 192, 64.0, 64.0 if large else 32.0)))
    return bq, bkv


def allowed(d: FloatArray, causal: FloatArray, backward: FloatArray, smem_per_sm: float, bq: FloatArray,
            bkv: FloatArray, split: FloatArray) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Ops x candidates: True where the candidate is the tile FA2 launches for that op (rows: ``d``, ``causal``,
    ``backward`` as n x 1 columns; candidates ``bq``, ``bkv``, ``split`` as 1 x c rows)."""
    fq, fk, _ = forward_tiles(d, causal, smem_per_sm)
    sq, sk = splitkv_tiles(d)
    bq_b, bk_b = backward_tiles(d, smem_per_sm)
    want_q = np.where(backward > 0, bq_b, np.where(split > 1, sq, fq))
    want_k = np.where(backward > 0, bk_b, np.where(split > 1, sk, fk))
    ok: np.ndarray[Any, np.dtype[np.bool_]] = (bq == want_q) & (bkv == want_k) & ((backward <= 0) | (split <= 1))
    return ok


def forward_warps(d: FloatArray, causal: FloatArray, smem_per_sm: float) -> FloatArray:
    """Warps of FA2's forward CTA (4, or 8 for head dims above 128 at 128-row tiles)."""
    return forward_tiles(d, causal, smem_per_sm)[2]


def mma_sync_engines(engines: list[dict[str, Any]]) -> None:
    """Set an asynchronous-MMA spec's matrix engines (as dicts) to warp scope (mma.sync), their peaks scaled by
    ``MMA_SYNC_SHARE`` where set (in place)."""
    for engine in engines:
        if engine.get("mma_scope"):
            if engine["mma_scope"] in ("warpgroup", "cta") and MMA_SYNC_SHARE is not None:
                engine["peak_flops_per_s"] = {k: v * MMA_SYNC_SHARE for k, v in engine["peak_flops_per_s"].items()}
            engine["mma_scope"] = "warp"


def set_switches(library_tiles: bool = False, forward_overlap: bool = False,
                 mma_sync_share: float | None = None) -> None:
    """Set the three experiments (benchmarks' ``--fa2-library-tiles``, ``--fa2-forward-overlap``,
    ``--mma-sync-share``) and forget memoised attention calls made under the old ones."""
    global LIBRARY_TILES, FORWARD_OVERLAP, MMA_SYNC_SHARE
    LIBRARY_TILES, FORWARD_OVERLAP, MMA_SYNC_SHARE = library_tiles, forward_overlap, mma_sync_share
    from perfmodel.search import call_memo

    call_memo.clear()


def add_switch_arguments(parser: Any) -> None:
    """The experiments' flags on an ``argparse.ArgumentParser`` (all off by default)."""
    parser.add_argument("--fa2-library-tiles", action="store_true",
                        help="experiment: FA2 (mma.sync) attention at FlashAttention-2's own tiles (fa2_tiles.py)")
    parser.add_argument("--fa2-forward-overlap", action="store_true",
                        help="experiment: FA2's forward softmax partly under other CTAs' MMAs (FA3's exposed share)")
    parser.add_argument("--mma-sync-share", type=float, default=None, metavar="SHARE",
                        help="experiment: mma.sync's share of a wgmma / tcgen05 device's matrix peak (no cited figure)")


def apply_switch_arguments(args: Any) -> None:
    """Set the experiments from parsed ``add_switch_arguments`` flags."""
    set_switches(args.fa2_library_tiles, args.fa2_forward_overlap, args.mma_sync_share)
