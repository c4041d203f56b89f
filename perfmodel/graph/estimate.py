"""Estimate a graph on a device: every node costed (repeats predicted once), scheduled, summarised.

``estimate(graph, hardware)`` returns an ``Estimate`` with per-op and per-layer breakdowns, the
timeline, memory per device, diagnostics (every op the model does not cover, with its fallback
time) and, for LLM graphs, time to first token / per output token and tokens/s.
"""

from __future__ import annotations

import json
import threading
import typing
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from perfmodel import uncalibrated_interval
from perfmodel.cost import CostBatch
from perfmodel.gc_pause import without_gc
from perfmodel.graph.fusion import FusionReport, fuse
from perfmodel.graph.ir import Graph, GraphError
from perfmodel.graph.lazy_graph import node_column
from perfmodel.graph.math_mode import check, retyped, summary, tf32_kinds
from perfmodel.graph.memory import DoesNotFit, MemoryReport, memory
from perfmodel.graph.schedule import Timeline, schedule
from perfmodel.hardware import Hardware
from perfmodel.machine import tables
from perfmodel.ops import ROLES, Op, OpError, make_op
from perfmodel.ops.base import FloatArray
from perfmodel.ops.work import Work
from perfmodel.roofline import HardwareLike, SpaceName, Timing, evaluate, predict_many, resolve_hardware, work_of
from perfmodel.search.gemm_space import compact_space, full_space

Progress = Callable[[str, float], None]  # (stage name, fraction of the whole command done in [0, 1])

# Where each stage of ``estimate`` starts, as a fraction of its span (costing the distinct ops takes most)
_STAGES = (("fuse", 0.0), ("compile", 0.1), ("cost", 0.2), ("schedule", 0.8), ("memory", 0.9))


@dataclass
class CompiledGraph:
    """A graph reduced to its distinct ops: ``index[i]`` is node i's row in ``ops``."""

    graph: Graph
    ops: list[Op]
    index: np.ndarray[Any, np.dtype[np.intp]]
    tf32_nodes: int = 0  # nodes whose fp32 op ``compile_graph``'s ``tf32_kinds`` put on TF32 (math_mode)
    _work: dict[float, Work] = field(default_factory=dict, repr=False, compare=False)

    def node_times(self, batch: CostBatch) -> FloatArray:
        return typing.cast(FloatArray, batch.time_s[self.index])

    def work(self, granularity_bytes: float) -> Work:
        """``work_of`` the ops, once per DRAM access granularity (a sweep costs one graph on many variants of a
        device) and kept across graphs with the same ops (``_kept``); its arrays are read-only, so nothing that
        costs it can change it for the next variant or graph."""
        work = self._work.get(granularity_bytes)
        if work is None:
            def make() -> Work:
                return _read_only(work_of(self.ops, granularity_bytes))

            work = self._work[granularity_bytes] = (
                _kept(_WORK, (tuple(self.ops), granularity_bytes), make) if len(self.ops) <= KEPT_OPS else make())
        return work


_KEPT = 64  # entries of each cross-call memo below (least recently used dropped)
KEPT_OPS = 1024  # graphs with more distinct ops keep nothing across calls (bounded memory; an LLM has ~15-40)
_LOCK = threading.Lock()
_WORK: OrderedDict[Hashable, Work] = OrderedDict()  # (ops, granularity) -> their work (read-only arrays)
_ROLES: OrderedDict[Hashable, tuple[str, ...]] = OrderedDict()  # ops -> each one's largest DRAM byte role
_OPS: OrderedDict[Hashable, Op] = OrderedDict()  # an op dict's JSON text -> its (immutable) Op
T = TypeVar("T")


def _kept(memo: OrderedDict[Hashable, T], key: Hashable, make: Callable[[], T], size: int = _KEPT) -> T:
    """``memo[key]``, made by ``make()`` on a miss (ops are immutable values: equal ops, equal results)."""
    with _LOCK:
        found = memo.get(key)
        if found is not None:
            memo.move_to_end(key)
            return found
    value = make()
    with _LOCK:
        memo[key] = value
        while len(memo) > size:
            memo.popitem(last=False)
    return value


