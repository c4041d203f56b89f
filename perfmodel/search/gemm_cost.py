"""Vectorised cost of GEMM schedules: ops on one axis, candidates on the other.

Per GEMM (batch b, M x N x K, element size e) and schedule (BM, BN, BK, stages, split S,
raster group G), with Mt = ⌈M/BM⌉, Nt = ⌈N/BN⌉, Ks = ⌈K/S⌉:

    tiles      = b · Mt · Nt · S            waves = ⌈tiles / (units · resident)⌉
    resident   = min(⌊SMEM / ((BM+BN)·BK·e·stages)⌋, ⌊RF / (2·BM·BN·4)⌋, max resident)
    t_step     = max(2·BM·BN·BK / peak_unit, SMEM reads / SMEM_bw_unit, (BM+BN/c)·BK·e / reuse_bw_unit)
                 pipelined: max(t_step, latency / ((stages − 1)·resident)); unbuffered: + latency
    SMEM reads = (rA·BM + rB·BN)·BK·e   rA, rB by the matrix instruction's scope: 2, 2 (warp: mma.sync,
                 MFMA), 1, 2 (warpgroup: wgmma), 1, 1 (CTA: tcgen05)
    t_compute  = ⌈tiles / units⌉ · ⌈Ks/BK⌉ · t_step + fill + split-K reduction
    LLC→SMEM   = b·e·(M·K·Nt + K·N·⌈Mt/c⌉)                   (every tile loads its A panel; c = min(sharing, Mt)
                 tiles along M load each B panel once: TMA multicast, 2-SM MMA; 1 elsewhere)
    DRAM       = compulsory + b·e·(M·K·(A_reads − 1) + K·N·(B_reads − 1))
                 A_reads = 1 if min(G, Mt)·BM·Ks·e fits half the LLC, else Nt
                 B_reads = 1 if Ks·N·e fits half the LLC, else ⌈Mt/G⌉
    t_DRAM     = L0 + DRAM / min(BW·eff, (1 − h)·λ)   on GPUs: Little's law over the loads in flight
                 F = min(tiles, units·resident) · min(max(stages − 1, 1), ⌈Ks/BK⌉) · (BM' + BN'/c)·BK'·e
                 (BM' = min(BM, M), BN' = min(BN, N), BK' = min(BK, Ks): no tile loads past the problem's edge),
                 h = 1 − DRAM / LLC→SMEM (the share of loads the LLC serves), λ the load bandwidth F sustains at
                 the round trip h·Lc + (1 − h)·L0·(1 + a·(1 − h)·λ/BW), a = loaded-latency factor − 1
                 (``in_flight_bandwidth``); elsewhere
                 L0 + DRAM / (BW·eff·busy), busy = min(tiles / (units · blocks per unit for bandwidth), 1)

A weight-only quantized B (int4 / int8 weights, 16-bit math) is loaded at its stored width r·e (r = 0.25 / 0.5
over fp16) and dequantised in registers after the load (Marlin, Frantar et al. 2024, §3): every BN, N·K term of B
above (footprint, SMEM reads, LLC→SMEM, DRAM re-reads, the slab in flight) carries the factor r; the MMAs still
run at the 16-bit peak. Such a kernel reduces its split-K partials in its own output buffer (Marlin's "striped"
partitioning, "global reduction happens directly in the output buffer"): no second kernel's launch.

Scratchpad machines (TPU, NPU) have no LLC: every tile panel is DMA'd from DRAM, the step is
max(compute, DMA) when double-buffered and their sum (plus the descriptor latency) when not, and
a weight-stationary array pays its weight load per weight tile: max(BM, rows) / BM cycles per
streamed row when double-buffered (the next weights shift in while BM rows stream, and successive
folds overlap their skews), (BM + 2·rows + cols − 2) / BM when not (``perfmodel.systolic``: load,
input skew and output drain of every fold, as SCALE-Sim counts them).
``tests/unit/test_gemm_simulator.py`` checks the traffic against a loop-nest simulator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.machine import MachineTables
from perfmodel.ops.base import FloatArray, Work
from perfmodel.search import call_memo, gemm_kernel, gemm_memo
from perfmodel.search.gemm_space import GemmCandidates, is_systolic
from perfmodel.systolic import fold_cycles

PARTIAL_BYTES = 4.0  # split-K partial sums are fp32
ACCUMULATOR_BYTES = 4.0  # fp32 accumulators per output element of a tile
REJECT_REASONS = ("none", "smem", "registers", "scratchpad", "useless_split", "mma_granularity")


@dataclass
class GemmCosts:
    """Per (op, candidate): times in s, bytes per level, occupancy; ``reject`` indexes REJECT_REASONS."""

    compute_s: FloatArray
    dram_s: FloatArray
    reuse_s: FloatArray
    body_s: FloatArray
    judged_s: FloatArray
    dram_bytes: FloatArray
    reuse_bytes: FloatArray
    smem_bytes: FloatArray
    footprint_bytes: FloatArray
    resident: FloatArray
    waves: FloatArray
    tiles: FloatArray
    busy: FloatArray
    reject: np.ndarray[Any, np.dtype[np.int64]]


def gemm_costs(t: MachineTables, space: GemmCandidates, batch: FloatArray, m: FloatArray, n: FloatArray,
               k: FloatArray, elem_bytes: FloatArray, peak: FloatArray, compulsory_bytes: FloatArray,
               b_ratio: FloatArray | None = None) -> GemmCosts:
    """Cost every candidate of ``space`` for every GEMM (arrays of length ops): the compiled kernel
    for large grids, else numpy (``gemm_costs_numpy``, the reference; both give the same numbers). ``b_ratio``: B's
    stored element size over ``elem_bytes`` (weight-only int4 / int8 over fp16: 0.25 / 0.5; default 1)."""
    ratio = b_ratio_of(batch, b_ratio)
    if not gemm_kernel.use_kernel(batch.size * space.size):
        return gemm_costs_numpy(t, space, batch, m, n, k, elem_bytes, peak, compulsory_bytes, ratio)
    block, reject = gemm_kernel.cost_grid(gemm_kernel.device_vector(t), space, batch, m, n, k, elem_bytes, peak,
                                          compulsory_bytes, ratio)
    fields = dict(zip(gemm_kernel.FIELDS, block, strict=True))
    return GemmCosts(**fields, reject=reject)


def b_ratio_of(batch: FloatArray, b_ratio: FloatArray | None) -> FloatArray:
    """B's element size over A's per GEMM: ``b_ratio`` as given, ones where it is None."""
    return np.ones(batch.size) if b_ratio is None else np.asarray(b_ratio, dtype=np.float64)


def stored_b_ratio(work: Work, slot: int, elem_bytes: float) -> float:
    """B's stored bytes per element over ``elem_bytes`` for GEMM ``slot`` of ``work``'s first op (1: as wide)."""
    stored = float(work.gemm_b_bytes[0, slot])
    return stored / elem_bytes if stored > 0 else 1.0


def gemm_costs_numpy(t: MachineTables, space: GemmCandidates, batch: FloatArray, m: FloatArray, n: FloatArray,
                     k: FloatArray, elem_bytes: FloatArray, peak: FloatArray,
                     compulsory_bytes: FloatArray, b_ratio: FloatArray | None = None) -> GemmCosts:
    """Cost every candidate of ``space`` for every GEMM in numpy: the reference formula."""
    d = t.defaults

    def col(a: FloatArray) -> FloatArray:  # ops down, candidates across
        return a[:, None]

    def uniform(a: FloatArray) -> FloatArray:  # one value for all ops: candidate-only terms stay 1 x c
        return a[:1, None] if np.all(a == a[0]) else a[:, None]

    b, mm, nn, kk, eb = col(batch), col(m), col(n), col(k), uniform(elem_bytes)
    r = uniform(b_ratio_of(batch, b_ratio))  # B's bytes per element over A's (weight-only quantized B)
    bm, bn, s, g, stages = (x[None, :] for x in (space.bm, space.bn, space.split, space.group, space.stages))
    systolic = is_systolic(t)
    bk = np.maximum(np.ceil(space.bk_bytes[None, :] / eb / t.mma_k) * t.mma_k, t.mma_k)
    mt, nt = np.ceil(mm / bm), np.ceil(nn / bn)
    ks = np.ceil(kk / s)
    steps = np.ceil(ks / bk)
    tiles = b * mt * nt * s
    units = float(t.gemm_units or t.units)
    pad = t.gemm_scratchpad_bytes or t.scratchpad_bytes_per_unit  # the tile store of one unit

    # --- capacity and occupancy --------------------------------------------------------
    operands = (bm + bn * r) * bk * eb * stages
    accumulators = bm * bn * ACCUMULATOR_BYTES
    reject = np.zeros(bk.shape, dtype=np.int64)  # 1 x c unless dtypes differ across the ops
    if systolic:
        footprint = operands + accumulators
        resident = np.ones_like(footprint)
        reject = np.where(footprint > pad, 3, reject)
    else:
        footprint = operands + 0.0 * accumulators
        by_smem = np.floor(pad / footprint)
        by_regs = np.floor(t.register_bytes_per_unit / (2.0 * accumulators))
        resident = np.clip(np.minimum(by_smem, by_regs), 1.0, t.max_resident_tiles)
        reject = np.where(footprint > pad, 1, reject)
        reject = np.where((reject == 0) & (2.0 * accumulators > t.register_bytes_per_unit), 2, reject)
    reject = np.where((reject == 0) & (s > 1) & (ks < bk), 4, reject)  # now ops x c
    reject = np.where((reject == 0) & ((bm % t.mma_m != 0) & (bm > t.mma_m) | (bn % t.mma_n != 0)), 5, reject)

    # --- time per K-step of one tile ----------------------------------------------------
    peak_unit = uniform(peak) * d.matrix_efficiency / units
    compute_step = 2.0 * bm * bn * bk / peak_unit
    if systolic:
        # weight-stationary array: each weight tile is loaded (array-rows cycles), BM rows stream
        # through, the last result drains. Double-buffered weights overlap the load with the previous
        # stream: max(BM, rows) cycles; unbuffered: the whole fold, BM + 2·rows + cols − 2.
        per_tile = np.where(stages > 1, np.maximum(bm, t.mma_m), fold_cycles(bm, t.mma_m, t.mma_n, "ws"))
        compute_step = compute_step * per_tile / bm
    active = np.minimum(tiles, units)
    busy = np.clip(tiles / (units * d.blocks_per_unit_for_bandwidth), 1.0 / units, 1.0)
    # Hopper's TMA multicast / Blackwell's 2-SM MMA: ``share`` tiles along M load each B panel once
    share = np.minimum(1.0 if systolic else float(t.operand_sharing_tiles), mt)
    panel_bytes = (bm + bn * r / share) * bk * eb
    if systolic:
        dma_bw = gemm_kernel.systolic_load_bandwidth(t)
        load_step = panel_bytes / (dma_bw / np.maximum(active, 1.0))
        latency = t.dma_latency_s
        buffered = stages > 1
        step = np.where(buffered, np.maximum(compute_step, load_step), compute_step + load_step)
        smem_reads = np.zeros_like(step)
    else:
        reuse_bw = t.bandwidth_bytes_per_s(t.llc) if t.llc is not None else t.bandwidth_bytes_per_s(t.dram)
        load_step = panel_bytes / (reuse_bw * d.onchip_efficiency / np.maximum(active, 1.0))
        # shared-memory operand reads per K-step: 2 x 2 warps (mma.sync, MFMA) read 2·(BM + BN) rows, wgmma's
        # warpgroups BM + 2·BN, a tcgen05 CTA-wide MMA BM + BN (``MachineTables.smem_reads_a`` / ``_b``)
        smem_reads = bk * eb * (t.smem_reads_a * bm + t.smem_reads_b * bn * r)
        smem_step = smem_reads / (t.scratchpad_bandwidth_per_unit or np.inf)
        step = np.maximum(np.maximum(compute_step, load_step), smem_step)
        latency = t.latency_s(t.llc) if t.llc is not None else t.latency_s(t.dram)
    t_tile = steps * pipelined_step(step, latency, stages, resident)
    partials = np.where(s > 1, 2.0 * s * b * mm * nn * PARTIAL_BYTES, 0.0)
    reduce_bw = t.bandwidth_bytes_per_s(t.llc if t.llc is not None else t.dram) * d.onchip_efficiency
    fill = t.latency_s(t.dram)
    compute = np.ceil(tiles / units) * t_tile + fill + partials / reduce_bw

    # --- traffic per level --------------------------------------------------------------
    tile_loads = b * eb * (mm * kk * nt + kk * nn * r * np.ceil(mt / share))
    compulsory = col(compulsory_bytes)
    llc_fed = t.llc is not None and (not systolic or t.tiles_from_llc)
    if not llc_fed:
        dram = compulsory + tile_loads - b * eb * (mm * kk + kk * nn * r) + partials
        reuse = np.zeros_like(dram)
    else:
        assert t.llc is not None
        llc_half = (t.hardware.level_capacity_bytes(t.llc) or 0.0) * d.llc_resident_fraction
        a_reads = np.where(np.minimum(g, mt) * bm * ks * eb <= llc_half, 1.0, nt)
        b_reads = np.where(ks * nn * eb * r <= llc_half, 1.0, np.ceil(mt / g))
        dram = compulsory + b * eb * (mm * kk * (a_reads - 1.0) + kk * nn * r * (b_reads - 1.0))
        reuse = compulsory + tile_loads - b * eb * (mm * kk + kk * nn * r) + partials
    dram_bw = t.bandwidth_bytes_per_s(t.dram) * d.dram_efficiency
    if in_flight_limited(t):
        # Little's law over the tile loads: the CTAs resident at once each keep max(stages − 1, 1) K-slabs in
        # flight; a share ``hit`` of the loaded bytes is served by the LLC (its latency), the rest by DRAM, whose
        # share of the achieved load bandwidth is the DRAM stream's (``in_flight_bandwidth``)
        hit = np.where(reuse > 0.0, 1.0 - np.minimum(dram / np.maximum(reuse, 1.0), 1.0), 0.0)
        slab = (np.minimum(bm, mm) + np.minimum(bn, nn) * r / share) * np.minimum(bk, ks) * eb  # a tile past the edge
        slabs = np.minimum(np.maximum(stages - 1.0, 1.0), steps)  # loads no more than the problem has
        flight = np.minimum(tiles, units * resident) * slabs * slab
        lat_c = t.latency_s(t.llc) if t.llc is not None else 0.0
        loads = in_flight_bandwidth(flight, hit, t.latency_s(t.dram), t.bandwidth_bytes_per_s(t.dram), lat_c,
                                    d.loaded_latency_factor)
        t_dram = t.latency_s(t.dram) + dram / np.minimum(dram_bw, np.maximum((1.0 - hit) * loads, 1e-30))
    else:
        t_dram = t.latency_s(t.dram) + dram / (dram_bw * busy)
    if t.llc is not None and llc_fed:
        llc_bw = t.bandwidth_bytes_per_s(t.llc) * d.onchip_efficiency
        # the few-tiles case is already in load_step (bandwidth per active unit): no busy share here
        t_reuse = t.latency_s(t.llc) + reuse / llc_bw
    else:
        t_reuse = np.zeros_like(t_dram)
    body = np.maximum(np.maximum(compute, t_dram), t_reuse)
    # split-K's partial sums: a reduction kernel, except in a weight-only kernel (B stored narrower, r < 1), which
    # reduces them in its own output buffer (Marlin's striped partitioning and in-kernel global reduction)
    judged = body + np.where((s > 1) & (r >= 1.0), t.kernel_overhead_s, 0.0)
    judged = np.where(reject > 0, np.inf, judged)
    shape = judged.shape

    def full(a: FloatArray) -> FloatArray:
        out: FloatArray = np.broadcast_to(a, shape)
        return out

    return GemmCosts(
        compute_s=full(compute), dram_s=full(t_dram), reuse_s=full(t_reuse), body_s=full(body),
        judged_s=judged, dram_bytes=full(dram), reuse_bytes=full(reuse),
        smem_bytes=full(tile_loads if systolic else tiles * steps * smem_reads),
        footprint_bytes=full(footprint), resident=full(resident), waves=full(np.ceil(tiles / (units * resident))),
        tiles=full(tiles), busy=full(busy), reject=reject,
    )


def in_flight_limited(t: MachineTables) -> bool:
    """Whether a schedule's DRAM stream is bounded by the loads its CTAs keep in flight (Little's law): GPUs. A
    systolic device's DMA engines, and a CPU, keep the share of DRAM bandwidth of the units their tiles occupy."""
    return t.hardware.kind == "gpu" and not is_systolic(t)


