"""The numba kernels behind ``gemm_kernel``: imported on first use (numba costs ~0.4 s to import).

``element`` is the per-(op, candidate) formula of ``gemm_cost.gemm_costs`` with the operations in
the same order (so the same float results); ``grid`` fills every field, ``best`` keeps the cheapest
candidate of each op without storing the others.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from perfmodel.search import gemm_cost, gemm_floor, gemm_kernel
from perfmodel.search.gemm_cost import in_flight_bandwidth
from perfmodel.search.gemm_floor import (  # the table's columns, read as gemm_jit.C_* elsewhere too
    C_BK,
    C_COMPUTE_STEP,
    C_FOOTPRINT,
    C_GRANULAR,
    C_HIDDEN,
    C_REJECT,
    C_RESIDENT,
    C_SIZE,
    C_SMEM_READS,
    C_SMEM_STEP,
    C_STEP_FLOOR,
    C_STEP_FULL,
    C_UNBUFFERED,
    candidate_codes,
    dram_floor,
    floors,
    scratch,
)
from perfmodel.search.gemm_kernel import (
    D_BLOCKS_PER_UNIT,
    D_DRAM_BW,
    D_DRAM_LATENCY,
    D_DRAM_PEAK_BW,
    D_FILL,
    D_IN_FLIGHT,
    D_LATENCY,
    D_LLC_BW,
    D_LLC_FED,
    D_LLC_HALF,
    D_LLC_LATENCY,
    D_LOAD_BW,
    D_LOADED_LATENCY,
    D_MATRIX_EFF,
    D_MAX_RESIDENT,
    D_MMA_K,
    D_MMA_M,
    D_MMA_N,
    D_OVERHEAD,
    D_REDUCE_BW,
    D_REGISTERS,
    D_SCRATCHPAD,
    D_SHARING,
    D_SMEM_A,
    D_SMEM_B,
    D_SMEM_BW,
    D_SYSTOLIC,
    D_UNITS,
)
from perfmodel.search.jit_cache import drop_stale

# the numpy formula compiled as it stands (scalars in, scalar out): the same operations, the same floats
# the kernels below inline gemm_floor's and gemm_cost's functions and freeze gemm_kernel's constants
drop_stale(__file__, tuple(str(m.__file__) for m in (gemm_cost, gemm_floor, gemm_kernel)))
in_flight = numba.njit(inline="always", cache=True, error_model="numpy")(in_flight_bandwidth)



@numba.njit(cache=True, error_model="numpy")
def fill_candidates(v: Any, bm: Any, bn: Any, bk_bytes: Any, stages: Any, eb: float, peak: float,
                    table: Any, r: float = 1.0) -> None:
    """The per-candidate terms of ``gemm_costs`` for ``eb``-byte operands (B at ``r`` times that) at ``peak``
    FLOP/s."""
    systolic = v[D_SYSTOLIC] > 0.0
    units = v[D_UNITS]
    mma_m, mma_n, mma_k = v[D_MMA_M], v[D_MMA_N], v[D_MMA_K]
    latency = v[D_LATENCY]
    peak_unit = peak * v[D_MATRIX_EFF] / units
    for j in range(bm.size):
        bk = max(np.ceil(bk_bytes[j] / eb / mma_k) * mma_k, mma_k)
        operands = (bm[j] + bn[j] * r) * bk * eb * stages[j]
        accumulators = bm[j] * bn[j] * 4.0
        reject = 0.0
        if systolic:
            footprint = operands + accumulators
            resident = 1.0
            if footprint > v[D_SCRATCHPAD]:
                reject = 3.0
        else:
            footprint = operands + 0.0 * accumulators
            by_smem = np.floor(v[D_SCRATCHPAD] / footprint)
            by_regs = np.floor(v[D_REGISTERS] / (2.0 * accumulators))
            resident = min(max(min(by_smem, by_regs), 1.0), v[D_MAX_RESIDENT])
            if footprint > v[D_SCRATCHPAD]:
                reject = 1.0
            elif 2.0 * accumulators > v[D_REGISTERS]:
                reject = 2.0
        compute_step = 2.0 * bm[j] * bn[j] * bk / peak_unit
        if systolic:
            per_tile = max(bm[j], mma_m) if stages[j] > 1.0 else bm[j] + mma_m + mma_m + mma_n - 2.0
            compute_step = compute_step * per_tile / bm[j]
        smem_reads = 0.0 if systolic else bk * eb * (v[D_SMEM_A] * bm[j] + v[D_SMEM_B] * bn[j] * r)
        table[j, C_BK] = bk
        table[j, C_FOOTPRINT] = footprint
        table[j, C_RESIDENT] = resident
        table[j, C_REJECT] = reject
        table[j, C_GRANULAR] = 1.0 if (bm[j] % mma_m != 0.0 and bm[j] > mma_m) or bn[j] % mma_n != 0.0 else 0.0
        table[j, C_COMPUTE_STEP] = compute_step
        table[j, C_SMEM_READS] = smem_reads
        table[j, C_SMEM_STEP] = smem_reads / v[D_SMEM_BW]
        # pipelined, loads in flight cover the latency; unbuffered, each step waits for it
        table[j, C_HIDDEN] = latency / (max(stages[j] - 1.0, 1.0) * resident)
        table[j, C_UNBUFFERED] = latency / resident
        # floors under ``element``'s time per K-step (``per_step``) from its terms that need no op: the load step
        # with one active tile (any grid) or all units active (a grid of at least as many tiles), B panels shared
        # by ``D_SHARING`` tiles (the most there), max'ed and added as there
        for col, active in ((C_STEP_FLOOR, 1.0), (C_STEP_FULL, max(units, 1.0))):
            load_step = (bm[j] + bn[j] * r / v[D_SHARING]) * bk * eb / (v[D_LOAD_BW] / active)
            if systolic:
                least = max(compute_step, load_step) if stages[j] > 1.0 else compute_step + load_step
            else:
                least = max(max(compute_step, load_step), table[j, C_SMEM_STEP])
            table[j, col] = max(least, table[j, C_HIDDEN]) if stages[j] > 1.0 else least + table[j, C_UNBUFFERED]


TABLES_KEPT = 8  # candidate tables kept per call, one per distinct (element size, peak, B's ratio) of the ops


@numba.njit(inline="always", cache=True, error_model="numpy")
def table_for(v: Any, bm: Any, bn: Any, bk: Any, stages: Any, eb: float, peak: float, r: float, cache: Any,
              keys: Any) -> int:
    """The slot of ``cache`` holding the candidate table of (``eb``, ``peak``, ``r``), filled on a miss (slots
    reused in turn once all are taken)."""
    for slot in range(TABLES_KEPT):
        if keys[slot, 0] == eb and keys[slot, 1] == peak and keys[slot, 2] == r:
            return slot
    slot = 0
    while slot < TABLES_KEPT - 1 and keys[slot, 0] == keys[slot, 0]:  # first empty (NaN) slot, else the last
        slot += 1
    if keys[slot, 0] == keys[slot, 0]:  # all taken: shift the others down, newest last
        for s in range(TABLES_KEPT - 1):
            cache[s] = cache[s + 1]
            keys[s] = keys[s + 1]
    fill_candidates(v, bm, bn, bk, stages, eb, peak, cache[slot], r)
    keys[slot, 0] = eb
    keys[slot, 1] = peak
    keys[slot, 2] = r
    return slot


@numba.njit(inline="always", cache=True, error_model="numpy")
def shared(v: Any, c: Any, j: int, bm: float, bn: float, stages: float, s: float, b: float, mm: float, nn: float,
           kk: float, eb: float, compulsory: float, r: float = 1.0) -> Any:
    """The terms of ``element`` that do not depend on the raster group (the space's last axis, so consecutive
    candidates of ``full_space`` share them): compute time, busy share, reject code, tile counts, the bytes the
    tiles re-read, the bytes in flight, the L2 time, SMEM bytes, waves, tiles, resident tiles."""
    systolic = v[D_SYSTOLIC] > 0.0
    units = v[D_UNITS]
    bk = c[j, C_BK]
    resident = c[j, C_RESIDENT]
    mt = np.ceil(mm / bm)
    nt = np.ceil(nn / bn)
    ks = np.ceil(kk / s)
    steps = np.ceil(ks / bk)
    tiles = b * mt * nt * s
    reject = c[j, C_REJECT]
    if reject == 0.0 and s > 1.0 and ks < bk:
        reject = 4.0
    if reject == 0.0 and c[j, C_GRANULAR] > 0.0:
        reject = 5.0

    compute_step = c[j, C_COMPUTE_STEP]
    active = min(tiles, units)
    busy = min(max(tiles / (units * v[D_BLOCKS_PER_UNIT]), 1.0 / units), 1.0)
    share = min(v[D_SHARING], mt)  # tiles along M that share one load of their B panel
    load_step = (bm + bn * r / share) * bk * eb / (v[D_LOAD_BW] / max(active, 1.0))
    if systolic:
        step = max(compute_step, load_step) if stages > 1.0 else compute_step + load_step
    else:
        step = max(max(compute_step, load_step), c[j, C_SMEM_STEP])
    per_step = max(step, c[j, C_HIDDEN]) if stages > 1.0 else step + c[j, C_UNBUFFERED]
    t_tile = steps * per_step
    partials = 2.0 * s * b * mm * nn * 4.0 if s > 1.0 else 0.0
    compute = np.ceil(tiles / units) * t_tile + v[D_FILL] + partials / v[D_REDUCE_BW]

    tile_loads = b * eb * (mm * kk * nt + kk * nn * r * np.ceil(mt / share))
    # DRAM's bytes without an L2 to feed the tiles, else L2's
    reread = compulsory + tile_loads - b * eb * (mm * kk + kk * nn * r) + partials
    flight = 0.0
    if v[D_IN_FLIGHT] > 0.0:
        slab = (min(bm, mm) + min(bn, nn) * r / share) * min(bk, ks) * eb
        slabs = min(max(stages - 1.0, 1.0), steps)
        flight = min(tiles, units * resident) * slabs * slab
    t_reuse = v[D_LLC_LATENCY] + reread / v[D_LLC_BW] if v[D_LLC_FED] > 0.0 else 0.0
    smem = tile_loads if systolic else tiles * steps * c[j, C_SMEM_READS]
    waves = np.ceil(tiles / (units * resident))
    return compute, busy, reject, mt, nt, ks, reread, flight, t_reuse, smem, waves, tiles, resident


@numba.njit(inline="always", cache=True, error_model="numpy")
def group_dram(v: Any, common: Any, bm: float, g: float, b: float, mm: float, nn: float, kk: float, eb: float,
               compulsory: float, r: float = 1.0) -> float:
    """DRAM bytes of ``element`` for raster group ``g`` from its group-free terms ``common`` (``shared``)."""
    mt, nt, ks, reread = common[3], common[4], common[5], common[6]
    if v[D_LLC_FED] == 0.0:
        return float(reread)
    a_reads = 1.0 if min(g, mt) * bm * ks * eb <= v[D_LLC_HALF] else nt
    b_reads = 1.0 if ks * nn * eb * r <= v[D_LLC_HALF] else np.ceil(mt / g)
    return float(compulsory + b * eb * (mm * kk * (a_reads - 1.0) + kk * nn * r * (b_reads - 1.0)))


@numba.njit(inline="always", cache=True, error_model="numpy")
def grouped(v: Any, c: Any, j: int, common: Any, dram: float, s: float, r: float = 1.0) -> Any:
    """``element`` from its group-free terms ``common`` (``shared``) and its DRAM bytes (``group_dram``)."""
    compute, busy, reject, _mt, _nt, _ks, reread, flight, t_reuse, smem, waves, tiles, resident = common
    reuse = 0.0 if v[D_LLC_FED] == 0.0 else reread
    if v[D_IN_FLIGHT] > 0.0:
        hit = 1.0 - min(dram / max(reuse, 1.0), 1.0) if reuse > 0.0 else 0.0
        loads = in_flight(flight, hit, v[D_DRAM_LATENCY], v[D_DRAM_PEAK_BW], v[D_LLC_LATENCY], v[D_LOADED_LATENCY])
        t_dram = v[D_DRAM_LATENCY] + dram / min(v[D_DRAM_BW], max((1.0 - hit) * loads, 1e-30))
    else:
        t_dram = v[D_DRAM_LATENCY] + dram / (v[D_DRAM_BW] * busy)
    body = max(max(compute, t_dram), t_reuse)
    judged = body + (v[D_OVERHEAD] if s > 1.0 and r >= 1.0 else 0.0)  # no launch: weight-only split-K
    if reject > 0.0:
        judged = np.inf
    return (compute, t_dram, t_reuse, body, judged, dram, reuse, smem, c[j, C_FOOTPRINT], resident, waves, tiles,
            busy, reject)


@numba.njit(inline="always", cache=True, error_model="numpy")
def element(v: Any, c: Any, j: int, bm: float, bn: float, stages: float, s: float, g: float, b: float, mm: float,
            nn: float, kk: float, eb: float, compulsory: float, r: float = 1.0) -> Any:
    """Every figure of candidate ``j`` (row ``j`` of the table ``c``) for one GEMM, as ``gemm_costs``. Written out
    whole for ``grid`` and ``best`` (built from ``shared`` and ``grouped`` it costs ``grid`` ~1.5x); the search
    kernel uses the two parts, and the tests hold both to numpy's figures."""
    systolic = v[D_SYSTOLIC] > 0.0
    units = v[D_UNITS]
    bk = c[j, C_BK]
    resident = c[j, C_RESIDENT]
    mt = np.ceil(mm / bm)
    nt = np.ceil(nn / bn)
    ks = np.ceil(kk / s)
    steps = np.ceil(ks / bk)
    tiles = b * mt * nt * s
    reject = c[j, C_REJECT]
    if reject == 0.0 and s > 1.0 and ks < bk:
        reject = 4.0
    if reject == 0.0 and c[j, C_GRANULAR] > 0.0:
        reject = 5.0

    compute_step = c[j, C_COMPUTE_STEP]
    active = min(tiles, units)
    busy = min(max(tiles / (units * v[D_BLOCKS_PER_UNIT]), 1.0 / units), 1.0)
    share = min(v[D_SHARING], mt)  # tiles along M that share one load of their B panel
    load_step = (bm + bn * r / share) * bk * eb / (v[D_LOAD_BW] / max(active, 1.0))
    if systolic:
        step = max(compute_step, load_step) if stages > 1.0 else compute_step + load_step
    else:
        step = max(max(compute_step, load_step), c[j, C_SMEM_STEP])
    per_step = max(step, c[j, C_HIDDEN]) if stages > 1.0 else step + c[j, C_UNBUFFERED]
    t_tile = steps * per_step
    partials = 2.0 * s * b * mm * nn * 4.0 if s > 1.0 else 0.0
    compute = np.ceil(tiles / units) * t_tile + v[D_FILL] + partials / v[D_REDUCE_BW]

    tile_loads = b * eb * (mm * kk * nt + kk * nn * r * np.ceil(mt / share))
    if v[D_LLC_FED] == 0.0:
        dram = compulsory + tile_loads - b * eb * (mm * kk + kk * nn * r) + partials
        reuse = 0.0
    else:
        a_reads = 1.0 if min(g, mt) * bm * ks * eb <= v[D_LLC_HALF] else nt
        b_reads = 1.0 if ks * nn * eb * r <= v[D_LLC_HALF] else np.ceil(mt / g)
        dram = compulsory + b * eb * (mm * kk * (a_reads - 1.0) + kk * nn * r * (b_reads - 1.0))
        reuse = compulsory + tile_loads - b * eb * (mm * kk + kk * nn * r) + partials
    if v[D_IN_FLIGHT] > 0.0:
        hit = 1.0 - min(dram / max(reuse, 1.0), 1.0) if reuse > 0.0 else 0.0
        slab = (min(bm, mm) + min(bn, nn) * r / share) * min(bk, ks) * eb
        slabs = min(max(stages - 1.0, 1.0), steps)
        flight = min(tiles, units * resident) * slabs * slab
        loads = in_flight(flight, hit, v[D_DRAM_LATENCY], v[D_DRAM_PEAK_BW], v[D_LLC_LATENCY], v[D_LOADED_LATENCY])
        t_dram = v[D_DRAM_LATENCY] + dram / min(v[D_DRAM_BW], max((1.0 - hit) * loads, 1e-30))
    else:
        t_dram = v[D_DRAM_LATENCY] + dram / (v[D_DRAM_BW] * busy)
    t_reuse = v[D_LLC_LATENCY] + reuse / v[D_LLC_BW] if v[D_LLC_FED] > 0.0 else 0.0
    body = max(max(compute, t_dram), t_reuse)
    judged = body + (v[D_OVERHEAD] if s > 1.0 and r >= 1.0 else 0.0)
    if reject > 0.0:
        judged = np.inf
    smem = tile_loads if systolic else tiles * steps * c[j, C_SMEM_READS]
    waves = np.ceil(tiles / (units * resident))
    return (compute, t_dram, t_reuse, body, judged, dram, reuse, smem, c[j, C_FOOTPRINT], resident, waves, tiles,
            busy, reject)


