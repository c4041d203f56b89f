"""PyTorch profiler / Kineto Chrome trace (``.json``, ``.json.gz``): kernels joined to their launches and ops.

The events are decoded in chunks (``kineto_events``) and kept as compact records (``kineto_collect``); this
module joins them. A kernel's op is found through its launch (``cuda_runtime``/``cuda_driver``/HIP runtime
event with the same ``args.correlation``): the innermost ``cpu_op`` on the launching thread whose
time span holds the launch; where the launch is missing, ``args["External id"]`` is used.
Times in the trace are microseconds. Without device kernels (a CPU-only profile) the top-level
``cpu_op`` events are the measured records.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from typing import Any, BinaryIO

import numpy as np

from perfmodel.traces import aten_ops
from perfmodel.traces.kineto_collect import (  # noqa: F401  (the event categories: public names of this parser)
    COLLECTIVE_ANNOTATION,
    DEVICE_CATEGORIES,
    LAUNCH_CATEGORIES,
    NO_ID,
    OP_CATEGORIES,
    OTHER_DEVICE_CATEGORIES,
    Collector,
    OpEvent,
)
from perfmodel.traces.kineto_events import iter_event_batches
from perfmodel.traces.records import (
    MAX_RECORDS,
    SELF_SUFFIX,
    CommArgs,
    KernelRecord,
    OpCall,
    ParsedTrace,
    TraceError,
    clip_name,
)

FORMAT = "pytorch_kineto"
US = 1e-6
MAX_CPU_CHAIN = 16  # ops followed down from a top-level CPU op


def _time_order(ops: list[OpEvent]) -> list[int]:
    """Op indices by start, the longer of two starting together first (an enclosing op before what it holds);
    ties in file order."""
    starts = np.fromiter((op.ts_us for op in ops), dtype=np.float64, count=len(ops))
    ends = np.fromiter((op.end_us for op in ops), dtype=np.float64, count=len(ops))
    order: list[int] = np.lexsort((-ends, starts)).tolist()  # stable: ties keep file order
    return order


def _by_thread(ops: list[OpEvent], order: list[int]) -> dict[tuple[Any, Any], list[int]]:
    """``order`` split by thread (each list keeps the order)."""
    grouped: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    for i in order:
        grouped[ops[i].thread].append(i)
    return grouped


def _nest(ops: list[OpEvent], by_thread: dict[tuple[Any, Any], list[int]]) -> None:
    """Set each op's parent: the innermost op of the same thread whose span holds it."""
    for indices in by_thread.values():
        stack: list[int] = []
        for i in indices:
            while stack and ops[stack[-1]].end_us < ops[i].end_us:
                stack.pop()
            ops[i].parent = stack[-1] if stack else -1
            stack.append(i)


def _link_backward(ops: list[OpEvent]) -> None:
    """Give each forward op the output shapes its backward node records: the node (``CudnnConvolutionBackward``,
    ``autograd::engine::evaluate_function: ConvolutionBackward0``) shares the forward op's sequence number and
    its Input Dims are the gradients of the forward outputs, shaped like them."""
    gradients: dict[int, tuple[tuple[int, ...] | None, ...]] = {}
    for op in ops:
        if op.backward and op.sequence is not None and op.dims and op.sequence not in gradients:
            gradients[op.sequence] = op.dims
    if not gradients:
        return
    for op in ops:
        if not op.backward and op.sequence is not None:
            op.outputs = gradients.get(op.sequence)


def _calls(ops: list[OpEvent], order: list[int]) -> None:
    """Build the immutable ``OpCall`` chain of every op (parents first: ``order`` is ``_time_order``)."""
    for call_id, i in enumerate(order):
        op = ops[i]
        parent = ops[op.parent].call if op.parent >= 0 else None
        op.call = OpCall(call_id, op.name, op.ts_us * US, (op.end_us - op.ts_us) * US, op.dims, op.types,
                         op.concrete, parent, op.strides, op.outputs, op.lists)


class _LazyCalls:
    """The ``OpCall`` of an op built on first use, parents first (the same calls and call ids ``_calls`` gives: an
    op's call id is its position in ``_time_order``): a kernel trace's chains hold a fraction of its ops."""

    def __init__(self, ops: list[OpEvent], order: list[int]) -> None:
        self.ops = ops
        call_ids = np.empty(len(ops), dtype=np.int64)
        call_ids[np.asarray(order, dtype=np.int64)] = np.arange(len(order), dtype=np.int64)
        self.call_ids: list[int] = call_ids.tolist()

    def __call__(self, index: int) -> OpCall:
        ops, pending = self.ops, []
        while index >= 0 and ops[index].call is None:
            pending.append(index)
            index = ops[index].parent
        parent = ops[index].call if index >= 0 else None
        for i in reversed(pending):
            op = ops[i]
            parent = op.call = OpCall(self.call_ids[i], op.name, op.ts_us * US, (op.end_us - op.ts_us) * US, op.dims,
                                      op.types, op.concrete, parent, op.strides, op.outputs, op.lists)
        assert parent is not None
        return parent