def in_flight_bandwidth(flight: Any, hit: Any, dram_latency_s: float, dram_bw: float, llc_latency_s: float,
                        loaded_latency_factor: float) -> Any:
    """Bytes/s of loads that ``flight`` bytes in flight sustain (Little's law, as ``memory_time.in_flight_time``): a
    share ``hit`` comes back at the LLC's latency, the rest at DRAM's, which grows linearly with DRAM's utilisation
    to ``loaded_latency_factor`` times at its peak: the root of A·bw² + B·bw − F = 0 with A = a·(1−h)²·L0/BW,
    B = h·Lc + (1−h)·L0, a = factor − 1. The LLC's own bandwidth is not in it: the schedule's L2 feed per K-step and
    its reuse term bound that. Scalars (the numba kernel) or arrays."""
    a = max(loaded_latency_factor - 1.0, 1e-9)
    quad = a * ((1.0 - hit) * (1.0 - hit) * dram_latency_s / dram_bw)
    lin = np.maximum(hit * llc_latency_s + (1.0 - hit) * dram_latency_s, 1e-12)
    return 2.0 * flight / (lin + np.sqrt(lin * lin + 4.0 * quad * flight))


def pipelined_step(step: FloatArray, latency_s: float, stages: FloatArray, resident: FloatArray) -> FloatArray:
    """Time per K-step with ``stages`` buffers: stages − 1 loads in flight (times the tiles
    resident on the unit) cover the load latency, so a step costs max(step, L / ((s−1)·r));
    unbuffered (s = 1) it costs step + L / r."""
    hidden = np.maximum(step, latency_s / (np.maximum(stages - 1.0, 1.0) * resident))
    out: FloatArray = np.where(stages > 1, hidden, step + latency_s / resident)
    return out