@numba.njit(cache=True, error_model="numpy")
def grid(v: Any, bm: Any, bn: Any, bk: Any, stages: Any, split: Any, group: Any, batch: Any, m: Any, n: Any,
         k: Any, elem: Any, peak: Any, compulsory: Any, ratio: Any, out: Any, reject: Any) -> None:
    """Every figure of every (op, candidate) into ``out`` (fields x ops x candidates) and ``reject``."""
    cache = np.empty((TABLES_KEPT, bm.size, C_SIZE))
    keys = np.full((TABLES_KEPT, 3), np.nan)
    for i in range(batch.size):
        c = cache[table_for(v, bm, bn, bk, stages, elem[i], peak[i], ratio[i], cache, keys)]
        for j in range(bm.size):
            r = element(v, c, j, bm[j], bn[j], stages[j], split[j], group[j], batch[i], m[i], n[i], k[i], elem[i],
                        compulsory[i], ratio[i])
            for f in range(13):
                out[f, i, j] = r[f]
            reject[i, j] = int(r[13])


@numba.njit(inline="always", cache=True, error_model="numpy")
def _plain(x: float) -> bool:
    """A finite number of at least 1 (a GEMM dimension the bound's reasoning holds for)."""
    return x >= 1.0 and x - x == 0.0