class _Locator:
    """Innermost op of a thread holding a time point."""

    def __init__(self, ops: list[OpEvent], by_thread: dict[tuple[Any, Any], list[int]]) -> None:
        self.ops = ops
        self.starts: dict[tuple[Any, Any], list[float]] = {}
        self.order: dict[tuple[Any, Any], list[int]] = {}
        for thread, indices in by_thread.items():
            self.order[thread] = indices
            self.starts[thread] = [ops[i].ts_us for i in indices]

    def find(self, thread: tuple[Any, Any], ts_us: float) -> int:
        """The op's index; -1 where none holds the time point."""
        starts = self.starts.get(thread)
        if not starts:
            return -1
        position = bisect.bisect_right(starts, ts_us) - 1
        if position < 0:
            return -1
        index = self.order[thread][position]
        while index >= 0 and self.ops[index].end_us < ts_us:  # the latest-starting op ended: climb to one that holds
            index = self.ops[index].parent
        return index


def _chain(call: OpCall | None) -> tuple[OpCall, ...]:
    chain: list[OpCall] = []
    while call is not None and len(chain) < 256:
        chain.append(call)
        call = call.parent
    return tuple(reversed(chain))


def _comm(ops: list[OpEvent], op: OpEvent | None) -> CommArgs | None:
    """The collective recorded by the launching op or one enclosing it (``record_param_comms``)."""
    depth = 0
    while op is not None and depth < 256:
        if op.comm is not None:
            return op.comm
        op = ops[op.parent] if op.parent >= 0 else None
        depth += 1
    return None


def _records(collected: Collector) -> list[KernelRecord]:
    ops = collected.ops
    order = _time_order(ops)
    by_thread = _by_thread(ops, order)
    _nest(ops, by_thread)
    _link_backward(ops)
    call_of = _LazyCalls(ops, order)
    locator = _Locator(ops, by_thread)
    by_external: dict[int, int] = {}  # External id -> the one op that has it (-1: several have it)
    for i, each in enumerate(ops):
        if each.external_id is not None:
            by_external[each.external_id] = -1 if each.external_id in by_external else i
    records: list[KernelRecord] = []
    kernels = collected.kernels
    # per op (index; -1: none): its chain, collective, innermost op's name, dims and types
    chains: dict[int, tuple[tuple[OpCall, ...], CommArgs | None, str | None, Any, Any]] = {}
    launches = collected.launches
    position_of, threads, launch_ts, launch_external = (launches.index, launches.threads, launches.ts_us,
                                                        launches.external)
    find = locator.find
    for index, k in enumerate(kernels):
        kernels[index] = None  # type: ignore[call-overload]  # free each pending kernel as it is converted
        position = position_of.get(k.correlation) if k.correlation is not None else None
        op = -1
        external = k.external_id
        if position is not None:  # its launch: the innermost op around it, else the launch's External id
            op = find(threads[position], launch_ts[position])
            if launch_external[position] != NO_ID:
                external = launch_external[position]
        if op < 0 and external is not None:
            op = by_external.get(external, -1)
        known = chains.get(op)
        if known is None:
            chain = _chain(call_of(op) if op >= 0 else None)
            inner = chain[-1] if chain else None
            known = chains[op] = (chain, _comm(ops, ops[op] if op >= 0 else None), inner.name if inner else None,
                                  inner.input_dims if inner else None, inner.input_types if inner else None)
        records.append(KernelRecord(
            name=k.name, category=k.category, duration_s=k.dur_us * US, source_format=FORMAT,
            start_s=k.ts_us * US, device=k.device, stream=k.stream, correlation=k.correlation, grid=k.grid,
            block=k.block, op_name=known[2], input_dims=known[3], input_types=known[4], ops=known[0],
            collective=k.comm or known[1], transfer_bytes=k.nbytes, device_kind=k.device_kind))
    return records


def _cpu_records(collected: Collector) -> list[KernelRecord]:
    """A CPU-only profile: top-level ``cpu_op`` events are the measured records. A record's op chain follows
    single children down (an autograd node ``ConvolutionBackward0`` -> ``aten::convolution_backward``), so
    the op it is made of can be recognised. A chain with no modelled op that ends in several children, some
    holding modelled ops (an autograd node ``MmBackward0``: two ``aten::mm`` and the views between them), is
    split into its children, each its own record, and the node's own time outside them (``SELF_SUFFIX``):
    every microsecond stays in exactly one record."""
    order = _time_order(collected.ops)
    _nest(collected.ops, _by_thread(collected.ops, order))
    _link_backward(collected.ops)
    _calls(collected.ops, order)
    tree = _CpuTree(collected)
    records: list[KernelRecord] = []
    for index, op in enumerate(collected.ops):
        if op.parent < 0 and op.call is not None:
            tree.records(index, records)
        if len(records) >= collected.max_records:
            break
    records.sort(key=lambda r: r.start_s or 0.0)
    return records[:collected.max_records]


