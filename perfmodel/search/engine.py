"""``perfmodel.search``: the best schedule of one op on one device, its top-k and Pareto front.

GEMM-like ops (matmul, bmm, conv2d as implicit GEMM, the GEMMs of attention) search the full
schedule space of ``gemm_space.full_space``: candidates are pruned where they cannot help
(tiles far larger than the problem, a split-K whose slices are shorter than one K-step), the
rest costed at once in numpy. With ``budget`` (a number of evaluations) a larger space is
sampled with a seeded generator, so the same seed gives the same answer. Other ops have a
fixed schedule today and report a space of one.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfmodel.cost import Cost
from perfmodel.hardware import Hardware
from perfmodel.machine import MachineTables, tables
from perfmodel.ops import Op, make_op
from perfmodel.ops.base import DTYPES, FloatArray, Work
from perfmodel.roofline import HardwareLike, OpLike, evaluate, resolve_hardware, work_of
from perfmodel.search import gemm_kernel, work_memo
from perfmodel.search.attention_cost import attention_costs, attention_space
from perfmodel.search.gemm_cost import GemmCosts, gemm_costs, launch_overhead_s, stored_b_ratio
from perfmodel.search.gemm_scoring import GemmScores, pareto, prune, score_compiled, score_numpy, scores_of
from perfmodel.search.gemm_space import GemmCandidates, full_space
from perfmodel.search.stream_spaces import SPACES, describe
from perfmodel.units import format_bytes, format_time_s

CACHE_SIZE = 4096
TIME_CHUNK = 2048  # candidates costed between two looks at the clock


@dataclass
class SearchResult:
    """The outcome of one search (times in s, footprints in bytes)."""

    op_kind: str
    hardware_id: str
    hardware_hash: str
    best: Cost
    top_k: list[dict[str, float]]
    pareto: list[dict[str, float]]
    space_size: int
    evaluated: int
    pruned: int
    rejected: dict[str, int]
    search_time_s: float
    explanation: str
    seed: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["best"] = self.best.to_dict()
        return out


_CACHE: OrderedDict[tuple[Any, ...], SearchResult] = OrderedDict()


def _distinct(space: GemmCandidates, index: np.ndarray[Any, np.dtype[np.intp]],
              ranked: np.ndarray[Any, np.dtype[np.intp]], count: int) -> np.ndarray[Any, np.dtype[np.intp]]:
    """The first ``count`` of ``ranked`` (positions into ``index``, the candidates' space indices) that
    differ in tile, stages or split (the raster group changes nothing when the panels fit the cache, and
    would fill the list with ties)."""
    seen: set[tuple[float, ...]] = set()
    keep: list[int] = []
    for i in ranked:
        j = index[i]
        key = (space.bm[j], space.bn[j], space.bk_bytes[j], space.stages[j], space.split[j])
        if key not in seen:
            seen.add(key)
            keep.append(int(i))
            if len(keep) == count:
                break
    return np.array(keep, dtype=np.intp)


def _ranked(time_s: np.ndarray[Any, np.dtype[np.float64]], footprint_bytes: np.ndarray[Any, np.dtype[np.float64]],
            index: np.ndarray[Any, np.dtype[np.intp]], head: int) -> np.ndarray[Any, np.dtype[np.intp]]:
    """Positions of at least the ``head`` fastest candidates (every one tied with the last of them too), ranked by
    the one tie rule of ``gemm_cost.tie_break``: time in s, then on-chip footprint in bytes, then space index."""
    if head < time_s.size:
        cut = _kth_smallest(time_s, head - 1)
        shortlist = np.nonzero(time_s <= cut)[0]
    else:
        shortlist = np.arange(time_s.size)
    order = np.lexsort((index[shortlist], footprint_bytes[shortlist], time_s[shortlist]))
    ranked: np.ndarray[Any, np.dtype[np.intp]] = shortlist[order]
    return ranked


SAMPLE_STEP = 8  # _kth_smallest: every 8th value sampled for a bound on the k-th smallest


def _kth_smallest(values: np.ndarray[Any, np.dtype[np.float64]], k: int) -> float:
    """``np.partition(values, k)[k]`` (no NaN in ``values``), from fewer values: a bound ``v`` read off every
    ``SAMPLE_STEP``-th value (its 2(k + 1)/step-th smallest), and when at least k + 1 values are <= v, the k-th
    smallest of those alone, which is the k-th smallest of all (every smaller value is among them); else the
    whole partition. numpy's partition of a search's ~12,500 scores, many of them tied, took ~135 us of a ~1 ms
    search; the sample, the count and the small partition ~4x less."""
    sample = values[::SAMPLE_STEP]
    at = 2 * (k + 1) // SAMPLE_STEP
    if at < sample.size:
        bound = np.partition(sample, at)[at]
        low = values[values <= bound]
        if low.size > k:
            return float(np.partition(low, k)[k])
    return float(np.partition(values, k)[k])


ROW_KEYS = ("tile_m", "tile_n", "tile_k", "stages", "split_k", "raster_group", "time_s", "footprint_bytes", "waves")


def _rows(space: GemmCandidates, i: np.ndarray[Any, np.dtype[np.intp]], elem: float, t: MachineTables,
          time_s: FloatArray, footprint: FloatArray, waves: FloatArray) -> list[dict[str, float]]:
    """The listed rows of candidates ``i`` (space indices): tile sizes, stages, split, raster group, time in s,
    on-chip footprint in bytes, waves; built column by column (one ``tolist`` each, not a ``float`` per value)."""
    bk = np.maximum(np.ceil(space.bk_bytes[i] / elem / t.mma_k) * t.mma_k, t.mma_k)
    columns = (space.bm[i], space.bn[i], bk, space.stages[i], space.split[i], space.group[i], time_s, footprint, waves)
    listed = [np.asarray(c, dtype=np.float64).tolist() for c in columns]
    return [{"tile_m": bm, "tile_n": bn, "tile_k": tk, "stages": st, "split_k": sp, "raster_group": gr,
             "time_s": ts, "footprint_bytes": fp, "waves": wv}  # ROW_KEYS, as a display (faster than dict(zip))
            for bm, bn, tk, st, sp, gr, ts, fp, wv in zip(*listed, strict=True)]


def _search_attention(hw: Hardware, t: MachineTables, op: Op, work: Work, top_k: int, seed: int,
                      start: float) -> SearchResult:
    """Flash attention: every (Q tile, KV tile, stages, KV split) candidate costed at once."""
    space = attention_space(t)
    a = work.attention[0:1]
    costs = attention_costs(
        t, space, bh=a[:, 0], group=a[:, 1], sq=a[:, 2], skv=a[:, 3], d=a[:, 4], dv=a[:, 5], causal=a[:, 6],
        elem=np.array([DTYPES[int(work.matrix_dtype[0])].bytes]),
        peak=np.array([t.matrix_peak[int(work.matrix_dtype[0])]]),
        vector_peak=np.array([t.vector_peak[int(work.vector_dtype[0])]]),
        compulsory=work.dram_bytes[:1], kv_bytes=a[:, 7], fwd=a[:, 8], bwd=a[:, 9])
    judged = np.asarray(costs["judged_s"])[0] + launch_overhead_s(t, work)  # listed as predict reports them
    footprint = np.broadcast_to(costs["footprint_bytes"], (1, space.size))[0]
    valid = np.isfinite(judged)
    cost = evaluate(work, [op], hw, space=full_space(t))[0]  # the full attention space, as ``predict`` and the rows
    materialized = make_op({**op.to_dict(), "implementation": "materialized"})
    unfused = evaluate(work_of([materialized], float(hw.dram.access_granularity_bytes or 1)), [materialized], hw)[0]
    note = (f"materialized variant (S and P through {hw.dram.name}): {format_time_s(unfused.time_s)}, "
            f"{unfused.time_s / cost.time_s:.1f}x the fused kernel")

    def row(i: int) -> dict[str, float]:
        return {"tile_q": float(space.bq[i]), "tile_kv": float(space.bkv[i]), "stages": float(space.stages[i]),
                "split_kv": float(space.split[i]), "time_s": float(judged[i]), "footprint_bytes": float(footprint[i])}

    order = np.lexsort((np.arange(space.size), footprint, np.where(valid, judged, np.inf)))
    idx = np.nonzero(valid)[0]
    front = idx[pareto(judged[idx], footprint[idx])]
    s = cost.schedule
    words = (f"{s['tile_m']:g}x{s['tile_n']:g} Q x KV tiles, {s['stages']:g} stages"
             + (f", KV split {s['split_k']:g}" if s.get("split_k", 1) > 1 else "")
             + f", {s['tiles']:g} CTAs on {hw.units} {hw.unit_name}s, {format_time_s(cost.time_s)}"
             + f", bound by {cost.bound}")
    return SearchResult(
        op_kind=op.kind, hardware_id=hw.id, hardware_hash=hw.content_hash, best=cost,
        top_k=[row(int(i)) for i in order[: max(top_k, 1)] if valid[i]], pareto=[row(int(i)) for i in front],
        space_size=space.size, evaluated=space.size, pruned=0,
        rejected={"smem_or_registers": int((~valid).sum())} if (~valid).any() else {},
        search_time_s=time.perf_counter() - start, explanation=words, seed=seed, notes=[note],
    )


def _search_stream(hw: Hardware, t: MachineTables, op: Op, work: Work, top_k: int, seed: int,
                   start: float) -> SearchResult:
    """Bandwidth-bound families: every candidate of the op's space costed by the roofline at once."""
    space = SPACES[op.kind](t, op, work)
    batch = evaluate(space.work, [op] * space.size, hw)
    times = batch.time_s
    order = np.lexsort((np.arange(space.size), space.footprint_bytes, times))
    best = int(order[0])
    cost = batch[best]
    cost.schedule = {**{k: float(v[best]) for k, v in space.params.items()},
                     "footprint_bytes": float(space.footprint_bytes[best])}

    def row(i: int) -> dict[str, float]:
        return {**{k: float(v[i]) for k, v in space.params.items()}, "time_s": float(times[i]),
                "footprint_bytes": float(space.footprint_bytes[i])}

    front = pareto(times, space.footprint_bytes)
    return SearchResult(
        op_kind=op.kind, hardware_id=hw.id, hardware_hash=hw.content_hash, best=cost,
        top_k=[row(int(i)) for i in order[: max(top_k, 1)]], pareto=[row(int(i)) for i in front],
        space_size=space.size, evaluated=space.size, pruned=0, rejected={},
        search_time_s=time.perf_counter() - start,
        explanation=f"{describe(space, best)}: {format_time_s(cost.time_s)}, bound by {cost.bound}", seed=seed,
    )


def explain(cost: Cost, hw: Hardware) -> str:
    """The chosen schedule in words, e.g. '128x256x64 tiles, 3 stages, 1.6 waves on 132 SMs, bound by HBM3'."""
    s = cost.schedule
    if "tile_m" not in s:
        return f"fixed schedule, {format_time_s(cost.time_s)}, bound by {cost.bound}"
    parts = [f"{s['tile_m']:g}x{s['tile_n']:g}x{s.get('tile_k', 0):g} tiles"]
    parts.append(f"{s.get('stages', 1):g} stage{'s' if s.get('stages', 1) != 1 else ''}")
    if s.get("split_k", 1) > 1:
        parts.append(f"split-K {s['split_k']:g}")
    tiles = s.get("tiles", 0.0)
    units = tables(hw).gemm_units or hw.units  # Gaudi's GEMM tiles run on its MMEs, not its TPCs
    unit_name = hw.unit_name if units == hw.units else next(e.name for e in hw.engines_of("matrix"))
    per_wave = units * s.get("resident_tiles", 1.0)
    parts.append(f"{tiles / per_wave:.1f} waves on {units} {unit_name}s")
    if "footprint_bytes" in s:
        parts.append(f"{format_bytes(s['footprint_bytes'])} on chip per tile")
    return ", ".join(parts) + f", {format_time_s(cost.time_s)}, bound by {cost.bound}"


def search(hardware: HardwareLike, op: OpLike, top_k: int = 5, budget: int | None = None,
           seed: int = 0, cache: bool = True, time_budget_s: float | None = None) -> SearchResult:
    """Search the schedule space of ``op`` on ``hardware``; results are cached per (op, hardware hash).

    ``budget``: at most this many candidates (a seeded sample); ``time_budget_s``: stop costing
    chunks of candidates when the time is spent and return the best so far.
    """
    hw = resolve_hardware(hardware)
    built = make_op(op)
    key = (built, hw.content_hash, top_k, budget, seed, time_budget_s)
    if cache and key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    start = time.perf_counter()
    result = _search(hw, built, top_k, budget, seed, start, time_budget_s)
    _CACHE[key] = result
    if len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return result


def _search(hw: Hardware, op: Op, top_k: int, budget: int | None, seed: int, start: float,
            time_budget_s: float | None = None) -> SearchResult:
    t = tables(hw)
    granularity = float(hw.dram.access_granularity_bytes or 1)
    work = work_memo.work_of_one(op, granularity)
    space = full_space(t)
    gemm = bool(work.gemm_batch[0].sum() > 0 and work.flops_matrix[0] > 0)
    if work.attention[0, 0] > 0:
        return _search_attention(hw, t, op, work, top_k, seed, start)
    if not gemm and op.kind in SPACES:
        return _search_stream(hw, t, op, work, top_k, seed, start)
    if not gemm:
        cost = evaluate(work, [op], hw)[0]
        return SearchResult(op.kind, hw.id, hw.content_hash, cost, [], [], 1, 1, 0, {}, time.perf_counter() - start,
                            explain(cost, hw), seed, ["no tiling space for this op family yet: fixed schedule"])
    slot = int(np.argmax(2.0 * work.gemm_batch[0] * work.gemm_m[0] * work.gemm_n[0] * work.gemm_k[0]))
    b, m, n, k = (float(getattr(work, f)[0, slot]) for f in ("gemm_batch", "gemm_m", "gemm_n", "gemm_k"))
    elem = DTYPES[int(work.matrix_dtype[0])].bytes
    gemm_args = (b, m, n, k, elem, float(t.matrix_peak[int(work.matrix_dtype[0])]), float(work.dram_bytes[0]),
                 stored_b_ratio(work, slot, elem))
    if budget is None and time_budget_s is None and gemm_kernel.use_kernel(space.size):
        scores = score_compiled(t, space, *gemm_args)
    else:
        scores = _score_sampled(t, space, gemm_args, budget, seed, start, time_budget_s)
    judged = scores.judged_s
    valid = np.isfinite(judged)
    if not valid.any():
        raise ValueError(f"no schedule of {op.kind} fits {hw.id}: rejected {scores.rejected}")
    scored = np.where(valid, judged, np.inf)
    ranked = _ranked(scored, scores.footprint_bytes, scores.keep, max(top_k, 1) * 64)
    order = _distinct(space, scores.keep, ranked[valid[ranked]], max(top_k, 1))
    best_space = space.take(scores.keep[order[:1]])
    cost = evaluate(work, [op], hw, space=best_space if work.gemm_batch[0].astype(bool).sum() == 1 else space)[0]

    launch = launch_overhead_s(t, work)

    def rows(at: np.ndarray[Any, np.dtype[np.intp]]) -> list[dict[str, float]]:
        return _rows(space, scores.keep[at], elem, t, judged[at] + launch, scores.footprint_bytes[at],
                     scores.waves[at])

    evaluated = int(scores.keep.size)
    return SearchResult(
        op_kind=op.kind, hardware_id=hw.id, hardware_hash=hw.content_hash, best=cost,
        top_k=rows(order), pareto=rows(np.asarray(scores.front, dtype=np.intp)),
        space_size=space.size, evaluated=evaluated, pruned=scores.pruned,
        rejected=scores.rejected,
        search_time_s=time.perf_counter() - start, explanation=explain(cost, hw), seed=seed,
    )


def _score_sampled(t: MachineTables, space: GemmCandidates, gemm_args: tuple[float, ...], budget: int | None,
                   seed: int, start: float, time_budget_s: float | None) -> GemmScores:
    """Prune, then at most ``budget`` candidates (a seeded sample) or, with ``time_budget_s``, chunks of a
    seeded order until the time is spent; costed in numpy."""
    m, n, k, elem = gemm_args[1:5]
    keep = prune(space, m, n, k, elem, t)
    pruned = space.size - keep.size
    if budget is not None and keep.size > budget:
        keep = np.sort(np.random.default_rng(seed).choice(keep, size=budget, replace=False))
    if time_budget_s is None:
        return score_numpy(t, space, keep, pruned, *gemm_args)
    keep = np.random.default_rng(seed).permutation(keep)
    done = 0
    parts: list[GemmCosts] = []
    one = np.ones(1)
    while done < keep.size and (not parts or time.perf_counter() - start < time_budget_s):
        chunk = space.take(keep[done:done + TIME_CHUNK])
        parts.append(gemm_costs(t, chunk, *(one * x for x in gemm_args)))
        done += chunk.size
    costs = GemmCosts(*(np.concatenate([np.broadcast_to(getattr(p, f), (1, p.judged_s.shape[1])) for p in parts],
                                       axis=1) for f in GemmCosts.__dataclass_fields__))
    return scores_of(costs, keep[:done], t, pruned)