def tie_break(time_s: FloatArray, footprint_bytes: FloatArray) -> np.ndarray[Any, np.dtype[np.intp]]:
    """The chosen candidate of each row (ops x candidates): the least time in s; among equal times the smallest
    on-chip footprint in bytes, then the first index. The one tie rule of ``predict``, ``search``, its Pareto front
    and the compiled kernels (a row with a NaN time takes its first NaN, as ``np.argmin``)."""
    lowest = time_s.min(axis=1, keepdims=True)
    footprint = np.broadcast_to(footprint_bytes, time_s.shape)
    chosen: np.ndarray[Any, np.dtype[np.intp]] = np.argmin(np.where(time_s == lowest, footprint, np.inf), axis=1)
    nan = np.isnan(lowest[:, 0])
    if nan.any():
        chosen[nan] = np.argmin(time_s[nan], axis=1)
    return chosen


def launch_overhead_s(t: MachineTables, work: Work) -> float:
    """The launch overhead in s of the first op of ``work``'s own kernels, which ``predict`` adds to a GEMM schedule's
    cost (a split-K's extra reduction kernel is already in the schedule's cost): added to every listed schedule's
    time so that the best row's time is ``predict``'s."""
    return float(work.kernels[0]) * t.kernel_overhead_s


CHUNK_ELEMENTS = 1 << 21  # ops x candidates costed at once (bounds the temporaries' memory)


