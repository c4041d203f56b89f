"""PyTorch profiler / Kineto Chrome trace (``.json``, ``.json.gz``): kernels joined to their launches and ops.

Streams the events with ``ijson`` (no JSON DOM): one small dict per event, kept only as compact
records. A kernel's op is found through its launch (``cuda_runtime``/``cuda_driver``/HIP runtime
event with the same ``args.correlation``): the innermost ``cpu_op`` on the launching thread whose
time span holds the launch; where the launch is missing, ``args["External id"]`` is used.
Times in the trace are microseconds. Without device kernels (a CPU-only profile) the top-level
``cpu_op`` events are the measured records.
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import msgspec

from perfmodel.traces import aten_ops
from perfmodel.traces.aten_comms import comm_args
from perfmodel.traces.kineto_events import NOT_RECORDED, Event, EventArgs, iter_event_batches
from perfmodel.traces.records import (
    MAX_DIMS,
    MAX_RANK,
    MAX_RECORDS,
    SELF_SUFFIX,
    Category,
    CommArgs,
    KernelRecord,
    OpCall,
    ParsedTrace,
    TraceError,
    as_float,
    as_int,
    clip_name,
    dim3,
)

FORMAT = "pytorch_kineto"
US = 1e-6
DEVICE_CATEGORIES: dict[str, Category] = {
    "kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset",
}
# device work that is not a GPU kernel: counted as device time, with what ran it
OTHER_DEVICE_CATEGORIES = {"mtia_ccp_events": "mtia", "cuda_profiler_range": "cupti range profiler",
                           "hpu_op": "hpu"}
# device category (lower case) -> the record's category and what ran it (None: a GPU)
_DEVICE_ACTIONS: dict[str, tuple[Category, str | None]] = {
    **{name: (category, None) for name, category in DEVICE_CATEGORIES.items()},
    **{name: ("device", kind) for name, kind in OTHER_DEVICE_CATEGORIES.items()}}
OP_CATEGORIES = {"cpu_op", "operator"}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver", "runtime", "driver", "hip runtime", "hip_runtime",
                     "hip_driver", "hip driver", "mtia_runtime", "xpu_runtime", "privateuse1_runtime"}
COLLECTIVE_ANNOTATION = "nccl:"  # ProcessGroupNCCL's user annotation of a collective, with its tensor's shape
MAX_CONCRETE_CHARS = 256
MAX_CPU_CHAIN = 16  # ops followed down from a top-level CPU op
_NO_ID = -(2**63)  # no External id, in the launches' id array
MAX_CACHED_VALUES = 100_000  # distinct raw shape / type lists remembered per field
_NO_ARGS = EventArgs()
_PLAIN_IDS = (int, str)  # process / thread id types kept as they are
_MISSING = object()


@dataclass(slots=True)
class _Kernel:
    name: str
    category: Category
    ts_us: float
    dur_us: float
    device: int | None
    stream: int | None
    correlation: int | None
    external_id: int | None
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    comm: CommArgs | None
    nbytes: int | None = None
    device_kind: str | None = None


@dataclass(slots=True)
class _Op:
    thread: tuple[Any, Any]
    ts_us: float
    end_us: float
    name: str
    external_id: int | None
    dims: tuple[tuple[int, ...] | None, ...] | None
    types: tuple[str, ...] | None
    concrete: tuple[str, ...] | None
    comm: CommArgs | None = None  # record_param_comms: the collective it launches
    strides: tuple[tuple[int, ...] | None, ...] | None = None  # Input Strides (elements), where recorded
    parent: int = -1
    call: OpCall | None = None
    sequence: int | None = None  # autograd sequence number: a forward op and its backward node share it
    backward: bool = False  # an autograd backward node (its Input Dims: the gradients of the forward outputs)
    outputs: tuple[tuple[int, ...] | None, ...] | None = None  # from the backward node, where linked


def _shapes(value: object) -> tuple[tuple[int, ...] | None, ...] | None:
    """``Input Dims`` as shapes; a tensor list or a malformed entry becomes None (not recorded)."""
    if not isinstance(value, list):
        return None
    shapes: list[tuple[int, ...] | None] = []
    for item in value[:MAX_DIMS]:
        if isinstance(item, list) and len(item) <= MAX_RANK and all(type(d) is int and d >= 0 for d in item):
            shapes.append(tuple(item))
        else:
            shapes.append(None)
    return tuple(shapes)


def _strings(value: object, limit: int) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(v[:limit] if isinstance(v, str) else "" for v in value[:MAX_DIMS])


def _number(value: object) -> float | None:
    """``as_float`` with the common cases first (a finite float, an int): the parser reads two per event."""
    if type(value) is float:
        return value if value - value == 0.0 else None  # inf - inf and nan - nan are nan
    if type(value) is int:
        return float(value)
    return as_float(value)


def _id(value: object) -> int | str | None:
    """A process or thread id as the trace gives it (a number or a name); None for anything else."""
    return value if isinstance(value, int | str) else None


class _Launches:
    """Kernel launches by correlation id: (launching thread, ts in us, External id), packed in arrays (a trace
    holds several launches per kernel: a tuple and its numbers each would cost ~200 B per launch)."""

    def __init__(self) -> None:
        self.index: dict[int, int] = {}
        self.threads: list[tuple[Any, Any]] = []
        self.ts_us = array("d")
        self.external = array("q")

    def __len__(self) -> int:
        return len(self.index)

    def add(self, correlation: int, thread: tuple[Any, Any], ts_us: float, external: int | None) -> None:
        """Record a launch; a correlation id seen before is overwritten (the last launch counts)."""
        packed = _NO_ID if external is None or not _NO_ID < external < 2**63 else external
        position = self.index.setdefault(correlation, len(self.threads))
        if position == len(self.threads):
            self.threads.append(thread)
            self.ts_us.append(ts_us)
            self.external.append(packed)
        else:
            self.threads[position], self.ts_us[position], self.external[position] = thread, ts_us, packed

    def get(self, correlation: int) -> tuple[tuple[Any, Any], float, int | None] | None:
        position = self.index.get(correlation)
        if position is None:
            return None
        external = self.external[position]
        return self.threads[position], self.ts_us[position], None if external == _NO_ID else external


class _Collector:
    """Keeps what the join needs from the event stream, nothing more."""

    def __init__(self, max_records: int) -> None:
        self.max_records = max_records
        self.kernels: list[_Kernel] = []
        self.ops: list[_Op] = []
        self.launches = _Launches()
        self.warnings: list[str] = []
        self.truncated = False
        self.skipped = 0  # device events without a valid ts/dur
        self._shared: dict[object, Any] = {}  # one object per distinct name / shape list / type list
        self._actions: dict[str, str] = {}  # event category -> what it is to the parser (see _action)
        self._caches: tuple[dict[bytes, Any], ...] = ({}, {}, {}, {})  # raw JSON -> converted, per args field
        self._threads: dict[tuple[Any, Any], tuple[Any, Any]] = {}  # plain (pid, tid) -> its shared tuple

    def share(self, value: Any) -> Any:
        """The stored equal object if there is one (names and shapes repeat thousands of times)."""
        if value is None:
            return None
        return self._shared.setdefault(value, value)

    def thread(self, event: Event) -> tuple[Any, Any]:
        """The (pid, tid) an event ran on, one shared tuple per thread."""
        pid, tid = event.pid, event.tid
        if type(pid) in _PLAIN_IDS and type(tid) in _PLAIN_IDS:  # the common case: no checks needed
            found = self._threads.get((pid, tid))
            if found is None:
                found = self._threads[(pid, tid)] = self.share((pid, tid))
            return found
        return self.share((_id(pid), _id(tid)))  # type: ignore[no-any-return]

    def add(self, event: Event) -> None:
        if event.ph != "X":
            return
        category = event.cat
        if not isinstance(category, str):
            return
        action = self._actions.get(category)
        if action is None:
            action = self._actions[category] = _action(category)
        args = event.args or _NO_ARGS
        if action == "op" or action == "annotation":
            if action == "op" or str(event.name).startswith(COLLECTIVE_ANNOTATION):
                self._add_op(event, args)
        elif action == "launch":
            correlation = args.correlation
            correlation = correlation if type(correlation) is int else as_int(correlation)
            ts = _number(event.ts)
            if correlation is not None and ts is not None and len(self.launches) < 4 * self.max_records:
                self.launches.add(correlation, self.thread(event), ts, as_int(args.external_id))
        elif action:
            category_name, device_kind = _DEVICE_ACTIONS[action]
            self._add_kernel(event, category_name, args, device_kind)

    def _converted(self, raw: object, convert: Callable[[object], Any], cache: dict[bytes, Any]) -> Any:
        """``convert`` of a raw JSON value (empty: absent), once per distinct text (shapes and type lists
        repeat); a value already decoded is converted as it is."""
        if raw is NOT_RECORDED:
            return None
        if not isinstance(raw, msgspec.Raw):
            return self.share(convert(raw))
        text = bytes(raw)
        found = cache.get(text, _MISSING)
        if found is _MISSING:
            found = self.share(convert(msgspec.json.decode(text)))
            if len(cache) < MAX_CACHED_VALUES:
                cache[text] = found
        return found

    def _add_kernel(self, event: Event, category: Category, args: EventArgs, device_kind: str | None) -> None:
        ts, dur = _number(event.ts), _number(event.dur)
        if ts is None or dur is None or dur < 0:
            self.skipped += 1
            return
        if len(self.kernels) >= self.max_records:
            self.truncated = True
            return
        nbytes = args.size if args.bytes is msgspec.UNSET else args.bytes
        self.kernels.append(_Kernel(
            self.share(clip_name(event.name)), category, ts, dur, as_int(args.device),
            as_int(args.stream), as_int(args.correlation), as_int(args.external_id),
            self.share(dim3(args.grid)) if args.grid is not None else None,
            self.share(dim3(args.block)) if args.block is not None else None,
            _comm_of(args), as_int(nbytes), device_kind))

    def _add_op(self, event: Event, args: EventArgs) -> None:
        ts, dur = _number(event.ts), _number(event.dur)
        if ts is None or dur is None or dur < 0 or len(self.ops) >= 4 * self.max_records:
            return
        name = event.name
        sequence = args.sequence
        backward = isinstance(name, str) and "Backward" in name and not name.startswith("aten::")
        cache = self._caches
        self.ops.append(_Op(
            self.thread(event), ts, ts + dur, self.share(clip_name(name)),
            as_int(args.external_id), self._converted(
                args.input_dims if args.input_dims is not NOT_RECORDED else args.legacy_input_dims, _shapes, cache[0]),
            self._converted(args.input_types, _type_names, cache[1]),
            self._converted(args.concrete_inputs, _concrete_values, cache[2]),
            _comm_of(args), self._converted(args.input_strides, _shapes, cache[3]),
            sequence=sequence if type(sequence) is int else None, backward=backward))


def _action(category: str) -> str:
    """What an event category is to the parser: "op", "annotation" (an op if it names a collective), "launch",
    a device category's name, or "" (not read)."""
    cat = category.lower()
    if cat in OP_CATEGORIES:
        return "op"
    if cat == "user_annotation":
        return "annotation"
    if cat in LAUNCH_CATEGORIES:
        return "launch"
    if cat in DEVICE_CATEGORIES or cat in OTHER_DEVICE_CATEGORIES:
        return cat
    return ""