class _CpuTree:
    """The nesting of a CPU-only profile's ops, and the records of one subtree (``_cpu_records``)."""

    def __init__(self, collected: Collector) -> None:
        self.ops = collected.ops
        self.children: dict[int, list[int]] = defaultdict(list)
        for index, op in enumerate(self.ops):
            if op.parent >= 0 and op.call is not None:
                self.children[op.parent].append(index)
        self._modelled: dict[int, bool] = {}

    def modelled(self, index: int) -> bool:
        """Whether an op or one below it is one perfmodel models (iterative: nesting may be deep)."""
        stack = [index]
        while stack:
            i = stack[-1]
            pending = [c for c in self.children[i] if c not in self._modelled]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            self._modelled[i] = aten_ops.recognised(self.ops[i].name) or any(
                self._modelled[c] for c in self.children[i])
        return self._modelled[index]

    def call(self, index: int) -> OpCall:
        call = self.ops[index].call
        assert call is not None  # set for every op by _calls
        return call

    def records(self, index: int, out: list[KernelRecord], depth: int = 0) -> None:
        op, top = self.ops[index], self.call(index)
        chain, inner = [top], index
        while len(self.children[inner]) == 1 and len(chain) < MAX_CPU_CHAIN:
            inner = self.children[inner][0]
            chain.append(self.call(inner))
        below = self.children[inner]
        split = (len(below) > 1 and depth + len(chain) < MAX_CPU_CHAIN
                 and not any(aten_ops.recognised(c.name) for c in chain) and any(self.modelled(i) for i in below))
        if not split:
            out.append(KernelRecord(
                name=op.name, category="cpu_op", duration_s=top.duration_s, source_format=FORMAT,
                start_s=top.start_s, op_name=op.name, input_dims=op.dims, input_types=op.types, ops=tuple(chain)))
            return
        for child in below:
            self.records(child, out, depth + len(chain))
        node = self.ops[inner]
        own_s = top.duration_s - sum(self.call(i).duration_s for i in below)
        if own_s > 0:
            out.append(KernelRecord(
                name=clip_name(f"{node.name}{SELF_SUFFIX}"), category="cpu_op", duration_s=own_s,
                source_format=FORMAT, start_s=top.start_s, op_name=node.name, input_dims=node.dims,
                input_types=node.types, ops=tuple(chain)))


# bounded: a hostile head repeating the key without a closing brace must not cost quadratic time
_DEVICE_NAME = re.compile(rb'"deviceProperties"\s{0,64}:\s{0,64}\[\s{0,64}\{[^}]{0,4096}?"name"\s{0,8}:\s{0,8}'
                          rb'"([^"]{1,200})"')
_WORLD_SIZE = re.compile(rb'"distributedInfo"\s{0,64}:\s{0,64}\{[^}]{0,4096}?"world_size"\s{0,8}:\s{0,8}(\d{1,9})')


def head_metadata(head: bytes) -> tuple[str | None, int | None]:
    """(device name, world size) from the trace's head: Kineto writes ``deviceProperties`` and
    ``distributedInfo`` before ``traceEvents``; None where the head does not hold them."""
    cut = head.find(b'"traceEvents"')
    head = head if cut < 0 else head[:cut]
    name, world = _DEVICE_NAME.search(head), _WORLD_SIZE.search(head)
    return (name.group(1).decode("utf-8", "replace") if name else None,
            int(world.group(1)) if world else None)


def parse_kineto(stream: BinaryIO, top_level_list: bool = False, max_records: int = MAX_RECORDS,
                 head: bytes = b"") -> ParsedTrace:
    """Kernels (and memcpy/memset) of a Kineto trace with their ops; CPU ops where there are no kernels.
    ``head``: the file's first decompressed bytes, read for the device name and world size."""
    collected = Collector(max_records)
    seen = 0
    for batch in iter_event_batches(stream, top_level_list):
        seen += len(batch)
        collected.add_batch(batch)
    if seen == 0:
        raise TraceError("the Kineto trace has no events (empty 'traceEvents')")
    if collected.kernels:
        records = _records(collected)
    elif collected.ops:
        records = _cpu_records(collected)
        collected.warnings.insert(0, "no device timing in this file (a CPU-only profile): the records are the "
                                     "top-level cpu_op times, framework time on the host, not kernel time")
    else:
        raise TraceError("the Kineto trace has neither device kernels nor cpu_op events")
    if collected.skipped:
        collected.warnings.append(f"{collected.skipped} device events without a valid ts/dur were skipped")
    if collected.truncated:
        collected.warnings.append(f"more than {max_records} kernels: the rest were not read")
    device_name, world_size = head_metadata(head)
    return ParsedTrace(FORMAT, records, collected.warnings, device_name=device_name, world_size=world_size)
