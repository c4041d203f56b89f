"""Flash-attention schedules: Q-tile x KV-tile x stages, costed for many ops at once.

One CTA per (batch, head, Q-tile of BQ rows) walks the KV tiles of BKV keys: S = Q Kᵀ
(BQ x BKV x d), online softmax (BQ·BKV exponentials on the special-function units), O += P V
(BQ x BKV x dv). Per KV tile:

    softmax = BQ·BKV / sfu_unit + (3.5·BQ·BKV + BQ·dv) / fp32_ops_unit  (exp on MUFU; scale/max/sum/cvt, O rescale)
    FA3 (asynchronous MMA: Hopper wgmma, Blackwell tcgen05; warp-specialised, ping-pong softmax); on Hopper at the
    datasheet rates, with the share of the softmax the ping-pong leaves exposed (0.675, FA3 paper's 570 / 661):
        t_pair = max(2·BQ·BKV·(d + dv) / peak_unit + 0.675·softmax, BKV·(d + dv)·e / L2_bw_unit)
    (Blackwell, no cited overlap figure: max(2·BQ·BKV·(d + dv) / peak_unit, softmax, BKV·(d + dv)·e / L2_bw_unit))
    FA2 (synchronous mma.sync: the same warps wait for S, exponentiate, then issue P·V):
        t_pair = max(2·BQ·BKV·(d + dv) / peak_unit + softmax, BKV·(d + dv)·e / L2_bw_unit)
    fp32_ops_unit = fp32 FLOP peak / 2 per SM (one instruction per CUDA core per clock; the peak counts FMAs twice)
    pipelined over the stages against the L2 latency (docs/model.md, 'Flash attention: FA2 vs FA3'); each CTA
    adds a pipeline fill of (DRAM latency + BQ·d·e / DRAM_bw_unit + one KV tile's L2 load + under FA3 one
    unhidden softmax) / resident CTAs; the backward adds its preprocess and postprocess kernels (D = rowsum(dO∘O),
    zeroing and converting the fp32 dQ accumulator), DRAM-bound and serial
    pairs  = Q-tiles x ⌈skv / BKV⌉, or with a causal mask only the KV tiles left of the diagonal
             (bottom-right aligned; the diagonal tile is computed whole)
    time   = ⌈CTAs / units⌉ · ⌈skv/BKV⌉ · t_pair        (causal: max(pairs / units, ⌈skv/BKV⌉) · t_pair)

GQA packs the h / kv_heads query heads of a KV head into one Q tile (BQ / group tokens each), so
K and V are loaded once per KV head and Q tile; split-KV (flash-decoding) spreads a Q tile's KV
range over several CTAs and pays an fp32 combine. K and V come from DRAM once when the heads in
flight keep them in half the LLC; else once per wave of a head's Q tiles: the CTAs in flight are
consecutive Q tiles of one head (the grid's fastest index, or FA3's L2-swizzled scheduler) that start
together and walk its KV tiles in step, sharing each as it streams. SMEM holds the Q tile and
``stages`` KV tiles; registers hold S (BQ x BKV) and O (BQ x dv) in fp32.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.machine import MachineTables
from perfmodel.ops.base import FloatArray
from perfmodel.ops.work import DTYPE_INDEX
from perfmodel.search import call_memo, fa2_tiles
from perfmodel.search.gemm_cost import pipelined_step, tie_break

# fp32 instructions per score besides the exp (docs/model.md, 'Flash attention: FA2 vs FA3'); each is one result per
# CUDA core per clock, half the FMA-counted FLOP peak (CUDA C++ Programming Guide, 'Arithmetic Instructions': 128
# results/clk/SM for fp32 add, multiply, multiply-add on cc 8.0 and 9.0; a multiply-add is 2 of the peak's FLOPs).
# Forward: scale and subtract the running max (one FFMA feeding exp2), row max, row sum, and half a conversion
# (cvt packs two fp32 P values to fp16/bf16 for P·V); plus the O rescale by exp(m_old − m_new), BQ·dv per KV tile.
# Backward: scale and subtract the LSE, dP − D, P·(dP − D), and the P and dS conversions (half each).
SOFTMAX_FORWARD_OPS = 3.5
SOFTMAX_BACKWARD_OPS = 4.0
LSE_BYTES = 4.0  # fp32 per query row


def overlaps_softmax(t: MachineTables) -> bool:
    """FA3-style kernels (softmax of one warpgroup under the other's MMAs) need an asynchronous matrix
    instruction: wgmma (``mma_scope: warpgroup``, Hopper) or tcgen05 (``cta``, Blackwell). With mma.sync
    (``warp``: Volta to Ada) the issuing warps wait on S, so FlashAttention-2 runs MMA and softmax in turn."""
    return any(e.mma_scope in ("warpgroup", "cta") for e in t.hardware.engines_of("matrix"))


# FA3's ping-pong (two consumer warpgroups, one's softmax under the other's GEMMs) and its intra-warpgroup pipelining
# hide only part of the softmax. Shah et al. 2024 (arXiv:2407.08608), forward, head dim 128, ~8K tokens: §3.1 "from
# 570 TFLOPS to 620-640 TFLOPS" with the ping-pong; §4.2 / Table 2 ({4, 8448, 16, 128}): 570 without warp
# specialization (no consumer warpgroups to ping-pong), 582 with it alone, 661 with it and the 2-stage pipelining.
# Reading 570 as MMA and softmax in turn (the model's own softmax count gives it back: 562) and the tensor pipe at
# its peak P = 989.4 TFLOP/s, the exposed share of the softmax is (1/661 - 1/P) / (1/570 - 1/P) = 0.675
# (docs/model.md, 'Flash attention: FA2 vs FA3').
FA3_PEAK_TFLOPS, FA3_NO_OVERLAP_TFLOPS, FA3_OVERLAP_TFLOPS = 989.4, 570.0, 661.0
SOFTMAX_EXPOSED = (1.0 / FA3_OVERLAP_TFLOPS - 1.0 / FA3_PEAK_TFLOPS) / (1.0 / FA3_NO_OVERLAP_TFLOPS
                                                                       - 1.0 / FA3_PEAK_TFLOPS)


def measured_pingpong(t: MachineTables) -> bool:
    """The FA3 figures behind ``SOFTMAX_EXPOSED`` are Hopper's (wgmma, ``mma_scope: warpgroup``). Blackwell's
    tcgen05 kernels (``cta``) pipeline differently (MMA results in tensor memory, separate softmax and correction
    warpgroups) and no figure for their overlap is cited here: they keep the full overlap, max(t_mma, t_softmax)."""
    return any(e.mma_scope == "warpgroup" for e in t.hardware.engines_of("matrix"))


def pingpong_step(mma_peak: FloatArray, softmax_peak: FloatArray) -> FloatArray:
    """One (Q tile, KV tile) pair of an asynchronous-MMA (FA3-style) kernel: the MMAs at the tensor pipe's datasheet
    rate (or the SMEM operand reads, whichever binds) plus the share of the softmax, at the datasheet MUFU and fp32
    rates, that the ping-pong and intra-warpgroup pipelining leave exposed (``SOFTMAX_EXPOSED``)."""
    result: FloatArray = mma_peak + SOFTMAX_EXPOSED * softmax_peak
    return result


def softmax_seconds(t: MachineTables, bq: FloatArray, bkv: FloatArray, dv: FloatArray, fp32_flops_per_s: FloatArray,
                    backward: bool = False, efficiency: float | None = None) -> FloatArray:
    """Softmax time of one (Q tile, KV tile) pair on one SM: the exps on the special-function units plus the fp32
    instructions at one per CUDA core per clock (``fp32_flops_per_s`` is the FMA-counted FLOP peak, twice that rate).
    Forward: SOFTMAX_FORWARD_OPS per score and the O rescale, BQ·dv per KV tile; backward: SOFTMAX_BACKWARD_OPS per
    score. The same warps issue both, so they add. ``efficiency``: the share of the datasheet rates reached (default
    the vector efficiency; the asynchronous-MMA kernels' tile loop runs at the datasheet rates, ``pingpong_step``)."""
    units = float(t.units)
    eff = t.defaults.vector_efficiency if efficiency is None else efficiency
    sfu = bq * bkv / (t.special_peak * eff / units)
    ops_per_s = fp32_flops_per_s / 2.0 * eff / units
    ops = SOFTMAX_BACKWARD_OPS * bq * bkv if backward else SOFTMAX_FORWARD_OPS * bq * bkv + bq * dv
    result: FloatArray = sfu + ops / ops_per_s
    return result


def backward_side_kernels_seconds(t: MachineTables, bh: FloatArray, sq: FloatArray, d: FloatArray, dv: FloatArray,
                                  elem: FloatArray) -> FloatArray:
    """FlashAttention-2/-3 run the backward as three kernels (Dao-AILab/flash-attention: hopper/
    flash_bwd_preprocess_kernel.h and flash_bwd_postprocess_kernel.h; csrc/flash_attn's dot_do_o and convert_dQ).
    Before the main kernel, D = rowsum(dO∘O) reads O and dO, reads the LSE and writes D and the LSE in log2 (fp32),
    and zeroes the fp32 dQ accumulator; after it, the accumulator is read and dQ written in the operand type. Both
    stream DRAM, each behind a DRAM latency, and neither overlaps the main kernel."""
    rows = bh * sq
    pre = rows * (2.0 * dv * elem + 3.0 * LSE_BYTES + d * 4.0)
    post = rows * d * (4.0 + elem)
    dram_bw = t.bandwidth_bytes_per_s(t.dram) * t.defaults.dram_efficiency
    result: FloatArray = 2.0 * t.latency_s(t.dram) + (pre + post) / dram_bw
    return result


def gqa_dkv_seconds(t: MachineTables, bh: FloatArray, skv: FloatArray, bkv: FloatArray, d: FloatArray,
                    dv: FloatArray, elem: FloatArray, group: FloatArray | float, overlap: bool,
                    reuse_bw_unit: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The GQA backward's dK/dV reduction over the ``group`` query heads that share a KV head (0 without GQA):
    (each CTA's epilogue seconds, its on-chip bytes, the serial side kernels' seconds).

    FA3 (asynchronous MMA; Dao-AILab/flash-attention, hopper/epilogue_bwd.hpp, ``CollectiveEpilogueBwdGQA`` with
    ``SM90_TMA_REDUCE_ADD``): each (query head, KV tile) CTA reduce-adds its fp32 dK and dV tile into a per-KV-head
    fp32 accumulator through the L2 (read and written, as the dQ atomics), at the CTA's share of the L2 bandwidth;
    the accumulators are zeroed before and converted to the operand type after (DRAM, serial).
    FA2 (csrc/flash_attn/flash_api.cpp, mha_bwd): the kernel writes each query head's dK and dV (``dk_expanded``,
    the operand type) and a sum over the group reads them and writes the KV head's (DRAM, serial)."""
    g = np.asarray(group, dtype=float)
    gqa = g > 1.0
    kv_rows = bh / np.maximum(g, 1.0) * skv  # KV-head rows of dK / dV
    dram_bw = t.bandwidth_bytes_per_s(t.dram) * t.defaults.dram_efficiency
    if overlap:
        tile_bytes = 2.0 * bkv * (d + dv) * DQ_ACCUM_BYTES
        epilogue = np.where(gqa, tile_bytes / reuse_bw_unit, 0.0)
        side_bytes = kv_rows * (d + dv) * (2.0 * DQ_ACCUM_BYTES + elem)  # zero, then read fp32 and write
        return epilogue, np.where(gqa, tile_bytes, 0.0), np.where(gqa, 2.0 * t.latency_s(t.dram)
                                                                  + side_bytes / dram_bw, 0.0)
    extra = (bh * skv - kv_rows) * (d + dv) * elem + bh * skv * (d + dv) * elem  # expanded write beyond, sum's read
    zero = np.zeros(np.broadcast_shapes(np.shape(bkv), np.shape(bh)))
    return zero, zero, np.where(gqa, t.latency_s(t.dram) + extra / dram_bw, 0.0)


# FlashAttention-2 warp layouts under mma.sync (``mma_scope: warp``). Forward: "we split Q across 4 warps while keeping
# K and V accessible by all warps" (Dao 2023, FA2 paper §3.3), so each of the 4 warps reads the whole K and V tile
# from SMEM and P stays in its registers. Backward: 8 warps as a 2 x 4 grid on every MMA (Dao-AILab/flash-attention,
# csrc/flash_attn/src/flash_bwd_launch_template.h, hdim >= 64: Flash_bwd_kernel_traits<.., 8 warps, AtomLayoutMSdP 2,
# AtomLayoutNdKV 4, AtomLayoutMdQ 2>).
FA2_FORWARD_WARPS = 4.0
FA2_BACKWARD_GRID = (2.0, 4.0)  # warps along the Q tile's rows (M of S, dP, dQ), along the KV tile / head dim
DQ_ACCUM_BYTES = 4.0  # fp32 dQ accumulator


def _mma_smem_elements(t: MachineTables, m: FloatArray, n: FloatArray, k: FloatArray, a_in_smem: bool = True,
                       grid: tuple[FloatArray | float, FloatArray | float] | None = None) -> FloatArray:
    """SMEM elements one M x N x K MMA reads: a warp grid (wm, wn) reads A wn times and B wm times (every warp its
    rows of A and columns of B); otherwise the matrix instruction's scope as in GEMMs (``smem_reads_a`` / ``_b``:
    wgmma's two consumer warpgroups split M and each read all of B). A held in registers is not read."""
    ra, rb = (grid[1], grid[0]) if grid is not None else (t.smem_reads_a, t.smem_reads_b)
    result: FloatArray = k * ((ra * m if a_in_smem else 0.0) + rb * n)
    return result


def smem_pair_bytes(t: MachineTables, bq: FloatArray, bkv: FloatArray, d: FloatArray, dv: FloatArray, e: FloatArray,
                    backward: bool = False, warps: FloatArray | float = FA2_FORWARD_WARPS) -> FloatArray:
    """SMEM bytes read and written per (Q tile, KV tile) pair by the matrix operands (docs/model.md, 'Flash attention:
    FA2 vs FA3'). Forward: S = Q Kᵀ (both from SMEM), O += P V (P in registers). Backward: S and dP recomputed, dV
    += Pᵀ dO, dK += dSᵀ Q (P and dS written to SMEM to be read transposed), dQ += dS K; the asynchronous-MMA
    kernels (FA3) also stage the fp32 dQ tile in SMEM for the TMA reduce-add (written and read). ``warps``: the FA2
    forward's warps along the Q tile, each reading the whole K and V tile."""
    warp = not overlaps_softmax(t)
    if not backward:
        grid_f = (warps, 1.0) if warp else None
        result: FloatArray = e * (_mma_smem_elements(t, bq, bkv, d, grid=grid_f)
                                  + _mma_smem_elements(t, bq, dv, bkv, a_in_smem=False, grid=grid_f))
        return result
    g = FA2_BACKWARD_GRID if warp else None
    gt = (g[1], g[0]) if g is not None else None  # dV, dK: M is the KV tile
    elements = (_mma_smem_elements(t, bq, bkv, d, grid=g) + _mma_smem_elements(t, bq, bkv, dv, grid=g)
                + _mma_smem_elements(t, bkv, dv, bq, grid=gt) + _mma_smem_elements(t, bkv, d, bq, grid=gt)
                + _mma_smem_elements(t, bq, d, bkv, grid=g) + 2.0 * bq * bkv)
    dq = 0.0 if warp else 2.0 * bq * d * DQ_ACCUM_BYTES
    result = e * elements + dq
    return result


def _fp32_vector_peak(t: MachineTables, fallback: FloatArray) -> FloatArray:
    """Softmax runs in fp32 registers whatever the operand type (FLOP/s)."""
    path = t.vector_paths[DTYPE_INDEX[DType.FP32]]
    return np.full_like(fallback, path.peak_flops_per_s) if path.supported and path.peak_flops_per_s > 0 else fallback


@dataclass(frozen=True)
class AttentionCandidates:
    bq: FloatArray
    bkv: FloatArray
    stages: FloatArray
    split: FloatArray  # KV splits per (batch, KV head, Q tile): flash-decoding parallelism

    @property
    def size(self) -> int:
        return int(self.bq.size)


def compact_attention_space(t: MachineTables) -> AttentionCandidates:
    """The small set ``predict_many`` uses: FlashAttention-like 64/128 x 64/128 tiles, 2 stages."""
    grid = np.array(list(itertools.product((64, 128), (64, 128), (2,), (1, 4, 16))), dtype=np.float64)
    return AttentionCandidates(*(grid[:, i].copy() for i in range(4)))


def attention_space(t: MachineTables) -> AttentionCandidates:
    """Q tiles 64-256 rows, KV tiles 32-256 keys, 1-3 stages, KV split 1-64 (252 candidates)."""
    grid = np.array(list(itertools.product((64, 128, 256), (32, 64, 128, 256), (1, 2, 3), (1, 2, 4, 8, 16, 32, 64))),
                    dtype=np.float64)
    return AttentionCandidates(*(grid[:, i].copy() for i in range(4)))


@dataclass
class AttentionChoice:
    index: np.ndarray[Any, np.dtype[np.intp]]
    compute_s: FloatArray
    dram_s: FloatArray
    reuse_s: FloatArray
    body_s: FloatArray
    dram_bytes: FloatArray
    reuse_bytes: FloatArray
    pairs: FloatArray
    ctas: FloatArray
    resident: FloatArray
    footprint_bytes: FloatArray


def _causal_pairs(sq: FloatArray, skv: FloatArray, bq: FloatArray, bkv: FloatArray) -> FloatArray:
    """KV tiles computed per (batch, head) under a bottom-right causal mask.

    Q tile i (rows i·BQ .. (i+1)·BQ − 1) sees keys up to x_i = skv − sq + (i+1)·BQ: the last
    tile sees all skv, the others x_i when positive. Σ ⌈x_i / BKV⌉ = Σ x_i / BKV plus the mean
    rounding-up per partial tile (the diagonal tile is computed whole), Σ x_i in closed form.
    """
    qt = np.ceil(sq / bq)
    off = skv - sq
    start = np.clip(np.floor(-off / bq), 0.0, np.maximum(qt - 1.0, 0.0))  # first tile that sees a key
    count = np.maximum(qt - 1.0 - start, 0.0)  # partial tiles before the last one
    series = (qt - 1.0) * qt / 2.0 - start * (start + 1.0) / 2.0  # Σ (i + 1) over those tiles
    partial_keys = count * off + bq * series
    # mean rounding-up of ⌈x_i / BKV⌉: the x_i step by BQ, so their residues are multiples of
    # g = gcd(BQ, BKV) (when the offset is one too): (BKV − g) / (2·BKV); ½ for fractional tiles
    integral = (bq == np.round(bq)) & (np.mod(off, 1.0) == 0)
    g = np.gcd(np.round(bq).astype(np.int64), np.round(bkv).astype(np.int64)).astype(np.float64)
    aligned = integral & (np.mod(off, np.maximum(g, 1.0)) == 0)
    rounding = np.where(aligned, (bkv - g) / (2.0 * bkv), 0.5)
    pairs: FloatArray = partial_keys / bkv + rounding * count + np.ceil(skv / bkv)
    return pairs


def attention_costs(t: MachineTables, space: AttentionCandidates, bh: FloatArray, group: FloatArray,
                    sq: FloatArray, skv: FloatArray, d: FloatArray, dv: FloatArray, causal: FloatArray,
                    elem: FloatArray, peak: FloatArray, vector_peak: FloatArray,
                    compulsory: FloatArray, kv_bytes: FloatArray, fwd: FloatArray | None = None,
                    bwd: FloatArray | None = None) -> dict[str, FloatArray]:
    """Per (op, candidate) times and bytes (n x c arrays); infeasible candidates get inf. ``fwd`` / ``bwd``: 1 where
    the op runs the forward / backward kernel (default: forward only)."""
    dd = t.defaults
    units = float(t.units)

    def col(a: FloatArray) -> FloatArray:
        return a[:, None]

    bq, bkv, stages, split = (x[None, :] for x in (space.bq, space.bkv, space.stages, space.split))
    e, hd, hdv = col(elem), col(d), col(dv)
    dpad = np.ceil(hd / t.mma_k) * t.mma_k
    dvpad = np.ceil(hdv / t.mma_k) * t.mma_k
    # GQA packing: a Q tile holds BQ / group tokens of all the query heads sharing one KV head
    tokens = bq / col(group)
    qt = np.ceil(col(sq) / tokens)
    kv_tiles = np.ceil(col(skv) / bkv)
    pairs = np.where(col(causal) > 0, _causal_pairs(col(sq), col(skv), tokens, bkv), qt * kv_tiles)
    kv_heads = col(bh) / col(group)
    ctas = kv_heads * qt * split
    combine = np.where(split > 1, 2.0 * split * col(bh) * col(sq) * hdv * 4.0, 0.0)  # fp32 partial O

    footprint = (bq * hd + stages * bkv * (hd + hdv)) * e
    registers = 2.0 * (bq * bkv + bq * hdv) * 4.0
    resident, feasible = _residency(t, footprint, registers)

    peak_unit = col(peak) * dd.matrix_efficiency / units
    matrix = 2.0 * bq * bkv * (dpad + dvpad) / peak_unit
    fp32_peak = col(_fp32_vector_peak(t, vector_peak))
    softmax = softmax_seconds(t, bq, bkv, hdv, fp32_peak)
    active = np.minimum(ctas, units)
    reuse_level = t.llc if t.llc is not None else t.dram
    reuse_bw = t.bandwidth_bytes_per_s(reuse_level) * dd.onchip_efficiency
    load = bkv * (hd + hdv) * e / (reuse_bw / np.maximum(active, 1.0))
    overlap = overlaps_softmax(t)
    # the MMAs' operand reads from SMEM overlap the MMAs themselves (ldmatrix runs ahead, wgmma reads by descriptor)
    smem_bw = t.scratchpad_bandwidth_per_unit or np.inf
    library = fa2_tiles.LIBRARY_TILES and not overlaps_softmax(t)  # FA2's own tiles and warps (fa2_tiles.py)
    warps = fa2_tiles.forward_warps(hd, col(causal), t.scratchpad_bytes_per_unit) if library else FA2_FORWARD_WARPS
    smem = smem_pair_bytes(t, bq, bkv, hd, hdv, e, warps=warps) / smem_bw
    mma = np.maximum(matrix, smem)
    if overlap and measured_pingpong(t):  # FA3 on Hopper: datasheet rates, the softmax partly hidden
        mma_peak = np.maximum(matrix * dd.matrix_efficiency, smem)
        step = np.maximum(pingpong_step(mma_peak, softmax_seconds(t, bq, bkv, hdv, fp32_peak, efficiency=1.0)), load)
    elif overlap:
        step = np.maximum(np.maximum(mma, softmax), load)
    elif fa2_tiles.FORWARD_OVERLAP:  # experiment (off): other CTAs' warps run their softmax under these MMAs
        mma_peak = np.maximum(matrix * dd.matrix_efficiency, smem)
        step = np.maximum(pingpong_step(mma_peak, softmax_seconds(t, bq, bkv, hdv, fp32_peak, efficiency=1.0)), load)
    else:
        step = np.maximum(mma + softmax, load)
    t_pair = pipelined_step(step, t.latency_s(reuse_level), stages, resident)
    per_cta = np.ceil(kv_tiles / split)
    # each CTA's pipeline fills before its first MMA: its Q tile streams from DRAM (latency, then the tile at the
    # CTA's share of DRAM bandwidth), its first KV tile at its share of the L2's, and under the ping-pong its first
    # softmax has no MMA to hide under; resident CTAs cover each other's fill
    dram_unit = t.bandwidth_bytes_per_s(t.dram) * dd.dram_efficiency / np.maximum(active, 1.0)
    fill = (t.latency_s(t.dram) + bq * hd * e / dram_unit + load + (softmax if overlap else 0.0)) / resident
    # causal: uneven CTAs. The mean over the SMs, but never under the longest CTA (the last Q tile sees every key).
    # FA2 launches a plain grid with the Q tiles of a head in order, lightest first (Dao-AILab/flash-attention,
    # csrc/flash_attn/src/flash_fwd_launch_template.h: grid (Q tiles, batch, heads), blockIdx.x the Q tile), so
    # the last CTA to start is a longest one: list scheduling's bound, mean + (1 − 1/SMs) x longest (Graham 1969),
    # is reached once there are more CTAs than SMs
    mean = kv_heads * pairs / units * t_pair + ctas / units * fill
    longest = per_cta * t_pair + fill
    in_order = np.where(ctas > units, mean + (1.0 - 1.0 / units) * longest, np.maximum(mean, longest))
    compute = np.where(col(causal) > 0, np.maximum(mean, longest) if overlap else in_order,
                       np.ceil(ctas / units) * (per_cta * t_pair + fill)) + t.latency_s(t.dram)
    compute = compute + combine / reuse_bw
    f = col(np.ones_like(bh) if fwd is None else fwd)
    b = col(np.zeros_like(bh) if bwd is None else bwd)
    if SKIP_UNUSED_BACKWARD and not b.any() and bool((f > 0).all()):  # forward only: every backward term x 0
        back: dict[str, Any] = {"compute_s": 0.0, "footprint_bytes": 0.0, "feasible": True, "reuse_bytes": 0.0,
                                "serial_s": 0.0, "pairs": 0.0, "ctas": 0.0}
    else:
        back = _backward(t, bq, bkv, stages, col(bh), col(sq), col(skv), hd, hdv, dpad, dvpad, e, col(causal),
                         peak_unit, fp32_peak, reuse_bw, overlap, col(group))
    compute = f * compute + b * back["compute_s"]
    footprint = np.where(b > 0, np.maximum(footprint, back["footprint_bytes"]), footprint)
    feasible = feasible & ((b == 0) | back["feasible"])
    if library:  # only the tile FA2 launches, where the space holds it
        lib = fa2_tiles.allowed(hd, col(causal), b, t.scratchpad_bytes_per_unit, bq, bkv, split)
        feasible = feasible & np.where(np.any(lib & feasible, axis=1, keepdims=True), lib, True)

    llc_half = (t.hardware.level_capacity_bytes(t.llc) or 0.0) * dd.llc_resident_fraction if t.llc else 0.0
    in_flight = np.minimum(ctas, units * resident)
    heads_in_flight = np.maximum(np.ceil(in_flight / (qt * split)), 1.0)
    per_head = col(kv_bytes) / np.maximum(kv_heads, 1.0)
    # a head too large for the LLC: its Q tiles in flight share each KV tile as they walk the keys together (FA2's
    # grid has the Q tile fastest, flash_fwd_launch_template.h; FA3's schedulers order Q tiles within a head,
    # hopper/tile_scheduler.hpp), so K and V stream from DRAM once per wave of the head's Q tiles
    waves = np.minimum(qt, np.ceil(qt * split / np.maximum(in_flight, 1.0)))
    kv_reads = np.where(per_head * heads_in_flight <= llc_half, 1.0, waves)
    dram = col(compulsory) + f * (col(kv_bytes) * (kv_reads - 1.0) + combine)
    reuse = col(compulsory) - col(kv_bytes) + f * (kv_heads * pairs * bkv * (hd + hdv) * e + combine) \
        + b * back["reuse_bytes"]
    busy = np.clip(ctas / (units * dd.blocks_per_unit_for_bandwidth), 1.0 / units, 1.0)
    t_dram = t.latency_s(t.dram) + dram / (t.bandwidth_bytes_per_s(t.dram) * dd.dram_efficiency * busy)
    t_reuse = t.latency_s(reuse_level) + reuse / reuse_bw if t.llc is not None else np.zeros_like(t_dram)
    # the backward's preprocess and postprocess kernels run before and after it, not under it
    body = np.maximum(np.maximum(compute, t_dram), t_reuse) + b * back["serial_s"]
    shape = np.broadcast_shapes(body.shape, footprint.shape)
    judged = np.where(np.broadcast_to(feasible, shape), body, np.inf)
    return {"compute_s": compute, "dram_s": t_dram, "reuse_s": np.broadcast_to(t_reuse, shape), "body_s": body,
            "judged_s": judged, "dram_bytes": dram, "reuse_bytes": reuse, "pairs": f * pairs + b * back["pairs"],
            "ctas": np.where(f > 0, ctas, back["ctas"]),
            "resident": resident, "footprint_bytes": footprint, "feasible": feasible}


# a batch with no backward pass (every row's weight 0) skips the backward's candidates: its finite terms only ever
# entered as 0 x term (the same answers; False: computed anyway, the reference in test_attention_forward_only)
SKIP_UNUSED_BACKWARD = True


def _residency(t: MachineTables, footprint_bytes: FloatArray,
               register_bytes: FloatArray) -> tuple[FloatArray, np.ndarray[Any, np.dtype[np.bool_]]]:
    """CTAs resident per SM (by shared memory and the register file, at least 1) and whether one fits at all."""
    resident = np.clip(np.minimum(np.floor(t.scratchpad_bytes_per_unit / footprint_bytes),
                                  np.floor(t.register_bytes_per_unit / register_bytes)), 1.0, t.max_resident_tiles)
    feasible = (footprint_bytes <= t.scratchpad_bytes_per_unit) & (register_bytes <= t.register_bytes_per_unit)
    return resident, feasible


def _backward(t: MachineTables, bq: FloatArray, bkv: FloatArray, stages: FloatArray, bh: FloatArray, sq: FloatArray,
              skv: FloatArray, hd: FloatArray, hdv: FloatArray, dpad: FloatArray, dvpad: FloatArray, e: FloatArray,
              causal: FloatArray, peak_unit: FloatArray, fp32_peak: FloatArray, reuse_bw: float,
              overlap: bool, group: FloatArray | float = 1.0) -> dict[str, FloatArray]:
    """The FlashAttention-2/-3 backward: one CTA per (query head, KV tile) keeps dK and dV (fp32) on chip and walks
    the Q tiles; per (Q tile, KV tile) pair five MMAs (S = Q Kᵀ recomputed, dP = dO Vᵀ, dV += Pᵀ dO, dK += dSᵀ Q,
    dQ += dS K: 2·BQ·BKV·(3d + 2dv) FLOPs, 2.5x the forward's), the exp recomputed and twice the forward's fp32
    softmax work (P, then dS = P∘(dP − D)), and dQ accumulated in fp32 atomics through the L2 (read and written).
    The kernel style (softmax overlapped or in turn) is the forward's. Under GQA (``group`` query heads per KV
    head) each CTA's dK and dV belong to a KV head its group shares: ``gqa_dkv_seconds``."""
    units = float(t.units)
    qt = np.ceil(sq / bq)
    kv_tiles = np.ceil(skv / bkv)
    pairs = np.where(causal > 0, _causal_pairs(sq, skv, bq, bkv), qt * kv_tiles)
    ctas = bh * kv_tiles
    footprint = (bkv * (hd + hdv) + stages * bq * (hd + hdv)) * e
    # fp32 in registers: S and dP (BQ x BKV), the dK and dV accumulators, and each Q row's LSE and D = rowsum(dO∘O)
    # (FA2's flash_bwd_kernel.h and FA3's mainloop_bwd load both per row into registers)
    registers = (2.0 * bq * bkv + bkv * (hd + hdv) + 2.0 * bq) * 4.0
    resident, feasible = _residency(t, footprint, registers)
    matrix = 2.0 * bq * bkv * (3.0 * dpad + 2.0 * dvpad) / peak_unit
    softmax = softmax_seconds(t, bq, bkv, hdv, fp32_peak, backward=True)
    pair_bytes = bq * (hd + hdv) * e + 2.0 * bq * hd * 4.0  # Q and dO tiles; dQ atomics (fp32, read + write)
    load = pair_bytes / (reuse_bw / np.maximum(np.minimum(ctas, units), 1.0))
    smem = smem_pair_bytes(t, bq, bkv, hd, hdv, e, backward=True) / (t.scratchpad_bandwidth_per_unit or np.inf)
    mma = np.maximum(matrix, smem)
    if overlap and measured_pingpong(t):  # FA3 on Hopper, as the forward
        mma_peak = np.maximum(matrix * t.defaults.matrix_efficiency, smem)
        step = np.maximum(pingpong_step(mma_peak, softmax_seconds(t, bq, bkv, hdv, fp32_peak, backward=True,
                                                                  efficiency=1.0)), load)
    elif overlap:
        step = np.maximum(np.maximum(mma, softmax), load)
    else:
        step = np.maximum(mma + softmax, load)
    reuse_level = t.llc if t.llc is not None else t.dram
    t_pair = pipelined_step(step, t.latency_s(reuse_level), stages, resident)
    per_cta = np.where(causal > 0, np.ceil(pairs / kv_tiles), qt)
    # the CTA's K and V tiles stream at its share of DRAM bandwidth and its first Q, dO tiles at its L2 share
    dram_unit = t.bandwidth_bytes_per_s(t.dram) * t.defaults.dram_efficiency / np.maximum(np.minimum(ctas, units), 1.0)
    epilogue, epilogue_bytes, side = gqa_dkv_seconds(t, bh, skv, bkv, hd, hdv, e, group, overlap,
                                                     reuse_bw / np.maximum(np.minimum(ctas, units), 1.0))
    fill = (t.latency_s(t.dram) + bkv * (hd + hdv) * e / dram_unit + load + (softmax if overlap else 0.0)
            + epilogue) / resident
    compute = np.where(causal > 0,
                       np.maximum(bh * pairs / units * t_pair + ctas / units * fill, qt * t_pair + fill),
                       np.ceil(ctas / units) * (per_cta * t_pair + fill)) + t.latency_s(t.dram)
    serial = backward_side_kernels_seconds(t, bh, sq, hd, hdv, e) + side
    return {"compute_s": compute, "serial_s": serial, "reuse_bytes": bh * pairs * pair_bytes + ctas * epilogue_bytes,
            "pairs": pairs,
            "ctas": ctas,
            "footprint_bytes": footprint, "feasible": feasible}


def _pick(t: MachineTables, space: AttentionCandidates, arrays: dict[str, FloatArray]) -> AttentionChoice:
    costs = attention_costs(t, space, **arrays)
    judged = costs["judged_s"]
    best = tie_break(judged, np.broadcast_to(costs["footprint_bytes"], judged.shape))
    rows = np.arange(best.size)

    def pick(name: str) -> FloatArray:
        value: FloatArray = np.broadcast_to(costs[name], judged.shape)[rows, best]
        return value

    return AttentionChoice(best, *(pick(f) for f in ("compute_s", "dram_s", "reuse_s", "body_s", "dram_bytes",
                                                     "reuse_bytes", "pairs", "ctas", "resident", "footprint_bytes")))


def best_attention(t: MachineTables, space: AttentionCandidates, **arrays: FloatArray) -> AttentionChoice:
    """The cheapest schedule per op (equal times: smallest footprint, then first index, as ``tie_break``). An op
    with both passes runs two kernels, each at its own best tile: the forward's times are added to the backward's
    (the op's compulsory bytes charged once, with the backward); the schedule reported is the backward's. A small
    call seen before with the same tables and space is answered from ``call_memo``."""
    names = sorted(arrays)
    candidates = [space.bq, space.bkv, space.stages, space.split]  # by value: a space is built per call
    return call_memo.kept("attention:" + ",".join(names), (t,), candidates + [np.asarray(arrays[k]) for k in names],
                          lambda: _best_attention(t, space, **arrays), _copy_choice)


def _copy_choice(choice: AttentionChoice) -> AttentionChoice:
    return AttentionChoice(*(np.array(getattr(choice, f)) for f in AttentionChoice.__dataclass_fields__))


def _best_attention(t: MachineTables, space: AttentionCandidates, **arrays: FloatArray) -> AttentionChoice:
    fwd, bwd = arrays.get("fwd"), arrays.get("bwd")
    if fwd is None or bwd is None or not np.any((fwd > 0) & (bwd > 0)):
        return _pick(t, space, arrays)
    zero = np.zeros_like(bwd)
    both = (fwd > 0) & (bwd > 0)
    forward = _pick(t, space, {**arrays, "bwd": zero, "compulsory": np.where(both, 0.0, arrays["compulsory"])})
    backward = _pick(t, space, {**arrays, "fwd": zero})
    only_bwd = bwd > 0

    def field(name: str) -> FloatArray:
        f, b = getattr(forward, name), getattr(backward, name)
        result: FloatArray = np.where(both, f + b, np.where(only_bwd, b, f)) if name in _SUMMED else \
            np.where(only_bwd, b, f)
        return result

    return AttentionChoice(np.where(only_bwd, backward.index, forward.index),
                           *(field(f) for f in ("compute_s", "dram_s", "reuse_s", "body_s", "dram_bytes",
                                                "reuse_bytes", "pairs", "ctas", "resident", "footprint_bytes")))


_SUMMED = ("compute_s", "dram_s", "reuse_s", "body_s", "dram_bytes", "reuse_bytes", "pairs")