def _comm_of(args: EventArgs) -> CommArgs | None:
    return None if args.collective_name is None else comm_args(args.comm_fields())


def _type_names(value: object) -> tuple[str, ...] | None:
    return _strings(value, 64)


def _concrete_values(value: object) -> tuple[str, ...] | None:
    return _strings(value, MAX_CONCRETE_CHARS)


def _time_order(ops: list[_Op]) -> list[int]:
    """Op indices by start, the longer of two starting together first (an enclosing op before what it holds);
    ties in file order."""
    return sorted(range(len(ops)), key=lambda i: (ops[i].ts_us, -ops[i].end_us))


def _by_thread(ops: list[_Op], order: list[int]) -> dict[tuple[Any, Any], list[int]]:
    """``order`` split by thread (each list keeps the order)."""
    grouped: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    for i in order:
        grouped[ops[i].thread].append(i)
    return grouped


def _nest(ops: list[_Op], by_thread: dict[tuple[Any, Any], list[int]]) -> None:
    """Set each op's parent: the innermost op of the same thread whose span holds it."""
    for indices in by_thread.values():
        stack: list[int] = []
        for i in indices:
            while stack and ops[stack[-1]].end_us < ops[i].end_us:
                stack.pop()
            ops[i].parent = stack[-1] if stack else -1
            stack.append(i)


