"""Score one GEMM against a schedule space for ``search``: prune, cost, count rejects, Pareto front.

Two implementations with the same answers: ``score_numpy`` (the reference, and the one the
sampled and time-budgeted searches use) and ``score_compiled`` (one pass of the numba kernel,
with the device- and candidate-set-only arrays — sorted tile sizes for pruning, footprint groups
for the Pareto front — computed once per (space, element size, device MMA shape) and cached).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.machine import MachineTables
from perfmodel.ops.base import FloatArray
from perfmodel.search import gemm_kernel
from perfmodel.search.gemm_cost import ACCUMULATOR_BYTES, REJECT_REASONS, GemmCosts, gemm_costs
from perfmodel.search.gemm_space import GemmCandidates, is_systolic

IntArray = np.ndarray[Any, np.dtype[np.intp]]


@dataclass
class GemmScores:
    """Per evaluated candidate (``keep``: its index in the space): time in s, on-chip footprint in bytes,
    waves; rejects counted by reason; ``front``: positions (into ``keep``) on the Pareto front; ``pruned``:
    candidates of the space not worth costing."""

    keep: IntArray
    judged_s: FloatArray
    footprint_bytes: FloatArray
    waves: FloatArray
    rejected: dict[str, int]
    front: IntArray
    pruned: int


def k_steps(space: GemmCandidates, elem_bytes: float, t: MachineTables) -> FloatArray:
    """BK in elements of each candidate for ``elem_bytes``-byte operands (a multiple of the MMA K)."""
    out: FloatArray = np.maximum(np.ceil(space.bk_bytes / elem_bytes / t.mma_k) * t.mma_k, t.mma_k)
    return out


def prune(space: GemmCandidates, m: float, n: float, k: float, elem: float, t: MachineTables) -> IntArray:
    """Candidates worth costing: no tile dimension beyond the smallest candidate that covers the
    problem's (larger ones only add padding), no split-K slice shorter than one K-step."""
    def cap(values: FloatArray, size: float) -> float:
        covering = values[values >= size]
        return float(covering.min()) if covering.size else float(values.max())

    bk = k_steps(space, elem, t)
    keep = (space.bm <= cap(space.bm, m)) & (space.bn <= cap(space.bn, n)) & (bk <= cap(bk, k))
    keep &= (space.split == 1) | (np.ceil(k / space.split) >= bk)
    return np.nonzero(keep)[0]


def pareto(time_s: FloatArray, footprint: FloatArray) -> IntArray:
    """Indices on the front of (time, footprint), both minimised, sorted by footprint.

    Footprints take few distinct values: the fastest candidate of each footprint first, then a
    running minimum over footprints in increasing order."""
    values, inverse = np.unique(footprint, return_inverse=True)
    best_time = np.full(values.size, np.inf)
    np.minimum.at(best_time, inverse, time_s)
    winner = np.full(values.size, -1, dtype=np.intp)
    is_best = time_s == best_time[inverse]
    winner[inverse[is_best][::-1]] = np.nonzero(is_best)[0][::-1]  # first index reaching the minimum
    before = np.concatenate(([np.inf], np.minimum.accumulate(best_time)[:-1]))
    front: IntArray = winner[best_time < before]
    return front


def rejected_by_reason(reject: np.ndarray[Any, np.dtype[np.int64]]) -> dict[str, int]:
    """Rejected candidates counted per reason (reasons in code order)."""
    counts = np.bincount(reject, minlength=len(REJECT_REASONS))
    return {REJECT_REASONS[r]: int(counts[r]) for r in range(1, len(REJECT_REASONS)) if counts[r] > 0}


def scores_of(costs: GemmCosts, keep: IntArray, t: MachineTables, pruned: int) -> GemmScores:
    """``GemmScores`` from a costed grid of one GEMM (row 0) over the candidates ``keep``, put in space order so that
    the Pareto front's ties go to the first space index, as the search's ranking (``gemm_cost.tie_break``)."""
    order = np.argsort(keep, kind="stable")
    shape = costs.judged_s.shape
    judged = costs.judged_s[0][order]
    footprint = np.broadcast_to(costs.footprint_bytes, shape)[0][order]
    units = t.gemm_units or t.units
    waves = (np.broadcast_to(costs.tiles, shape)[0] / (units * np.broadcast_to(costs.resident, shape)[0]))[order]
    keep = keep[order]
    idx = np.nonzero(np.isfinite(judged))[0]
    return GemmScores(keep, judged, footprint, waves, rejected_by_reason(costs.reject[0]),
                      idx[pareto(judged[idx], footprint[idx])], pruned)


