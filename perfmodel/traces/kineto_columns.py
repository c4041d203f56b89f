"""A Kineto trace's kernels joined to their ops in numpy columns, for callers that need each kernel's op chain
but not a ``KernelRecord`` per kernel (``perfmodel.compare.fast_side``).

The same join as ``kineto`` (its reference): ops nested per thread (an op's parent is the nearest earlier op of its
thread, in ``_time_order``, that ends no earlier: what ``_nest``'s stack leaves on top), a launch's op the innermost
op of its thread holding its time, else the op of its External id. Events are decoded by ``kineto_events`` as
before; no per-op object is made. Ops get an ``OpCall`` only where a caller asks (``call``), parents first, with
the call ids ``kineto`` gives. Any event this path does not take as the reference does (a value of an odd type,
a non-finite time, a collective, a CPU-only profile, a field decoded by the ijson fallback) raises
``Unsupported``: the caller then parses the whole file by the reference path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import repeat
from operator import attrgetter
from typing import Any, BinaryIO

import msgspec
import numpy as np

from perfmodel.traces.kineto_collect import (
    _DEVICE_ACTIONS,
    COLLECTIVE_ANNOTATION,
    NO_ID,
    _action,
    _concrete_values,
    _dim3,
    _list_shapes,
    _shapes,
    _type_names,
)
from perfmodel.traces.kineto_events import NOT_RECORDED, PHASED, Event, EventArgs, iter_event_batches
from perfmodel.traces.records import LIST_TYPE, MAX_RECORDS, OpCall, clip_name

US = 1e-6
MAX_CHAIN = 256  # ops kept per chain by the reference (``kineto._chain``)
_NO_ARGS = EventArgs()
_PID, _TID = attrgetter("pid"), attrgetter("tid")
_MISSING = object()


class Unsupported(Exception):
    """An event the columnar path does not take exactly as the reference does: parse the file by the reference."""


def _numbers(values: list[Any]) -> np.ndarray:
    """Finite ints / floats as float64 (each as ``float(v)``, as the reference converts them)."""
    if not set(map(type, values)) <= {int, float}:
        raise Unsupported("a time that is not a number")
    out = np.array(values, dtype=np.float64)
    if not np.isfinite(out).all():
        raise Unsupported("a non-finite time")
    return out


def _ints(values: Iterable[Any]) -> list[int | None]:
    """Ids that are ints (or absent), within int64; anything else is not taken."""
    out = list(values)
    if not set(map(type, out)) <= {int, type(None)}:
        raise Unsupported("an id that is not an int")
    present = [v for v in out if v is not None]
    if present and not (min(present) > NO_ID and max(present) < 2**63):
        raise Unsupported("an id beyond int64")
    return out


def _raw_key(raw: object) -> bytes | None:
    if raw is NOT_RECORDED:
        return None
    if type(raw) is not msgspec.Raw:
        raise Unsupported("a field decoded by the ijson fallback")
    return bytes(raw)


class _Converted:
    """A raw JSON field converted once per distinct text (as ``Collector._converted``)."""

    def __init__(self, convert: Callable[[object], Any]) -> None:
        self.convert = convert
        self.known: dict[bytes | None, Any] = {None: None}

    def __call__(self, key: bytes | None) -> Any:
        found = self.known.get(key, _MISSING)
        if found is _MISSING:
            assert key is not None
            found = self.known[key] = self.convert(msgspec.json.decode(key))
        return found


def _names(values: list[Any]) -> list[str]:
    """Event names clipped (``clip_name``), once per distinct name."""
    try:
        clipped: dict[Any, Any] = dict.fromkeys(values)
    except TypeError:
        raise Unsupported("a name that is not a string") from None
    if not set(map(type, clipped)) <= {str}:
        raise Unsupported("a name that is not a string")
    for name in clipped:
        clipped[name] = clip_name(name)
    return list(map(clipped.__getitem__, values))


def _previous_enclosing(ends: np.ndarray, segment_start: np.ndarray) -> np.ndarray:
    """Per position p, the last q < p with q >= segment_start[p] and ends[q] >= ends[p] (-1: none): ``_nest``'s
    stack, all positions at once by pointer jumping. Each position holds a candidate q such that every position
    between q and p ends before p does (first p - 1); while the candidate ends before p too, p takes the
    candidate's candidate (everything between them ends before the candidate, so before p). All positions jump
    together from the previous round's candidates: chains halve each round, O(log n) rounds (a sparse table of
    maxima and binary lifting took ~3x longer on a trace's 260k ops)."""
    n = len(ends)
    found = np.arange(-1, n - 1)
    found[found < segment_start] = -1
    todo = np.flatnonzero(found >= 0)
    while todo.size:
        todo = todo[ends[found[todo]] < ends[todo]]
        jumped = found[found[todo]]
        found[todo] = jumped
        todo = todo[jumped >= 0]
    return found