@dataclass
class GemmChoice:
    """The cheapest candidate of each GEMM, with its figures (arrays of length GEMMs)."""

    index: np.ndarray[Any, np.dtype[np.intp]]  # candidate index into the space
    compute_s: FloatArray
    dram_s: FloatArray
    reuse_s: FloatArray
    body_s: FloatArray
    dram_bytes: FloatArray
    reuse_bytes: FloatArray
    busy: FloatArray
    waves: FloatArray
    tiles: FloatArray
    resident: FloatArray
    footprint_bytes: FloatArray


def best_gemms(t: MachineTables, space: GemmCandidates, batch: FloatArray, m: FloatArray, n: FloatArray,
               k: FloatArray, elem_bytes: FloatArray, peak: FloatArray, compulsory_bytes: FloatArray,
               b_ratio: FloatArray | None = None) -> GemmChoice:
    """The cheapest schedule of ``space`` for each GEMM (equal times: ``tie_break``): the compiled kernel keeps
    only each op's cheapest candidate; numpy costs the grid in chunks of ops."""
    ratio = b_ratio_of(batch, b_ratio)
    if gemm_kernel.use_kernel(batch.size * space.size):
        v = gemm_kernel.device_vector(t)
        columns = (batch, m, n, k, elem_bytes, peak, compulsory_bytes, ratio)
        if 0 < batch.size <= gemm_memo.SMALL_CALL_ROWS and space.size >= gemm_memo.MIN_SPACE and call_memo.enabled():
            index, block = gemm_memo.choose(v, space, columns,
                                            lambda *c: gemm_kernel.best_per_op(v, space, *c))
        else:
            index, block = gemm_kernel.best_per_op(v, space, *columns)
        return GemmChoice(index, *block)
    rows = max(1, CHUNK_ELEMENTS // max(space.size, 1))
    parts: list[GemmChoice] = []
    for start in range(0, batch.size, rows):
        sl = slice(start, start + rows)
        c = gemm_costs(t, space, batch[sl], m[sl], n[sl], k[sl], elem_bytes[sl], peak[sl], compulsory_bytes[sl],
                       ratio[sl])
        best = tie_break(c.judged_s, c.footprint_bytes)
        at = np.arange(best.size)
        parts.append(GemmChoice(best, *(getattr(c, f)[at, best] for f in (
            "compute_s", "dram_s", "reuse_s", "body_s", "dram_bytes", "reuse_bytes", "busy", "waves", "tiles",
            "resident", "footprint_bytes"))))
    return GemmChoice(*(np.concatenate([getattr(p, f) for p in parts]) for f in GemmChoice.__dataclass_fields__))