def _read_only(work: Work) -> Work:
    for value in vars(work).values():
        for array in value.values() if isinstance(value, dict) else [value]:
            if isinstance(array, np.ndarray):
                array.flags.writeable = False
    return work


def compile_graph(graph: Graph, tf32_kinds: tuple[str, ...] = ()) -> CompiledGraph:
    """Build each distinct op once; a bad op is an error naming its node. The fp32 ops of ``tf32_kinds``
    without a compute dtype are costed with ``compute_dtype: tf32`` (``math_mode.retyped``).

    Ops are told apart by their JSON text; nodes that share one op dict (copied layers) are matched by
    identity first, so the text is built once per dict (and the per-node work is C-level maps)."""
    given = node_column(graph, "cost_op")  # a graph holding copied layers by reference builds no nodes here
    ids = list(map(id, given))
    dicts = dict(zip(ids, given, strict=True))
    slots: dict[str, int] = {}
    by_id: dict[int, int] = {}  # id of an op dict -> its row (the dicts live in the graph meanwhile)
    ops: list[Op] = []
    tf32_rows: set[int] = set()
    for key_id in dict.fromkeys(ids):  # first occurrences in node order: rows and errors as node by node
        op = dicts[key_id]
        if op is None:
            raise GraphError(graph.nodes[ids.index(key_id)].name, "no op and no fallback")
        if tf32_kinds:
            given_op, op = op, retyped(op, tf32_kinds)
            retype = op is not given_op
        else:
            retype = False
        key = json.dumps(op, sort_keys=True, default=str)
        slot = slots.get(key)
        if slot is None:
            try:
                ops.append(_kept(_OPS, key, lambda: make_op(op), 4096))  # noqa: B023 - called at once
            except OpError as exc:
                raise GraphError(graph.nodes[ids.index(key_id)].name, str(exc)) from exc
            slot = slots[key] = len(ops) - 1
        by_id[key_id] = slot
        if retype:
            tf32_rows.add(slot)
    index = np.fromiter(map(by_id.__getitem__, ids), dtype=np.intp, count=len(ids))
    tf32_nodes = int(np.isin(index, list(tf32_rows)).sum()) if tf32_rows else 0
    return CompiledGraph(graph, ops, index, tf32_nodes)


def predict_compiled(compiled: CompiledGraph, hardware: Hardware, space: SpaceName = "full",
                     timing: Timing = "kernel") -> CostBatch:
    """``predict_many`` over the distinct ops; an op the device cannot run names its node."""
    if not compiled.ops:
        raise GraphError(compiled.graph.name, "the graph has no ops")
    try:  # ``predict_many``'s steps, with the ops' work kept from one device variant to the next
        t = tables(hardware)
        batch = evaluate(compiled.work(float(hardware.dram.access_granularity_bytes or 1)), compiled.ops, hardware,
                         timing, space=full_space(t) if space == "full" else compact_space(t))
        batch.uncalibrated_interval_s = uncalibrated_interval.interval_s(compiled.ops, batch.time_s)
        return batch
    except OpError:
        for row, op in enumerate(compiled.ops):
            try:
                predict_many(hardware, [op], space="compact")
            except OpError as exc:
                node = compiled.graph.nodes[int(np.nonzero(compiled.index == row)[0][0])]
                raise GraphError(node.name, str(exc)) from exc
        raise


