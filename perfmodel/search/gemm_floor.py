"""The per-candidate floors of ``gemm_jit.best``'s bounded scan, with the terms shared by many candidates computed
once per op (branch speed31).

``best`` costs first the candidate whose floor under ``element``'s judged time is least, then only candidates
whose floor does not exceed the best time so far; the floors were ~55 % of its time on the all-distinct table
(85 compact candidates per GEMM, ~9 of them costed). A candidate's floor reads its tile counts along M and N
(ceil(M / BM), ceil(N / BN)), its split-K slice ceil(K / split), its K-steps ceil(slice / BK) and split-K's
partial sums, and the compact space holds 4 BMs, 4 BNs, 5 splits and 2 K-step widths: each of those is figured
once per distinct value per op (per pair for the K-steps) and read per candidate; and the candidates are
visited by (split, K-step width), so a split whose slice is shorter than a K-step (every split of a K = 16 GEMM)
rejects its candidates at once. The same operations on the same operands in the same order as before
(``memory_floor`` included), so the same floors to the bit, and the same seed (ties to the first index).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from perfmodel.search import gemm_kernel
from perfmodel.search.gemm_kernel import (
    D_DRAM_BW,
    D_DRAM_LATENCY,
    D_FILL,
    D_OVERHEAD,
    D_REDUCE_BW,
    D_SHARING,
    D_UNITS,
)
from perfmodel.search.jit_cache import drop_stale

# columns of the per-candidate table (``gemm_jit.fill_candidates``: terms that depend on the device, the candidate,
# the element size and the peak only: computed once per op dtype, not per op)
(C_BK, C_FOOTPRINT, C_RESIDENT, C_REJECT, C_GRANULAR, C_COMPUTE_STEP, C_SMEM_READS, C_SMEM_STEP,
 C_HIDDEN, C_UNBUFFERED, C_STEP_FLOOR, C_STEP_FULL, C_SIZE) = range(13)

WAVE_SLACK = 1e-12  # 1 / units taken this much low in ``floors``' wave count (a floor: never a wave more)
FLOOR_SLACK = 1e-6  # relative room for the few roundings between ``memory_floor``'s bound and ``element``'s figure


# its kernels freeze gemm_kernel's constants: a change there alone must not load stale machine code
drop_stale(__file__, (str(gemm_kernel.__file__),))


@numba.njit(inline="always", cache=True, error_model="numpy")
def dram_floor(v: Any, resident: float, bm: float, bn: float, stages: float, mm: float, nn: float, mt: float,
               tiles: float, steps: float, kstep: float, ks: float, eb: float, comp: float, r: float) -> float:
    """A floor under ``gemm_jit.element``'s DRAM time (s) for one candidate (``resident`` CTAs a unit, tile
    ``bm`` x ``bn``, ``stages``) of one GEMM (``mm`` x ``nn``, ``mt`` tiles along M, ``tiles`` in all, ``steps``
    K-steps of ``kstep`` over a slice of ``ks``, ``eb`` bytes an element, ``comp`` compulsory bytes, B's element
    ``r`` x A's) on a device whose L2 feeds the tiles and whose loads in flight bound DRAM's rate: its DRAM bytes
    are ``comp`` plus non-negative terms; its rate, min(DRAM bandwidth, (1 - hit) x ``in_flight``), is at most
    flight / DRAM latency (``in_flight``'s root is at most flight / its linear term, which is at least (1 - hit) x
    DRAM latency); the same flight bytes as ``element``, the bound loosened by ``FLOOR_SLACK``."""
    share = min(v[D_SHARING], mt)
    slab = (min(bm, mm) + min(bn, nn) * r / share) * min(kstep, ks) * eb
    slabs = min(max(stages - 1.0, 1.0), steps)
    flight = min(tiles, v[D_UNITS] * resident) * slabs * slab
    rate = min(v[D_DRAM_BW], max(flight / v[D_DRAM_LATENCY] * (1.0 + FLOOR_SLACK), 1e-30))
    return float((v[D_DRAM_LATENCY] + comp / rate) * (1.0 - FLOOR_SLACK))


@numba.njit(cache=True, error_model="numpy")
def distinct(x: Any) -> Any:
    """The sorted distinct values of ``x`` and each element's index among them."""
    values = np.unique(x)
    return values, np.searchsorted(values, x)


@numba.njit(cache=True, error_model="numpy")
def first_of(codes: Any, count: int) -> Any:
    """For each code below ``count``, the first position holding it."""
    first = np.zeros(count, dtype=np.int64)
    seen = np.zeros(count, dtype=np.bool_)
    for j in range(codes.size):
        if not seen[codes[j]]:
            seen[codes[j]] = True
            first[codes[j]] = j
    return first


@numba.njit(inline="always", cache=True, error_model="numpy")
def floors(v: Any, c: Any, bm: Any, bn: Any, stages: Any, codes: Any, values: Any, order: Any, starts: Any,
           per: Any, b: float, mm: float, nn: float, kk: float, eb: float, comp: float, rb: float,
           bounded_memory: bool, floor: Any, first: int = 0, last: int = -1, cutoff: float = np.inf) -> int:
    """Each candidate's floor into ``floor`` (+inf when rejected) and the first with the least one (-1: none).

    ``codes``, ``values``, ``order`` and ``starts`` as ``candidate_codes`` gives them (the table's BK depends on
    the K-step width and the element size only, so one candidate of each width gives it); ``per`` (``scratch``):
    room for the per-op tile counts along N, and per (BM, BN) pair the tiles of one split and the flight's slab
    width. A (split, K-step width) whose split-K slice is
    shorter than a K-step rejects all its candidates at once.

    Only the splits ``first`` to ``last`` (the distinct splits' indices, ``last`` -1: to the end); ``first`` 0
    fills the per-op terms and sets every floor to +inf first. A split whose floor under all its candidates (fill,
    split-K reduction, DRAM at full rate, launch) exceeds ``cutoff`` (s) is skipped: its floors stay +inf."""
    ubm, ubn, usplit = values[0], values[1], values[2]
    nbm, nbn, nsplit, nbk = codes[4, 0], codes[4, 1], codes[4, 2], codes[4, 3]
    nt_of, pair_tiles, pair_slab = per[0], per[1], per[2]
    for q in range(nbn if first == 0 else 0):
        nt_of[q] = np.ceil(nn / ubn[q])
    # per (BM, BN): the tiles of one split and the flight's slab width, as ``dram_floor`` figures them
    for a in range(nbm if first == 0 else 0):
        mt = np.ceil(mm / ubm[a])
        share = min(v[D_SHARING], mt)
        for q in range(nbn):
            pair_tiles[a * nbn + q] = b * mt * nt_of[q]
            pair_slab[a * nbn + q] = min(ubm[a], mm) + min(ubn[q], nn) * rb / share
    if first == 0:
        floor[:] = np.inf
    least = np.inf
    seed = -1
    units = v[D_UNITS]
    # 1 / units a little low: ceil(tiles x it) is ceil(tiles / units) (no lower by more than one unit in 1e12)
    per_unit = 1.0 / units * (1.0 - WAVE_SLACK)
    # ``dram_floor`` at DRAM's full rate, and the flight from which its rate is taken as that (from there on the
    # in-flight bound is no lower than the bandwidth, so the floor is the full-rate one without its two divisions)
    full_rate = (v[D_DRAM_LATENCY] + comp / v[D_DRAM_BW]) * (1.0 - FLOOR_SLACK)
    full_flight = v[D_DRAM_BW] * v[D_DRAM_LATENCY]
    for a in range(first, nsplit if last < 0 else last):
        s = usplit[a]
        ks = np.ceil(kk / s)
        partials = 2.0 * s * b * mm * nn * 4.0 if s > 1.0 else 0.0
        partial = partials / v[D_REDUCE_BW]
        launch = v[D_OVERHEAD] if s > 1.0 and rb >= 1.0 else 0.0  # ``element``'s split launch, as there
        if max(v[D_FILL] + partial, full_rate if bounded_memory else 0.0) + launch > cutoff:
            continue  # each candidate's floor adds non-negative terms to these, and rounds no lower
        for q in range(nbk):
            kstep = c[codes[5, q], C_BK]
            if s > 1.0 and ks < kstep:  # every candidate of this split and K-step width: rejected
                continue
            steps = np.ceil(ks / kstep)
            depth = min(kstep, ks) * eb
            for t in range(starts[a * nbk + q], starts[a * nbk + q + 1]):
                j = order[t]
                if c[j, C_REJECT] > 0.0 or c[j, C_GRANULAR] > 0.0:
                    continue
                pair = codes[0, j] * nbn + codes[1, j]
                tiles = pair_tiles[pair] * s
                least_step = c[j, C_STEP_FULL] if tiles >= units else c[j, C_STEP_FLOOR]
                x = np.ceil(tiles * per_unit) * (steps * least_step) + v[D_FILL] + partial
                if bounded_memory:  # ``dram_floor``, its terms taken from above
                    slabs = min(max(stages[j] - 1.0, 1.0), steps)
                    flight = min(tiles, units * c[j, C_RESIDENT]) * slabs * (pair_slab[pair] * depth)
                    if flight * (1.0 + FLOOR_SLACK) >= full_flight:
                        x = max(x, full_rate)
                    else:
                        rate = max(flight / v[D_DRAM_LATENCY] * (1.0 + FLOOR_SLACK), 1e-30)
                        x = max(x, (v[D_DRAM_LATENCY] + comp / rate) * (1.0 - FLOOR_SLACK))
                x = x + launch
                floor[j] = x
                if x < least or (x == least and j < seed):  # the first of the least, in the space's order
                    least = x
                    seed = j
    return seed


@numba.njit(inline="always", cache=True, error_model="numpy")
def scratch(codes: Any, size: int) -> Any:
    """``floors``' ``per`` for a space of ``size`` candidates coded as ``codes``: 3 rows, as long as the space and
    as its (BM, BN) pairs."""
    return np.empty((3, max(size, codes[4, 0] * codes[4, 1], 1)))


@numba.njit(cache=True, error_model="numpy")
def candidate_codes(bm: Any, bn: Any, split: Any, bk_bytes: Any) -> Any:
    """``floors``' ``codes`` (6 x candidates: rows 0-3 each candidate's index among the distinct BMs, BNs, splits
    and K-step widths, row 4 their four counts, row 5 the first candidate of each width), ``values`` (3 x
    candidates: the distinct BMs, BNs and splits), ``order`` (the candidates by split, then width, then index) and
    ``starts`` (where each (split, width) begins in ``order``, one more at the end)."""
    size = bm.size
    codes = np.zeros((6, max(size, 4)), dtype=np.int64)
    values = np.zeros((3, max(size, 1)))
    _code(bm, 0, codes, values)
    _code(bn, 1, codes, values)
    _code(split, 2, codes, values)
    _code(bk_bytes, 3, codes, values)
    first = first_of(codes[3, :size], codes[4, 3])
    codes[5, :first.size] = first
    pairs = codes[4, 2] * codes[4, 3]
    pair = codes[2, :size] * codes[4, 3] + codes[3, :size]
    order = np.argsort(pair, kind="mergesort")  # stable: index order within a pair
    starts = np.zeros(pairs + 1, dtype=np.int64)
    for j in range(size):
        starts[pair[j] + 1] += 1
    for p in range(pairs):
        starts[p + 1] += starts[p]
    return codes, values, order, starts


@numba.njit(inline="always", cache=True, error_model="numpy")
def _code(x: Any, row: int, codes: Any, values: Any) -> None:
    """Row ``row`` of ``candidate_codes``' ``codes`` (and of ``values`` for the first three) from the column ``x``."""
    distinct_values, index = distinct(x)
    codes[row, :x.size] = index
    codes[4, row] = distinct_values.size
    if row < 3:
        values[row, :distinct_values.size] = distinct_values
