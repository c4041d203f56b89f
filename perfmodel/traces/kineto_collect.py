"""The Kineto parser's first pass: what the join needs from each event of the stream, nothing more.

``Collector.add`` sorts an event by its category (a framework op, a kernel launch, device work) and keeps it as
a compact record: ``KernelEvent`` and ``OpEvent`` (times in microseconds, as in the trace), launches packed in
arrays (``Launches``). Names, shapes and type lists repeat thousands of times: each distinct one is converted
once and shared.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from perfmodel.traces.aten_comms import comm_args
from perfmodel.traces.kineto_events import NOT_RECORDED, Event, EventArgs
from perfmodel.traces.records import (
    LIST_TYPE,
    MAX_DIMS,
    MAX_RANK,
    Category,
    CommArgs,
    OpCall,
    as_float,
    as_int,
    clip_name,
    dim3,
)

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
NO_ID = -(2**63)  # no External id, in the launches' id array
MAX_CACHED_VALUES = 100_000  # distinct raw shape / type lists remembered per field
_NO_ARGS = EventArgs()
_PLAIN_IDS = (int, str)  # process / thread id types kept as they are
_MISSING = object()


@dataclass(slots=True)
class KernelEvent:
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
class OpEvent:
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
    lists: tuple[tuple[tuple[int, ...], ...] | None, ...] | None = None  # tensor-list arguments' shapes


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


def _list_shapes(value: object) -> tuple[tuple[tuple[int, ...], ...] | None, ...] | None:
    """Per argument of ``Input Dims``, the shapes of a tensor list (a list of shapes; ``_shapes`` keeps None for
    it), None for any other argument; None where no argument is a tensor list."""
    if not isinstance(value, list):
        return None
    out: list[tuple[tuple[int, ...], ...] | None] = []
    for item in value[:MAX_DIMS]:
        shapes = _shapes(item) if isinstance(item, list) and item and isinstance(item[0], list) else None
        out.append(None if shapes is None or None in shapes else tuple(s for s in shapes if s is not None))
    return tuple(out) if any(item is not None for item in out) else None


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


class Launches:
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
        packed = NO_ID if external is None or not NO_ID < external < 2**63 else external
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
        return self.threads[position], self.ts_us[position], None if external == NO_ID else external


class Collector:
    """Keeps what the join needs from the event stream, nothing more."""

    def __init__(self, max_records: int) -> None:
        self.max_records = max_records
        self.kernels: list[KernelEvent] = []
        self.ops: list[OpEvent] = []
        self.launches = Launches()
        self.warnings: list[str] = []
        self.truncated = False
        self.skipped = 0  # device events without a valid ts/dur
        self._shared: dict[object, Any] = {}  # one object per distinct name / shape list / type list
        self._actions: dict[str, str] = {}  # event category -> what it is to the parser (see _action)
        self._caches: tuple[dict[bytes, Any], ...] = ({}, {}, {}, {}, {}, {})  # raw JSON -> converted, per field
        self._names: dict[str, str] = {}  # an event's name -> its clipped, shared text
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

    def name(self, value: object) -> str:
        """An event's name, clipped (``clip_name``) and shared: once per distinct name."""
        found = self._names.get(value) if type(value) is str else None
        if found is None:
            found = self.share(clip_name(value))
            if type(value) is str and len(self._names) < MAX_CACHED_VALUES:
                self._names[value] = found
        return found

    def add(self, event: Event) -> None:
        self.add_batch((event,))

    def add_batch(self, events: Iterable[Event]) -> None:
        """Keep what the join needs of each event (the hot loop of the parser: launches handled inline)."""
        actions, launches, threads, limit = self._actions, self.launches, self._threads, 4 * self.max_records
        index, launch_threads, launch_ts, launch_external = (launches.index, launches.threads, launches.ts_us,
                                                             launches.external)
        for event in events:
            if event.ph != "X":
                continue
            category = event.cat
            action = actions.get(category) if type(category) is str else None
            if action is None:
                if not isinstance(category, str):
                    continue
                action = actions[category] = _action(category)
            args = event.args or _NO_ARGS
            if action == "launch":
                correlation = args.correlation
                if type(correlation) is not int:
                    correlation = as_int(correlation)
                ts = event.ts
                if type(ts) is not float or ts - ts != 0.0:  # not a finite float (inf - inf, nan - nan: nan)
                    ts = _number(ts)
                if correlation is None or ts is None or len(index) >= limit:
                    continue
                pid, tid = event.pid, event.tid
                thread = threads.get((pid, tid)) if type(pid) in _PLAIN_IDS and type(tid) in _PLAIN_IDS else None
                if thread is None:
                    thread = self.thread(event)
                external = args.external_id
                if type(external) is not int:
                    external = as_int(external)
                packed = NO_ID if external is None or not NO_ID < external < 2**63 else external
                position = index.get(correlation)
                if position is None:  # a correlation id seen before is overwritten (the last launch counts)
                    index[correlation] = len(launch_threads)
                    launch_threads.append(thread)
                    launch_ts.append(ts)
                    launch_external.append(packed)
                else:
                    launch_threads[position], launch_ts[position], launch_external[position] = thread, ts, packed
            elif action == "op" or action == "annotation":
                if action == "op" or str(event.name).startswith(COLLECTIVE_ANNOTATION):
                    self._add_op(event, args)
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

    def _raw(self, raw: msgspec.Raw, convert: Callable[[object], Any], cache: dict[bytes, Any]) -> Any:
        """``_converted`` with its common case inline: a raw value (not absent) whose text was seen before."""
        if type(raw) is msgspec.Raw and raw is not NOT_RECORDED:
            found = cache.get(bytes(raw), _MISSING)
            if found is not _MISSING:
                return found
        return self._converted(raw, convert, cache)

    def _add_kernel(self, event: Event, category: Category, args: EventArgs, device_kind: str | None) -> None:
        ts, dur = event.ts, event.dur
        if type(ts) is not float or ts - ts != 0.0:  # not a finite float: the general conversion
            ts = _number(ts)
        if type(dur) is not float or dur - dur != 0.0:
            dur = _number(dur)
        if ts is None or dur is None or dur < 0:
            self.skipped += 1
            return
        if len(self.kernels) >= self.max_records:
            self.truncated = True
            return
        nbytes = args.size if args.bytes is msgspec.UNSET else args.bytes
        device, stream, correlation, external = args.device, args.stream, args.correlation, args.external_id
        name = event.name
        shared_name = self._names.get(name) if type(name) is str else None
        cache = self._caches
        self.kernels.append(KernelEvent(
            self.name(name) if shared_name is None else shared_name, category, ts, dur,
            device if type(device) is int else as_int(device),
            stream if type(stream) is int else as_int(stream),
            correlation if type(correlation) is int else as_int(correlation),
            external if type(external) is int else None if external is None else as_int(external),
            self._raw(args.grid, _dim3, cache[4]), self._raw(args.block, _dim3, cache[4]),
            None if args.collective_name is None else _comm_of(args),
            nbytes if type(nbytes) is int else None if nbytes is None else as_int(nbytes), device_kind))

    def _add_op(self, event: Event, args: EventArgs) -> None:
        ts, dur = event.ts, event.dur
        if type(ts) is not float or ts - ts != 0.0:  # not a finite float: the general conversion
            ts = _number(ts)
        if type(dur) is not float or dur - dur != 0.0:
            dur = _number(dur)
        if ts is None or dur is None or dur < 0 or len(self.ops) >= 4 * self.max_records:
            return
        name = event.name
        sequence, external = args.sequence, args.external_id
        backward = isinstance(name, str) and "Backward" in name and not name.startswith("aten::")
        shared_name = self._names.get(name) if type(name) is str else None
        pid, tid = event.pid, event.tid
        thread = self._threads.get((pid, tid)) if type(pid) in _PLAIN_IDS and type(tid) in _PLAIN_IDS else None
        cache = self._caches
        dims = args.input_dims if args.input_dims is not NOT_RECORDED else args.legacy_input_dims
        types = None if args.input_types is NOT_RECORDED else self._raw(args.input_types, _type_names, cache[1])
        self.ops.append(OpEvent(
            self.thread(event) if thread is None else thread, ts, ts + dur,
            self.name(name) if shared_name is None else shared_name,
            external if type(external) is int else None if external is None else as_int(external),
            None if dims is NOT_RECORDED else self._raw(dims, _shapes, cache[0]), types,
            None if args.concrete_inputs is NOT_RECORDED else self._raw(args.concrete_inputs,
                                                                        _concrete_values, cache[2]),
            None if args.collective_name is None else _comm_of(args),
            None if args.input_strides is NOT_RECORDED else self._raw(args.input_strides, _shapes, cache[3]),
            sequence=sequence if type(sequence) is int else None, backward=backward,
            lists=self._raw(dims, _list_shapes, cache[5]) if types and LIST_TYPE in types
            and dims is not NOT_RECORDED else None))


def _dim3(value: object) -> tuple[int, int, int] | None:
    """A grid or block size (``dim3``); None for null."""
    return None if value is None else dim3(value)


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
