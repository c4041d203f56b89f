"""Tile and wave model of GEMM-like work (matmul, implicit-GEMM conv, flash attention).

For every op and every candidate (tile M × tile N, split-K), all at once in numpy:

    tiles   = batch · ⌈M/BM⌉ · ⌈N/BN⌉ · split
    waves   = ⌈tiles / (units · resident)⌉            (resident tiles per unit from SMEM use)
    t_tile  = ⌈K/split/BK⌉ · max(2·BM·BN·BK / peak_unit,  (BM+BN)·BK·bytes / reuse_bw_unit)
    t       = ⌈tiles / units⌉ · t_tile + fill latency + split-K reduction

The busiest unit sets the time: a partial last wave costs as much as a full one on the units
that run it (resident tiles share their unit's throughput).

K, M and N are padded to the tile and the tile to the MMA/systolic shape. The reuse level
(L2 on GPUs, DRAM on scratchpad machines) carries A ⌈N/BN⌉ times and B ⌈M/BM⌉ times.
The cheapest candidate per op is kept: a small fixed search; ``perfmodel.search`` widens it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.machine import MachineTables
from perfmodel.ops.base import FloatArray

SPLIT_K = (1.0, 2.0, 4.0, 8.0, 16.0)
GPU_TILES = ((256, 256), (256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64), (32, 64), (64, 32))
PIPELINE_STAGES = 3.0
K_STEP_BYTES = 64.0  # a K slice of 32 fp16 / 16 fp32 / 64 int8 elements per pipeline stage
PARTIAL_BYTES = 4.0  # split-K partial sums are fp32
SYSTOLIC_ROWS = (8, 32, 128, 512, 2048)  # LHS rows streamed per weight tile


def is_systolic(t: MachineTables) -> bool:
    """TPUs and NPUs: weight-stationary systolic arrays (the MXU, Trainium's tensor engine)."""
    return t.hardware.kind in ("tpu", "npu")


@dataclass
class GemmResult:
    time_s: FloatArray  # compute-side time incl. fill, waves and split-K reduction
    reread_bytes: FloatArray  # operand re-reads beyond the first, at the reuse level
    tile_m: FloatArray
    tile_n: FloatArray
    split_k: FloatArray
    waves: FloatArray
    resident: FloatArray
    tiles: FloatArray
    extra_kernels: FloatArray
    busy: FloatArray  # share of the units' DRAM bandwidth the chosen tiling can pull
    dram_s: FloatArray  # DRAM time of the chosen tiling (latency + bytes at its busy share)
    reuse_s: FloatArray  # reuse-level time (0 when the reuse level is DRAM)
    body_s: FloatArray  # the slowest of compute, DRAM and reuse: this GEMM's roofline time


def candidate_tiles(t: MachineTables) -> tuple[FloatArray, FloatArray]:
    """(BM, BN) candidates: CUTLASS-style on GPUs/CPUs; on systolic machines N a multiple of the
    array and M (the rows streamed through it) from 8 up."""
    pairs: tuple[tuple[int, int], ...]
    if not is_systolic(t):
        pairs = GPU_TILES
    else:
        base_n = max(t.mma_n, 8)
        pairs = tuple((bm, base_n * b) for bm in SYSTOLIC_ROWS for b in (1, 2, 4, 8))
    return np.array([p[0] for p in pairs], float), np.array([p[1] for p in pairs], float)


def gemm_time(t: MachineTables, batch: FloatArray, m: FloatArray, n: FloatArray, k: FloatArray,
              elem_bytes: FloatArray, peak: FloatArray, reuse_bw: float, fill_s: float,
              dram_bytes: FloatArray) -> GemmResult:
    """Best candidate per op (arrays of length ops; candidates on a second axis).

    A candidate is judged by its slowest part: compute (with waves), the re-reads at the reuse
    level, and the compulsory DRAM traffic that only ``tiles`` units pull at once.
    """
    d = t.defaults
    tm, tn = candidate_tiles(t)
    split = np.array(SPLIT_K)
    bm = np.repeat(tm, split.size)[None, :]
    bn = np.repeat(tn, split.size)[None, :]
    s = np.tile(split, tm.size)[None, :]
    b, mm, nn, kk = (x[:, None] for x in (batch, m, n, k))
    eb = elem_bytes[:, None]
    bk = np.maximum(np.ceil(K_STEP_BYTES / eb / t.mma_k) * t.mma_k, t.mma_k)
    k_split = np.ceil(kk / s)
    steps = np.ceil(k_split / bk)
    tiles = b * np.ceil(mm / bm) * np.ceil(nn / bn) * s
    stages = PIPELINE_STAGES if t.hardware.kind == "gpu" else 2.0
    footprint = (bm + bn) * bk * eb * stages
    resident = np.clip(np.floor(t.scratchpad_bytes_per_unit / footprint), 1.0, t.max_resident_tiles)
    slots = t.units * resident
    waves = np.ceil(tiles / slots)
    tiles_per_unit = np.ceil(tiles / t.units)  # the busiest unit sets the time
    active_units = np.minimum(tiles, t.units)
    peak_unit = (peak[:, None] * d.matrix_efficiency) / t.units
    reuse_unit = reuse_bw * d.onchip_efficiency / np.maximum(active_units, 1.0)
    step_compute = 2.0 * bm * bn * bk / peak_unit
    step_memory = (bm + bn) * bk * eb / reuse_unit
    if is_systolic(t):
        # weight-stationary: each weight tile costs fill + drain (rows + cols of the array) on
        # top of the BM rows streamed through it (MODELING.md, TPU / systolic arrays)
        step_compute = step_compute * (bm + t.mma_m + t.mma_n) / bm
    t_tile = steps * np.maximum(step_compute, step_memory)
    reduce_bytes = np.where(s > 1, 2.0 * s * b * mm * nn * PARTIAL_BYTES, 0.0)
    t_reduce = reduce_bytes / (reuse_bw * d.onchip_efficiency)
    total = tiles_per_unit * t_tile + fill_s + t_reduce
    reread_bytes = b * eb * (mm * kk * (np.ceil(nn / bn) - 1) + kk * nn * (np.ceil(mm / bm) - 1)) + reduce_bytes
    busy = np.clip(tiles / (t.units * d.blocks_per_unit_for_bandwidth), 1.0 / t.units, 1.0)
    dram_bw = t.bandwidth_bytes_per_s(t.dram) * d.dram_efficiency
    passing = dram_bytes[:, None] + reread_bytes
    if t.llc is None:  # re-reads come from DRAM
        t_dram = fill_s + passing / (dram_bw * busy)
        t_reuse = np.zeros_like(t_dram)
    else:
        t_dram = fill_s + dram_bytes[:, None] / (dram_bw * busy)
        t_reuse = t.latency_s(t.llc) + passing / (reuse_bw * d.onchip_efficiency * busy)
    # judged like the final roofline: slowest part plus the split-K reduction kernel's launch
    body = np.maximum(np.maximum(total, t_dram), t_reuse)
    judged = body + np.where(s > 1, t.kernel_overhead_s, 0.0)
    too_big = footprint > t.scratchpad_bytes_per_unit
    useless_split = (s > 1) & (k_split < bk)
    judged = np.where(too_big | useless_split, np.inf, judged)
    best = np.argmin(judged, axis=1)
    rows = np.arange(batch.size)

    def pick(values: FloatArray) -> FloatArray:
        picked: FloatArray = np.broadcast_to(values, total.shape)[rows, best]
        return picked

    return GemmResult(
        time_s=pick(total), reread_bytes=pick(reread_bytes), tile_m=pick(bm), tile_n=pick(bn),
        split_k=pick(s), waves=pick(waves), resident=pick(resident), tiles=pick(tiles),
        extra_kernels=np.where(pick(s) > 1, 1.0, 0.0), busy=pick(busy),
        dram_s=pick(t_dram), reuse_s=pick(t_reuse), body_s=pick(body),
    )