def score_numpy(t: MachineTables, space: GemmCandidates, keep: IntArray, pruned: int, b: float, m: float,
                n: float, k: float, elem: float, peak: float, compulsory: float, b_ratio: float = 1.0) -> GemmScores:
    """Cost the candidates ``keep`` of ``space`` with ``gemm_costs`` (any order, any subset); ``b_ratio``: B's
    stored bytes per element over ``elem`` (weight-only quantized B)."""
    one = np.ones(1)
    costs = gemm_costs(t, space.take(keep), one * b, one * m, one * n, one * k, one * elem, one * peak,
                       one * compulsory, one * b_ratio)
    return scores_of(costs, keep, t, pruned)


@dataclass(frozen=True)
class _SpaceTables:
    """Per (device, space, element size, peak): sorted distinct tile sizes, footprint groups and the
    kernel's per-candidate terms."""

    space: GemmCandidates
    bm: FloatArray
    bn: FloatArray
    bk: FloatArray
    footprint_group: np.ndarray[Any, np.dtype[np.int64]]
    groups: int
    terms: FloatArray


_TABLES: dict[tuple[int, bytes, float, float, float], _SpaceTables] = {}


def _space_tables(t: MachineTables, space: GemmCandidates, v: FloatArray, elem: float, peak: float,
                  b_ratio: float = 1.0) -> _SpaceTables:
    from perfmodel.search import gemm_jit
    from perfmodel.search.gemm_floor import C_SIZE

    systolic = is_systolic(t)
    key = (id(space), v.tobytes(), elem, peak, b_ratio)
    found = _TABLES.get(key)
    if found is not None and found.space is space:
        return found
    bk = k_steps(space, elem, t)
    footprint = (space.bm + space.bn * b_ratio) * bk * elem * space.stages
    if systolic:
        footprint = footprint + space.bm * space.bn * ACCUMULATOR_BYTES
    values, group = np.unique(footprint, return_inverse=True)
    terms = np.empty((space.size, C_SIZE))
    bm, bn, bk_bytes, stages = gemm_kernel.space_arrays(space)[:4]
    gemm_jit.fill_candidates(v, bm, bn, bk_bytes, stages, elem, peak, terms, b_ratio)
    made = _SpaceTables(space, np.unique(space.bm), np.unique(space.bn), np.unique(bk),
                        group.astype(np.int64).ravel(), int(values.size), terms)
    if len(_TABLES) > 256:
        _TABLES.clear()
    _TABLES[key] = made
    return made


def _cap(sorted_values: FloatArray, size: float) -> float:
    """The smallest value >= size, else the largest (as ``prune``'s cap)."""
    at = int(np.searchsorted(sorted_values, size, side="left"))
    return float(sorted_values[min(at, sorted_values.size - 1)])


def score_compiled(t: MachineTables, space: GemmCandidates, b: float, m: float, n: float, k: float,
                   elem: float, peak: float, compulsory: float, b_ratio: float = 1.0) -> GemmScores:
    """``score_numpy(t, space, prune(...), ...)`` in one pass of the compiled kernel."""
    from perfmodel.search import gemm_jit

    v = gemm_kernel.device_vector(t)
    tab = _space_tables(t, space, v, elem, peak, b_ratio)
    caps = np.array([_cap(tab.bm, m), _cap(tab.bn, n), _cap(tab.bk, k)])
    size = space.size
    kept = np.empty(size, dtype=np.intp)
    judged, footprint, waves = np.empty(size), np.empty(size), np.empty(size)
    reject = np.zeros(len(REJECT_REASONS), dtype=np.int64)
    front = np.empty(tab.groups, dtype=np.intp)
    count, on_front = gemm_jit.search(v, tab.terms, *gemm_kernel.space_arrays(space), b, m, n, k, elem, compulsory,
                                      caps, tab.footprint_group, tab.groups, kept, judged, footprint, waves, reject,
                                      front, b_ratio)
    rejected = {REJECT_REASONS[r]: int(reject[r]) for r in range(1, len(REJECT_REASONS)) if reject[r] > 0}
    return GemmScores(kept[:count], judged[:count], footprint[:count], waves[:count], rejected, front[:on_front],
                      size - count)