@numba.njit(inline="always", cache=True, error_model="numpy")
def memory_floor(v: Any, c: Any, j: int, bm: float, bn: float, stages: float, s: float, b: float, mm: float,
                 nn: float, mt: float, nt: float, ks: float, eb: float, comp: float, r: float) -> float:
    """``gemm_floor.dram_floor`` of candidate ``j`` (split ``s``) of one GEMM (``b`` x ``mt`` x ``nt`` tiles,
    slices of ``ks``), its K-steps from the candidate table's BK."""
    bk = c[j, C_BK]
    return dram_floor(v, c[j, C_RESIDENT], bm, bn, stages, mm, nn, mt, b * mt * nt * s, np.ceil(ks / bk), bk, ks, eb,
                      comp, r)


@numba.njit(cache=True, error_model="numpy")
def best(v: Any, bm: Any, bn: Any, bk: Any, stages: Any, split: Any, group: Any, batch: Any, m: Any, n: Any,
         k: Any, elem: Any, peak: Any, compulsory: Any, ratio: Any, index: Any, out: Any) -> None:
    """The cheapest candidate of each op and its figures: equal times go to the smallest on-chip footprint, then
    the first index (``gemm_cost.tie_break``); a NaN time stops the scan at the first one, as ``np.argmin``.

    Bounded: the candidate with the least floor (below) is costed first, then only candidates whose bound does
    not exceed the best time so far (a bound above it cannot win or tie); the (time, footprint, index) order picks
    the same one as the plain scan. Ops with a dimension < 1 or not finite, a NaN time met, or no finite time take
    the plain scan."""
    cache = np.empty((TABLES_KEPT, bm.size, C_SIZE))
    keys = np.full((TABLES_KEPT, 3), np.nan)
    floor = np.empty(bm.size)
    codes, values, order, starts = candidate_codes(bm, bn, split, bk)
    per = scratch(codes, bm.size)
    for i in range(batch.size):
        c = cache[table_for(v, bm, bn, bk, stages, elem[i], peak[i], ratio[i], cache, keys)]
        b, mm, nn, kk, eb, comp, rb = batch[i], m[i], n[i], k[i], elem[i], compulsory[i], ratio[i]
        seed = -1
        if _plain(b) and _plain(mm) and _plain(nn) and _plain(kk) and comp - comp == 0.0:
            # a floor under the judged time from the compute term (+inf when rejected): ``element`` takes
            # max(compute, loads, latency) per K-step and the max of compute, DRAM and L2 times, and the same
            # operations on smaller non-negative factors round no higher (IEEE rounding is monotone); and a DRAM
            # floor when an L2 feeds the tiles and loads in flight bound DRAM's rate (``memory_floor``)
            bounded_memory = v[D_LLC_FED] > 0.0 and v[D_IN_FLIGHT] > 0.0 and comp >= 0.0
            # the first split's floors first: its least costed, the other splits' floors skip what cannot win
            seed = floors(v, c, bm, bn, stages, codes, values, order, starts, per, b, mm, nn, kk, eb, comp, rb,
                          bounded_memory, floor, 0, 1)
            if seed < 0:
                seed = floors(v, c, bm, bn, stages, codes, values, order, starts, per, b, mm, nn, kk, eb, comp, rb,
                              bounded_memory, floor, 1)
        plain = seed < 0
        chosen = 0
        r = element(v, c, 0, bm[0], bn[0], stages[0], split[0], group[0], b, mm, nn, kk, eb, comp, rb)
        if not plain:
            r = element(v, c, seed, bm[seed], bn[seed], stages[seed], split[seed], group[seed], b, mm, nn, kk, eb,
                        comp, rb)
            lowest, smallest, chosen = r[4], r[8], seed
            if lowest - lowest == 0.0 and split[seed] == values[2, 0]:  # the other splits' floors, cut at its time
                floors(v, c, bm, bn, stages, codes, values, order, starts, per, b, mm, nn, kk, eb, comp, rb,
                       bounded_memory, floor, 1, -1, lowest)
            if not np.isfinite(lowest):
                plain = True
            else:
                for j in range(bm.size):
                    if j == seed or floor[j] > lowest:
                        continue
                    candidate = element(v, c, j, bm[j], bn[j], stages[j], split[j], group[j], b, mm, nn, kk, eb,
                                        comp, rb)
                    judged = candidate[4]
                    if judged != judged:  # NaN: the plain scan
                        plain = True
                        break
                    if judged < lowest or (judged == lowest and (candidate[8] < smallest or (
                            candidate[8] == smallest and j < chosen))):
                        chosen, r, lowest, smallest = j, candidate, judged, candidate[8]
        if plain:
            chosen = 0
            lowest = np.inf
            smallest = np.inf
            r = element(v, c, 0, bm[0], bn[0], stages[0], split[0], group[0], b, mm, nn, kk, eb, comp, rb)
            for j in range(bm.size):
                candidate = element(v, c, j, bm[j], bn[j], stages[j], split[j], group[j], b, mm, nn, kk, eb, comp, rb)
                judged = candidate[4]
                if judged != judged:  # NaN: np.argmin stops at the first one
                    chosen, r = j, candidate
                    break
                if judged < lowest or (judged == lowest and candidate[8] < smallest):
                    chosen, r, lowest, smallest = j, candidate, judged, candidate[8]
        index[i] = chosen
        out[0, i], out[1, i], out[2, i], out[3, i] = r[0], r[1], r[2], r[3]
        out[4, i], out[5, i], out[6, i], out[7, i] = r[5], r[6], r[12], r[10]
        out[8, i], out[9, i], out[10, i] = r[11], r[9], r[8]