def _link_backward(ops: list[_Op]) -> None:
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


def _calls(ops: list[_Op], order: list[int]) -> None:
    """Build the immutable ``OpCall`` chain of every op (parents first: ``order`` is ``_time_order``)."""
    for call_id, i in enumerate(order):
        op = ops[i]
        parent = ops[op.parent].call if op.parent >= 0 else None
        op.call = OpCall(call_id, op.name, op.ts_us * US, (op.end_us - op.ts_us) * US, op.dims, op.types,
                         op.concrete, parent, op.strides, op.outputs)


class _Locator:
    """Innermost op of a thread holding a time point."""

    def __init__(self, ops: list[_Op], by_thread: dict[tuple[Any, Any], list[int]]) -> None:
        self.ops = ops
        self.starts: dict[tuple[Any, Any], list[float]] = {}
        self.order: dict[tuple[Any, Any], list[int]] = {}
        for thread, indices in by_thread.items():
            self.order[thread] = indices
            self.starts[thread] = [ops[i].ts_us for i in indices]

    def find(self, thread: tuple[Any, Any], ts_us: float) -> _Op | None:
        starts = self.starts.get(thread)
        if not starts:
            return None
        position = bisect.bisect_right(starts, ts_us) - 1
        if position < 0:
            return None
        op: _Op | None
        op = self.ops[self.order[thread][position]]
        while op is not None and op.end_us < ts_us:  # the latest-starting op ended: climb to one that holds
            op = self.ops[op.parent] if op.parent >= 0 else None
        return op