@dataclass
class Estimate:
    """The result: node costs (graph order), timeline, memory, diagnostics, summaries (SI units)."""

    graph: Graph
    hardware: Hardware
    batch: CostBatch
    index: np.ndarray[Any, np.dtype[np.intp]]
    timeline: Timeline
    memory: MemoryReport
    fusion: FusionReport
    roles: list[str] = field(default_factory=list)  # per distinct op: its largest DRAM byte role
    fp32_math: dict[str, Any] = field(default_factory=dict)  # the math mode of fp32 ops (math_mode.summary)

    @property
    def node_time_s(self) -> FloatArray:
        return typing.cast(FloatArray, self.batch.time_s[self.index])

    @property
    def step_time_s(self) -> float:
        return self.timeline.step_s

    def diagnostics(self) -> list[dict[str, Any]]:
        from perfmodel.graph.report import diagnostics

        return diagnostics(self)

    def llm_metrics(self) -> dict[str, Any] | None:
        from perfmodel.graph.report import llm_metrics

        return llm_metrics(self)

    def to_json(self, detail: bool = True) -> dict[str, Any]:
        from perfmodel.graph.report import estimate_json

        return estimate_json(self, detail)


@without_gc
def estimate(graph: Graph, hardware: HardwareLike, space: SpaceName = "full", fusion: bool = True,
             check_memory: bool = True, timing: Timing = "kernel", progress: Progress | None = None,
             span: tuple[float, float] = (0.0, 1.0), prefix: str = "", fp32_math: str = "framework") -> Estimate:
    """Fuse (unless ``fusion=False``), cost every node, schedule the streams, check memory.

    ``timing="host"`` adds the per-op host launch and synchronisation (eager frameworks timed
    op by op); the default is device time as a profiler reports it. ``progress(stage, fraction)`` hears the
    start of each stage (``prefix`` + fuse, compile, cost, schedule, memory), its fraction within ``span``.
    ``fp32_math`` (framework, tf32 or ieee) says which fp32 convolutions / matmuls run on TF32 tensor cores
    (``perfmodel.graph.math_mode``); the op models' own default, IEEE fp32, is ``ieee``.
    """
    def stage(name: str) -> None:
        if progress is not None:
            start = dict(_STAGES)[name]
            progress(prefix + name, span[0] + (span[1] - span[0]) * start)

    hw = resolve_hardware(hardware)
    mode = check(fp32_math)
    stage("fuse")
    report = fuse(graph) if fusion else FusionReport()
    stage("compile")
    kinds = tf32_kinds(graph, hw, mode)
    compiled = compile_graph(graph, kinds)
    stage("cost")
    batch = predict_compiled(compiled, hw, space, timing)
    times = compiled.node_times(batch)
    microbatches = int((graph.meta.get("parallelism") or {}).get("microbatches", 1))
    stage("schedule")
    timeline = schedule(graph, times, microbatches)
    stage("memory")
    mem = memory(graph, hw)
    if check_memory and not mem.fits:
        raise DoesNotFit(graph.name, mem.explain(hw.id))
    return Estimate(graph, hw, batch, compiled.index, timeline, mem, report, _largest_roles(compiled.ops),
                    summary(mode, kinds, compiled.tf32_nodes))


def _largest_roles(ops: list[Op]) -> list[str]:
    """Per op, the role of its largest compulsory DRAM bytes (``Op.bytes_by_role``, granularity 1), from one
    vectorised ``work_of`` over all ops instead of one per op, kept across calls with the same ops."""
    if not ops:
        return []
    roles = _kept(_ROLES, tuple(ops), lambda: _roles(ops)) if len(ops) <= KEPT_OPS else _roles(ops)
    return list(roles)


def _roles(ops: list[Op]) -> tuple[str, ...]:
    work = work_of(ops, 1.0)
    columns = [(role, work.bytes_by_role[role].tolist()) for role in ROLES]
    out = []
    for i in range(len(ops)):
        roles = {role: float(values[i]) for role, values in columns if values[i]}
        out.append(max(roles, key=lambda r: roles[r]) if roles else "")
    return tuple(out)


def clear_kept() -> None:
    """Forget what estimates keep across calls: GEMM choices, attention tiles and collective times, fused layer
    windows, the ops' work and roles, the ops built from op dicts (a benchmark times a cold estimate with it)."""
    from perfmodel.graph.repeat import clear_windows
    from perfmodel.search import call_memo, gemm_memo

    gemm_memo.clear()
    call_memo.clear()
    clear_windows()
    with _LOCK:
        for memo in (_WORK, _ROLES, _OPS):
            memo.clear()