def _dim3s(values: list[Any]) -> list[tuple[int, int, int] | None]:
    """Grid or block sizes as ``Collector`` converts them (``_dim3``), once per distinct raw text."""
    raw, known = msgspec.Raw, dict[bytes, Any]()
    if set(map(type, values)) == {raw}:  # all raw (absent: empty): the texts by one join and split, at C speed
        texts = b"\0".join(values).split(b"\0")  # JSON text holds no NUL byte
        for text in dict.fromkeys(texts):
            known[text] = _dim3(msgspec.json.decode(text)) if text else None
        return list(map(known.__getitem__, texts))
    out: list[tuple[int, int, int] | None] = []
    for v in values:
        if v is None or v is NOT_RECORDED:
            out.append(None)
        elif type(v) is raw:
            text = bytes(v)
            found = known.get(text, _MISSING)
            if found is _MISSING:
                found = known[text] = _dim3(msgspec.json.decode(text))
            out.append(found)
        else:  # decoded by another reader
            out.append(_dim3(v))
    return out


class KinetoColumns:
    """The kernels (file order) of a Kineto trace and, per kernel, the innermost op that launched it (-1: none)."""

    def __init__(self, stream: BinaryIO, top_level_list: bool) -> None:
        self.ops: list[Event] = []
        self.devices: list[Event] = []
        launches: list[Event] = []
        actions: dict[str, str] = {}
        seen = 0
        for batch in iter_event_batches(stream, top_level_list, PHASED):
            seen += len(batch)
            for event in batch:
                if event.ph != "X" or type(event.cat) is not str:
                    continue
                action = actions.get(event.cat)
                if action is None:
                    action = actions[event.cat] = _action(event.cat)
                if action == "op":
                    self.ops.append(event)
                elif action == "launch":
                    launches.append(event)
                elif action == "annotation":
                    if str(event.name).startswith(COLLECTIVE_ANNOTATION):
                        raise Unsupported("a collective annotation")
                elif action:
                    self.devices.append(event)
        if seen == 0 or not self.devices or len(self.devices) > MAX_RECORDS or len(self.ops) > 4 * MAX_RECORDS:
            raise Unsupported("no kernels (or too many): the reference says what it makes of the file")
        self._kernel_columns(actions)
        self._op_columns()
        self.kernel_op = self._attribute(launches)

    def _kernel_columns(self, actions: dict[str, str]) -> None:
        devices = self.devices
        kinds = [_DEVICE_ACTIONS[actions[e.cat]] for e in devices]
        self.categories = [k[0] for k in kinds]
        self.device_kinds = [k[1] for k in kinds]
        self.names = _names([e.name for e in devices])
        self.ts_us = _numbers([e.ts for e in devices])
        self.dur_us = _numbers([e.dur for e in devices])
        if (self.dur_us < 0).any():
            raise Unsupported("a negative duration")
        args = [_NO_ARGS if e.args is None else e.args for e in devices]
        if set(map(attrgetter("collective_name"), args)) != {None}:
            raise Unsupported("a collective kernel")
        self.correlations = _ints(map(attrgetter("correlation"), args))
        self.nbytes = _ints(a.size if a.bytes is msgspec.UNSET else a.bytes for a in args)
        self.grids = _dim3s(list(map(attrgetter("grid"), args)))
        self.blocks = _dim3s(list(map(attrgetter("block"), args)))

    def _op_columns(self) -> None:
        ops = self.ops
        self.op_ts = _numbers([e.ts for e in ops])
        dur = _numbers([e.dur for e in ops])
        if (dur < 0).any():
            raise Unsupported("a negative op duration")
        self.op_end = self.op_ts + dur
        self._clipped: dict[str, str] = {}
        self.op_thread = self._threads(ops)
        order = np.lexsort((-self.op_end, self.op_ts))  # kineto._time_order: call id = position
        self.call_ids = np.empty(len(ops), dtype=np.int64)
        self.call_ids[order] = np.arange(len(ops))
        by_thread = order[np.argsort(self.op_thread[order], kind="stable")]
        threads = self.op_thread[by_thread]
        first = np.flatnonzero(np.r_[True, threads[1:] != threads[:-1]]) if len(ops) else np.zeros(0, np.int64)
        segment = np.repeat(first, np.diff(np.r_[first, len(ops)]))
        previous = _previous_enclosing(self.op_end[by_thread], segment)
        self.parent = np.full(len(ops), -1, dtype=np.int64)
        self.parent[by_thread] = np.where(previous >= 0, by_thread[np.maximum(previous, 0)], -1)
        self.by_thread, self.thread_codes, self.thread_first = by_thread, threads[first], first

    _thread_index: dict[tuple[Any, Any], int]

    def op_name(self, index: int) -> str:
        """An op's name, clipped (``clip_name``), once per distinct name."""
        name = self.ops[index].name
        if type(name) is not str:
            return clip_name(name)
        clipped = self._clipped.get(name)
        if clipped is None:
            clipped = self._clipped[name] = clip_name(name)
        return clipped

    def _threads(self, events: list[Event]) -> np.ndarray:
        pids, tids = list(map(_PID, events)), list(map(_TID, events))
        if not set(map(type, pids)) | set(map(type, tids)) <= {int, str}:
            raise Unsupported("a process or thread id that is not an int or a string")
        if not hasattr(self, "_thread_index"):
            self._thread_index = {}
        index = self._thread_index
        return np.array([index.setdefault(p, len(index)) for p in zip(pids, tids, strict=True)], dtype=np.int64)

    def _attribute(self, launches: list[Event]) -> np.ndarray:
        """Per kernel, its op (``kineto._records``): through its launch, else its External id."""
        correlations = [(e.args or _NO_ARGS).correlation for e in launches]
        if not set(map(type, correlations)) <= {int} or len(launches) >= 4 * MAX_RECORDS:
            raise Unsupported("a launch without an int correlation id")
        position_of = dict(zip(correlations, range(len(correlations)), strict=True))  # the last launch counts
        launch = np.fromiter(map(position_of.get, self.correlations, repeat(-1)), dtype=np.int64,
                             count=len(self.correlations))  # None (no id) is no key: the ids are ints
        has = launch >= 0
        used = np.unique(launch[has])
        events = [launches[i] for i in used.tolist()]
        ts = _numbers([e.ts for e in events])
        thread = self._threads(events)
        found = self._find(thread, ts)
        op = np.full(len(self.devices), -1, dtype=np.int64)
        slot = np.searchsorted(used, launch[has])
        op[has] = found[slot]
        slots = np.full(len(self.devices), -1, dtype=np.int64)
        slots[has] = slot
        unplaced = np.flatnonzero(op < 0).tolist()  # their launch's External id, else their own (read only here)
        launch_ids = _ints((events[s].args or _NO_ARGS).external_id if s >= 0 else None
                           for s in slots[unplaced].tolist())
        own_ids = _ints((self.devices[k].args or _NO_ARGS).external_id for k in unplaced)
        missing: list[tuple[int, int]] = []
        for k, launch_id, own_id in zip(unplaced, launch_ids, own_ids, strict=True):
            either = launch_id if launch_id is not None else own_id
            if either is not None:
                missing.append((k, either))
        if missing:
            by_external: dict[int, int] = {}
            for i, each in enumerate(_ints(_NO_ARGS.external_id if e.args is None else e.args.external_id
                                           for e in self.ops)):
                if each is not None:
                    by_external[each] = -1 if each in by_external else i
            for k, own in missing:
                op[k] = by_external.get(own, -1)
        return op

    def _find(self, thread: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """The innermost op of each (thread, time) holding it (``kineto._Locator.find``); -1 where none."""
        out = np.full(len(ts), -1, dtype=np.int64)
        starts = self.op_ts[self.by_thread]
        bounds = np.r_[self.thread_first, len(self.ops)]
        for position, code in enumerate(self.thread_codes.tolist()):
            mine = np.flatnonzero(thread == code)
            a, b = bounds[position], bounds[position + 1]
            at = np.searchsorted(starts[a:b], ts[mine], side="right") - 1
            out[mine] = np.where(at >= 0, self.by_thread[a + np.maximum(at, 0)], -1)
        while True:  # the latest-starting op ended: climb to one that holds the time
            climb = out >= 0
            climb[climb] = self.op_end[out[climb]] < ts[climb]
            if not climb.any():
                return out
            out[climb] = self.parent[out[climb]]


class OpCalls:
    """``OpCall``s of the ops a caller asks for, parents first, as ``kineto._LazyCalls`` builds them (the backward
    node's gradients as the forward op's output shapes: ``kineto._link_backward``)."""

    def __init__(self, columns: KinetoColumns) -> None:
        self.columns = columns
        self.calls: dict[int, OpCall] = {}
        self.shapes, self.types = _Converted(_shapes), _Converted(_type_names)
        self.concrete, self.lists = _Converted(_concrete_values), _Converted(_list_shapes)
        self.gradients: dict[int, Any] | None = None

    def keys(self, indices: list[int], reads_args: Callable[[str], bool]) -> list[tuple[Any, ...]]:
        """What each op's call holds besides its id and times: (name, raw JSON of its dims, types, concrete values
        and strides joined by NUL bytes (which JSON text cannot hold; absent: empty), outputs); only the name for
        an op whose arguments no reader reads (``reads_args`` of its name False)."""
        ops, name_of = self.columns.ops, self.columns.op_name
        out: list[tuple[Any, ...]] = []
        join, absent = b"\0".join, NOT_RECORDED
        read: dict[str, bool] = {}
        try:
            for i in indices:
                args, name = ops[i].args, name_of(i)
                wanted = read.get(name)
                if wanted is None:
                    wanted = read[name] = reads_args(name)
                if args is None or not wanted:
                    if args is not None and args.collective_name is not None:
                        raise Unsupported("an op that records a collective")
                    out.append((name, None, None))
                    continue
                if args.collective_name is not None:
                    raise Unsupported("an op that records a collective")
                dims = args.input_dims
                text = join((args.legacy_input_dims if dims is absent else dims, args.input_types,
                             args.concrete_inputs, args.input_strides))
                sequence = args.sequence
                out.append((name, text, None if type(sequence) is not int else self._outputs(i)))
        except TypeError:  # a field decoded by the ijson fallback (not raw JSON)
            raise Unsupported("a field decoded by the ijson fallback") from None
        return out

    def _outputs(self, index: int) -> Any:
        event = self.columns.ops[index]
        name, sequence = event.name, (event.args or _NO_ARGS).sequence
        if type(sequence) is not int or (isinstance(name, str) and "Backward" in name and
                                         not name.startswith("aten::")):
            return None
        if self.gradients is None:  # the first backward node (file order) of each sequence number with shapes
            self.gradients = {}
            ops = self.columns.ops
            names = {e.name for e in ops if type(e.name) is str}
            nodes = {n for n in names if "Backward" in n and not n.startswith("aten::")}
            for each in ops:
                if type(each.name) is not str or each.name not in nodes:
                    continue
                seq = (each.args or _NO_ARGS).sequence
                if type(seq) is int and seq not in self.gradients:
                    dims = self._dims(each.args or _NO_ARGS)
                    if dims:
                        self.gradients[seq] = dims
        return self.gradients.get(sequence)

    def _dims(self, args: EventArgs) -> Any:
        return self.shapes(_raw_key(args.input_dims if args.input_dims is not NOT_RECORDED
                                    else args.legacy_input_dims))

    def __call__(self, index: int) -> OpCall:
        pending: list[int] = []
        while index >= 0 and index not in self.calls:
            pending.append(index)
            index = int(self.columns.parent[index])
        parent = self.calls[index] if index >= 0 else None
        columns = self.columns
        for i in reversed(pending):
            args = columns.ops[i].args or _NO_ARGS
            dims_raw = _raw_key(args.input_dims if args.input_dims is not NOT_RECORDED else args.legacy_input_dims)
            types = self.types(_raw_key(args.input_types))
            ts, end = float(columns.op_ts[i]), float(columns.op_end[i])
            lists = self.lists(dims_raw) if types and LIST_TYPE in types and dims_raw is not None else None
            parent = self.calls[i] = OpCall(
                int(columns.call_ids[i]), columns.op_name(i), ts * US, (end - ts) * US, self.shapes(dims_raw),
                types, self.concrete(_raw_key(args.concrete_inputs)), parent,
                self.shapes(_raw_key(args.input_strides)), self._outputs(i), lists)
        assert parent is not None
        return parent