def _chain(call: OpCall | None) -> tuple[OpCall, ...]:
    chain: list[OpCall] = []
    while call is not None and len(chain) < 256:
        chain.append(call)
        call = call.parent
    return tuple(reversed(chain))


def _comm(ops: list[_Op], op: _Op | None) -> CommArgs | None:
    """The collective recorded by the launching op or one enclosing it (``record_param_comms``)."""
    depth = 0
    while op is not None and depth < 256:
        if op.comm is not None:
            return op.comm
        op = ops[op.parent] if op.parent >= 0 else None
        depth += 1
    return None


def _records(collected: _Collector) -> list[KernelRecord]:
    ops = collected.ops
    order = _time_order(ops)
    by_thread = _by_thread(ops, order)
    _nest(ops, by_thread)
    _link_backward(ops)
    _calls(ops, order)
    locator = _Locator(ops, by_thread)
    by_external: dict[int, _Op | None] = {}
    for each in ops:
        if each.external_id is not None:
            by_external[each.external_id] = None if each.external_id in by_external else each
    records: list[KernelRecord] = []
    kernels = collected.kernels
    chains: dict[int, tuple[tuple[OpCall, ...], CommArgs | None]] = {}  # per op call: its chain, collective
    for index, k in enumerate(kernels):
        kernels[index] = None  # type: ignore[call-overload]  # free each pending kernel as it is converted
        launch = collected.launches.get(k.correlation) if k.correlation is not None else None
        op: _Op | None = locator.find(launch[0], launch[1]) if launch else None
        if op is None:
            external = launch[2] if launch and launch[2] is not None else k.external_id
            op = by_external.get(external) if external is not None else None
        call = op.call if op else None
        call_id = -1 if call is None else call.call_id
        known = chains.get(call_id)
        if known is None:
            known = chains[call_id] = (_chain(call), _comm(ops, op))
        chain, comm = known
        inner = chain[-1] if chain else None
        records.append(KernelRecord(
            name=k.name, category=k.category, duration_s=k.dur_us * US, source_format=FORMAT,
            start_s=k.ts_us * US, device=k.device, stream=k.stream, correlation=k.correlation, grid=k.grid,
            block=k.block, op_name=inner.name if inner else None, input_dims=inner.input_dims if inner else None,
            input_types=inner.input_types if inner else None, ops=chain, collective=k.comm or comm,
            transfer_bytes=k.nbytes, device_kind=k.device_kind))
    return records


def _cpu_records(collected: _Collector) -> list[KernelRecord]:
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

    def __init__(self, collected: _Collector) -> None:
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
    collected = _Collector(max_records)
    seen = 0
    add = collected.add
    for batch in iter_event_batches(stream, top_level_list):
        seen += len(batch)
        for event in batch:
            add(event)
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
