"""Rank explicit schedules of one op on one device with the search engine's costing.

A compiler that is not Python (TVM MetaSchedule, IREE, an MLIR pipeline) proposes its own tilings;
``rank_schedules`` costs exactly those candidates, vectorised (``perfmodel.search.gemm_cost.gemm_costs``
for GEMM-like ops, ``attention_cost.attention_costs`` for attention), and returns per candidate the
predicted kernel time (s; the same figure ``/search`` lists in its top-k), the rank (1 = fastest,
0 = cannot run), what bounds it (the matrix engine, DRAM or the last-level cache), the waves of
tiles over the units, the on-chip footprint against the scratchpad (SMEM) of one unit, and a reason
in words. Ties keep the input order, so the same request always gives the same ranking.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel import __version__
from perfmodel.hardware import Hardware
from perfmodel.machine import MachineTables, tables
from perfmodel.ops import OpError, make_op
from perfmodel.ops.base import DTYPES, FloatArray, Work
from perfmodel.roofline import HardwareLike, OpLike, resolve_hardware, work_of
from perfmodel.search.attention_cost import AttentionCandidates, attention_costs
from perfmodel.search.gemm_cost import REJECT_REASONS, gemm_costs, launch_overhead_s, stored_b_ratio
from perfmodel.search.gemm_space import GemmCandidates
from perfmodel.tuners.candidates import Candidates, ScheduleError, occupancy_cap, parse_candidates, warp_reasons
from perfmodel.tuners.reasons import engine_reasons, valid_reasons

COSTED_FIELDS = ("time_s", "compute_s", "dram_s", "reuse_s", "footprint_bytes", "tiles", "resident")


@dataclass
class ScheduleRanking:
    """Per candidate (input order): times in s, bytes, ranks; ``order`` is the valid ones best first."""

    model_version: str
    hardware_id: str
    hardware_hash: str
    family: str
    problem: dict[str, float]
    candidates: Candidates
    time_s: FloatArray
    rank: np.ndarray[Any, np.dtype[np.int64]]
    order: np.ndarray[Any, np.dtype[np.intp]]
    bound: list[str]
    waves: FloatArray
    tiles: FloatArray
    resident: FloatArray
    footprint_bytes: FloatArray
    sram_bytes_per_unit: float
    reasons: list[str]

    @property
    def valid(self) -> np.ndarray[Any, np.dtype[np.bool_]]:
        return np.asarray(self.rank > 0)


def family_of(work: Work, kind: str) -> str:
    """'attention' or 'gemm'; other ops have no tiling to rank."""
    if work.attention[0, 0] > 0:
        return "attention"
    if work.gemm_batch[0].sum() > 0 and work.flops_matrix[0] > 0:
        return "gemm"
    raise ScheduleError("op.kind", f"{kind!r} has no tiled schedule to rank: give a GEMM-like op (matmul, bmm, "
                                   "linear, conv) or attention")


def rank_schedules(hardware: HardwareLike, op: OpLike,
                   candidates: Mapping[str, Sequence[float] | FloatArray]) -> ScheduleRanking:
    """Cost and rank ``candidates`` (columns named as in ``perfmodel.tuners.candidates``) for ``op``."""
    hw = resolve_hardware(hardware)
    try:
        built = make_op(op)
    except (OpError, ValueError, TypeError) as exc:
        raise ScheduleError("op", str(exc)) from exc
    t = tables(hw)
    work = work_of([built], float(hw.dram.access_granularity_bytes or 1))
    family = family_of(work, built.kind)
    parsed = parse_candidates(family, candidates)
    costing = _cost_gemm if family == "gemm" else _cost_attention
    problem, costed, engine = costing(t, work, parsed)
    return _rank(hw, t, family, problem, parsed, costed, engine)


def _placeholder(parsed: Candidates) -> dict[str, FloatArray]:
    """Columns with bad inputs replaced by 1 so the costing stays finite (those candidates are rejected)."""
    bad = np.array([bool(r) for r in parsed.input_reason])
    return {name: np.where(bad, 1.0, col) if name != "warps" else np.where(bad, np.nan, col)
            for name, col in parsed.columns.items()}


def _by_warps(t: MachineTables, warps: FloatArray) -> list[tuple[MachineTables, np.ndarray[Any, np.dtype[np.intp]]]]:
    """Groups of candidates sharing a warp count, each with the tables its occupancy cap gives."""
    keys = np.where(np.isnan(warps), -1.0, warps)
    groups = []
    for value in np.unique(keys):
        index = np.nonzero(keys == value)[0]
        cap = occupancy_cap(t.hardware, t.max_resident_tiles, t.resident_threads_per_unit,
                            np.nan if value < 0 else float(value))
        groups.append((dataclasses.replace(t, max_resident_tiles=cap) if cap != t.max_resident_tiles else t, index))
    return groups


def _cost_gemm(t: MachineTables, work: Work, parsed: Candidates) -> tuple[dict[str, float], dict[str, FloatArray],
                                                                           list[str]]:
    slot = int(np.argmax(2.0 * work.gemm_batch[0] * work.gemm_m[0] * work.gemm_n[0] * work.gemm_k[0]))
    b, m, n, k = (float(getattr(work, f)[0, slot]) for f in ("gemm_batch", "gemm_m", "gemm_n", "gemm_k"))
    dtype = int(work.matrix_dtype[0])
    elem = DTYPES[dtype].bytes
    cols = _placeholder(parsed)
    one = np.ones(1)
    args = (one * b, one * m, one * n, one * k, one * elem, one * t.matrix_peak[dtype], one * float(work.dram_bytes[0]),
            one * stored_b_ratio(work, slot, elem))
    size = parsed.size
    out = {name: np.empty(size) for name in COSTED_FIELDS}
    reject = np.zeros(size, dtype=np.int64)
    launch = launch_overhead_s(t, work)  # schedule times as predict and search report them
    for tw, index in _by_warps(t, cols["warps"]):
        space = GemmCandidates(cols["tile_m"][index], cols["tile_n"][index], cols["tile_k"][index] * elem,
                               cols["stages"][index], cols["split_k"][index], cols["group_m"][index])
        c = gemm_costs(tw, space, *args)
        for name, value in (("time_s", c.judged_s + launch), ("compute_s", c.compute_s), ("dram_s", c.dram_s),
                            ("reuse_s", c.reuse_s), ("footprint_bytes", c.footprint_bytes), ("tiles", c.tiles),
                            ("resident", c.resident)):
            out[name][index] = np.broadcast_to(value, (1, index.size))[0]
        reject[index] = np.broadcast_to(c.reject, (1, index.size))[0]
    bk = np.maximum(np.ceil(cols["tile_k"] / t.mma_k) * t.mma_k, t.mma_k)
    engine = engine_reasons(t, [REJECT_REASONS[r] if r else "" for r in reject], cols, out["footprint_bytes"],
                            k, bk)
    warp = warp_reasons(t.hardware, cols["warps"], cols["tile_m"] * cols["tile_n"])
    problem = {"batch": b, "m": m, "n": n, "k": k, "element_bytes": elem}
    out["tile_k_effective"] = bk
    return problem, out, [e or w for e, w in zip(engine, warp, strict=True)]


def _cost_attention(t: MachineTables, work: Work, parsed: Candidates) -> tuple[dict[str, float],
                                                                                dict[str, FloatArray], list[str]]:
    a = work.attention[0:1]
    dtype = int(work.matrix_dtype[0])
    cols = _placeholder(parsed)
    size = parsed.size
    out = {name: np.empty(size) for name in COSTED_FIELDS}
    feasible = np.ones(size, dtype=bool)
    registers = np.empty(size)
    for tw, index in _by_warps(t, cols["warps"]):
        space = AttentionCandidates(cols["tile_q"][index], cols["tile_kv"][index], cols["stages"][index],
                                    cols["split_kv"][index])
        c = attention_costs(
            tw, space, bh=a[:, 0], group=a[:, 1], sq=a[:, 2], skv=a[:, 3], d=a[:, 4], dv=a[:, 5], causal=a[:, 6],
            elem=np.array([DTYPES[dtype].bytes]), peak=np.array([t.matrix_peak[dtype]]),
            vector_peak=np.array([t.vector_peak[int(work.vector_dtype[0])]]), compulsory=work.dram_bytes[:1],
            kv_bytes=a[:, 7], fwd=a[:, 8], bwd=a[:, 9])
        for name, key in (("time_s", "judged_s"), ("compute_s", "compute_s"), ("dram_s", "dram_s"),
                          ("reuse_s", "reuse_s"), ("footprint_bytes", "footprint_bytes"), ("tiles", "ctas"),
                          ("resident", "resident")):
            out[name][index] = np.broadcast_to(c[key], (1, index.size))[0]
        out["time_s"][index] += launch_overhead_s(t, work)  # as predict and search report them
        feasible[index] = np.broadcast_to(c["feasible"], (1, index.size))[0]
        registers[index] = 2.0 * (space.bq * space.bkv + space.bq * a[0, 5]) * 4.0
    codes = ["" if ok else ("smem" if fp > t.scratchpad_bytes_per_unit else "registers")
             for ok, fp in zip(feasible, out["footprint_bytes"], strict=True)]
    engine = engine_reasons(t, codes, cols, out["footprint_bytes"], 0.0, cols["tile_kv"], registers)
    warp = warp_reasons(t.hardware, cols["warps"], cols["tile_q"] * (cols["tile_kv"] + a[0, 5]))
    problem = {"batch_heads": float(a[0, 0]), "group": float(a[0, 1]), "seq_q": float(a[0, 2]),
               "seq_kv": float(a[0, 3]), "head_dim": float(a[0, 4]), "head_dim_v": float(a[0, 5]),
               "causal": float(a[0, 6]), "element_bytes": DTYPES[dtype].bytes}
    return problem, out, [e or w for e, w in zip(engine, warp, strict=True)]


def _rank(hw: Hardware, t: MachineTables, family: str, problem: dict[str, float], parsed: Candidates,
          costed: dict[str, FloatArray], engine: list[str]) -> ScheduleRanking:
    rejected = [i or e for i, e in zip(parsed.input_reason, engine, strict=True)]
    bad = np.fromiter(map(bool, rejected), dtype=bool, count=len(rejected))
    time_s = np.where(bad | ~np.isfinite(costed["time_s"]), np.inf, costed["time_s"])
    order = np.lexsort((np.arange(time_s.size), costed["footprint_bytes"], time_s))  # ties as gemm_cost.tie_break
    order = order[np.isfinite(time_s[order])]
    rank = np.zeros(time_s.size, dtype=np.int64)
    rank[order] = np.arange(1, order.size + 1)
    terms = np.stack([costed["compute_s"], costed["dram_s"], costed["reuse_s"]])
    names = ("compute", t.dram.name, t.llc.name if t.llc is not None else t.dram.name)
    bound_code = np.argmax(terms, axis=0)
    bound = np.asarray(names, dtype=object)[bound_code].tolist()
    units = float(t.units)
    waves = costed["tiles"] / (units * np.maximum(costed["resident"], 1.0))
    best = float(time_s[order[0]]) if order.size else np.inf
    reasons = valid_reasons(hw, t, rejected, bound, bound_code, waves, costed, time_s, best, parsed.columns)
    return ScheduleRanking(
        model_version=__version__, hardware_id=hw.id, hardware_hash=hw.content_hash, family=family, problem=problem,
        candidates=parsed, time_s=time_s, rank=rank, order=order, bound=bound, waves=waves, tiles=costed["tiles"],
        resident=costed["resident"], footprint_bytes=costed["footprint_bytes"],
        sram_bytes_per_unit=float(t.scratchpad_bytes_per_unit), reasons=reasons)