@numba.njit(cache=True, error_model="numpy")
def search(v: Any, c: Any, bm: Any, bn: Any, bk_bytes: Any, stages: Any, split: Any, group: Any, b: float, m: float,
           n: float, k: float, eb: float, compulsory: float, caps: Any, footprint_group: Any, groups: int, kept: Any,
           judged: Any, footprint: Any, waves: Any, reject_counts: Any, front: Any,
           r: float = 1.0) -> tuple[int, int]:
    """One GEMM against a whole space (``c``: its ``fill_candidates`` table): prune (a tile beyond ``caps``
    = (M, N, K-step) caps, split-K slices shorter than a K-step), cost the rest, count rejects by reason
    and find the (time, footprint) Pareto front. Writes the kept candidates' space index, time, footprint
    and waves; returns (kept, front size). Candidates that differ only in raster group (consecutive in
    ``full_space``) share their group-free terms (``shared``), computed once, and their figures when their DRAM
    bytes are equal too (a device without an L2 feeding the tiles, a panel that fits the L2)."""
    group_best = np.full(groups, np.inf)
    group_winner = np.zeros(groups, dtype=np.int64)
    count = 0
    last = -1  # the last candidate whose group-free terms were computed
    common = shared(v, c, 0, bm[0], bn[0], stages[0], split[0], b, m, n, k, eb, compulsory, r)
    e = grouped(v, c, 0, common, 0.0, split[0], r)
    last_dram = np.nan  # the DRAM bytes ``e`` was figured for (NaN: none yet for these terms)
    for j in range(bm.size):
        bk = c[j, C_BK]
        if bm[j] > caps[0] or bn[j] > caps[1] or bk > caps[2]:
            continue
        if split[j] != 1.0 and not np.ceil(k / split[j]) >= bk:
            continue
        if last < 0 or not (bm[j] == bm[last] and bn[j] == bn[last] and bk_bytes[j] == bk_bytes[last]
                            and stages[j] == stages[last] and split[j] == split[last]):
            common = shared(v, c, j, bm[j], bn[j], stages[j], split[j], b, m, n, k, eb, compulsory, r)
            last = j
            last_dram = np.nan
        dram = group_dram(v, common, bm[j], group[j], b, m, n, k, eb, compulsory, r)
        if dram != last_dram:  # the same terms and DRAM bytes give the same figures (the raster group is
            e = grouped(v, c, j, common, dram, split[j], r)  # in no other term)
            last_dram = dram
        kept[count] = j
        judged[count] = e[4]
        footprint[count] = e[8]
        waves[count] = e[11] / (v[D_UNITS] * e[9])
        reject_counts[int(e[13])] += 1
        g = footprint_group[j]
        if e[4] < group_best[g]:  # finite only: rejected candidates are inf; first of equals (same footprint) wins
            group_best[g] = e[4]
            group_winner[g] = count
        count += 1
    on_front = 0
    running = np.inf
    for g in range(groups):
        if group_best[g] < running:
            front[on_front] = group_winner[g]
            on_front += 1
        running = min(running, group_best[g])
    return count, on_front
