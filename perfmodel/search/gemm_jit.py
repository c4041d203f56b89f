"""The numba kernels behind ``gemm_kernel``: imported on first use (numba costs ~0.4 s to import).

``element`` is the per-(op, candidate) formula of ``gemm_cost.gemm_costs`` with the operations in
the same order (so the same float results); ``grid`` fills every field, ``best`` keeps the cheapest
candidate of each op without storing the others.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from perfmodel.search.gemm_kernel import (
    D_BLOCKS_PER_UNIT,
    D_DRAM_BW,
    D_DRAM_LATENCY,
    D_FILL,
    D_HAS_LLC,
    D_LATENCY,
    D_LLC_BW,
    D_LLC_HALF,
    D_LLC_LATENCY,
    D_LOAD_BW,
    D_MATRIX_EFF,
    D_MAX_RESIDENT,
    D_MMA_K,
    D_MMA_M,
    D_MMA_N,
    D_OVERHEAD,
    D_REDUCE_BW,
    D_REGISTERS,
    D_SCRATCHPAD,
    D_SMEM_BW,
    D_SYSTOLIC,
    D_UNITS,
)


@numba.njit(inline="always", cache=True)
def element(v: Any, bm: float, bn: float, bk_bytes: float, stages: float, s: float, g: float, b: float,
            mm: float, nn: float, kk: float, eb: float, peak: float, compulsory: float) -> Any:
    systolic = v[D_SYSTOLIC] > 0.0
    units = v[D_UNITS]
    mma_m, mma_n, mma_k = v[D_MMA_M], v[D_MMA_N], v[D_MMA_K]
    bk = max(np.ceil(bk_bytes / eb / mma_k) * mma_k, mma_k)
    mt = np.ceil(mm / bm)
    nt = np.ceil(nn / bn)
    ks = np.ceil(kk / s)
    steps = np.ceil(ks / bk)
    tiles = b * mt * nt * s
    operands = (bm + bn) * bk * eb * stages
    accumulators = bm * bn * 4.0
    reject = 0
    if systolic:
        footprint = operands + accumulators
        resident = 1.0
        if footprint > v[D_SCRATCHPAD]:
            reject = 3
    else:
        footprint = operands + 0.0 * accumulators
        by_smem = np.floor(v[D_SCRATCHPAD] / footprint)
        by_regs = np.floor(v[D_REGISTERS] / (2.0 * accumulators))
        resident = min(max(min(by_smem, by_regs), 1.0), v[D_MAX_RESIDENT])
        if footprint > v[D_SCRATCHPAD]:
            reject = 1
        elif 2.0 * accumulators > v[D_REGISTERS]:
            reject = 2
    if reject == 0 and s > 1.0 and ks < bk:
        reject = 4
    if reject == 0 and ((bm % mma_m != 0.0 and bm > mma_m) or bn % mma_n != 0.0):
        reject = 5

    peak_unit = peak * v[D_MATRIX_EFF] / units
    compute_step = 2.0 * bm * bn * bk / peak_unit
    if systolic:
        per_tile = max(bm, mma_m) if stages > 1.0 else bm + mma_m + mma_m + mma_n - 2.0
        compute_step = compute_step * per_tile / bm
    active = min(tiles, units)
    busy = min(max(tiles / (units * v[D_BLOCKS_PER_UNIT]), 1.0 / units), 1.0)
    panel_bytes = (bm + bn) * bk * eb
    latency = v[D_LATENCY]
    if systolic:
        load_step = panel_bytes / (v[D_LOAD_BW] / max(active, 1.0))
        step = max(compute_step, load_step) if stages > 1.0 else compute_step + load_step
        smem_reads = 0.0
    else:
        load_step = panel_bytes / (v[D_LOAD_BW] / max(active, 1.0))
        smem_reads = bk * eb * 2.0 * (bm + bn)
        smem_step = smem_reads / v[D_SMEM_BW]
        step = max(max(compute_step, load_step), smem_step)
    hidden = latency / (max(stages - 1.0, 1.0) * resident)  # pipelined: loads in flight cover the latency
    per_step = max(step, hidden) if stages > 1.0 else step + latency / resident
    t_tile = steps * per_step
    partials = 2.0 * s * b * mm * nn * 4.0 if s > 1.0 else 0.0
    compute = np.ceil(tiles / units) * t_tile + v[D_FILL] + partials / v[D_REDUCE_BW]

    tile_loads = b * eb * (mm * kk * nt + kk * nn * mt)
    if systolic or v[D_HAS_LLC] == 0.0:
        dram = compulsory + tile_loads - b * eb * (mm * kk + kk * nn) + partials
        reuse = 0.0
    else:
        a_reads = 1.0 if min(g, mt) * bm * ks * eb <= v[D_LLC_HALF] else nt
        b_reads = 1.0 if ks * nn * eb <= v[D_LLC_HALF] else np.ceil(mt / g)
        dram = compulsory + b * eb * (mm * kk * (a_reads - 1.0) + kk * nn * (b_reads - 1.0))
        reuse = compulsory + tile_loads - b * eb * (mm * kk + kk * nn) + partials
    t_dram = v[D_DRAM_LATENCY] + dram / (v[D_DRAM_BW] * busy)
    t_reuse = v[D_LLC_LATENCY] + reuse / v[D_LLC_BW] if v[D_HAS_LLC] > 0.0 and not systolic else 0.0
    body = max(max(compute, t_dram), t_reuse)
    judged = body + (v[D_OVERHEAD] if s > 1.0 else 0.0)
    if reject > 0:
        judged = np.inf
    smem = tile_loads if systolic else tiles * steps * smem_reads
    waves = np.ceil(tiles / (units * resident))
    return (compute, t_dram, t_reuse, body, judged, dram, reuse, smem, footprint, resident, waves, tiles, busy,
            float(reject))


@numba.njit(cache=True)
def grid(v: Any, bm: Any, bn: Any, bk: Any, stages: Any, split: Any, group: Any, batch: Any, m: Any, n: Any,
         k: Any, elem: Any, peak: Any, compulsory: Any, out: Any, reject: Any) -> None:
    for i in range(batch.size):
        for j in range(bm.size):
            r = element(v, bm[j], bn[j], bk[j], stages[j], split[j], group[j], batch[i], m[i], n[i], k[i],
                        elem[i], peak[i], compulsory[i])
            for f in range(13):
                out[f, i, j] = r[f]
            reject[i, j] = int(r[13])


@numba.njit(cache=True)
def best(v: Any, bm: Any, bn: Any, bk: Any, stages: Any, split: Any, group: Any, batch: Any, m: Any, n: Any,
         k: Any, elem: Any, peak: Any, compulsory: Any, index: Any, out: Any) -> None:
    for i in range(batch.size):
        chosen = 0
        lowest = np.inf
        for j in range(bm.size):
            judged = element(v, bm[j], bn[j], bk[j], stages[j], split[j], group[j], batch[i], m[i], n[i],
                             k[i], elem[i], peak[i], compulsory[i])[4]
            if judged != judged:  # NaN: np.argmin stops at the first one
                chosen = j
                break
            if judged < lowest:
                chosen = j
                lowest = judged
        j = chosen
        r = element(v, bm[j], bn[j], bk[j], stages[j], split[j], group[j], batch[i], m[i], n[i], k[i],
                    elem[i], peak[i], compulsory[i])
        index[i] = j
        out[0, i], out[1, i], out[2, i], out[3, i] = r[0], r[1], r[2], r[3]
        out[4, i], out[5, i], out[6, i], out[7, i] = r[5], r[6], r[12], r[10]
        out[8, i], out[9, i], out[10, i] = r[11], r[9], r[8]

