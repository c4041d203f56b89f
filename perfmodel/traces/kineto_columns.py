"""A Kineto trace's kernels joined to their ops in numpy columns, for callers that need each kernel's op chain
but not a ``KernelRecord`` per kernel (``perfmodel.compare.fast_side``).

The same join as ``kineto`` (its reference): ops nested per thread (an op's parent is the nearest earlier op of its
thread, in ``_time_order``, that ends no earlier: what ``_nest``'s stack leaves on top), a launch's op the innermost
op of its thread holding its time, else the op of its External id. The events are read into columns by
``kineto_scan`` (no Python object per event; texts as interned codes, converted once per distinct text). Ops get
an ``OpCall`` only where a caller asks (``call``), parents first, with the call ids ``kineto`` gives. Any event
this path does not take as the reference does (a value of an odd type, a non-finite time, a collective, a CPU-only
profile, JSON the scanner leaves alone) raises ``Unsupported``: the caller then parses the whole file by the
reference path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, BinaryIO

import msgspec
import numpy as np

from perfmodel.traces import kineto_scan_jit as jit
from perfmodel.traces.kineto_collect import (
    _DEVICE_ACTIONS,
    COLLECTIVE_ANNOTATION,
    _action,
    _concrete_values,
    _dim3,
    _list_shapes,
    _shapes,
    _type_names,
)
from perfmodel.traces.kineto_scan import ScannedEvents, Unsupported
from perfmodel.traces.records import LIST_TYPE, MAX_RECORDS, OpCall, clip_name

__all__ = ["MAX_CHAIN", "US", "KinetoColumns", "OpCalls", "Unsupported"]

US = 1e-6
MAX_CHAIN = 256  # ops kept per chain by the reference (``kineto._chain``)
_MISSING = object()
_NUMBERS = (jit.T_INT, jit.T_FLOAT, jit.T_BIG)  # a JSON number (T_BIG: converted by ``float``)
_NONE = (jit.T_ABSENT, jit.T_NULL)  # None to the reference
_OP, _LAUNCH, _ANNOTATION = 1, 2, 3  # actions; devices from 4 on


def factorised(table: np.ndarray) -> np.ndarray:
    """A code per row of an integer table (equal rows, equal codes): the columns' codes combined where their
    product fits (``np.unique`` of rows sorts them lexically, ~10x slower), else rows compared."""
    combined = np.zeros(len(table), dtype=np.int64)
    size = 1
    for column in table.T:
        values, inverse = np.unique(column, return_inverse=True)
        size *= max(len(values), 1)
        if size >= 2**62:
            return np.unique(table, axis=0, return_inverse=True)[1].reshape(-1)
        combined = combined * len(values) + inverse.reshape(-1)
    return np.unique(combined, return_inverse=True)[1].reshape(-1)


def _only(types: np.ndarray, allowed: tuple[int, ...], what: str) -> None:
    if not np.isin(types, allowed).all():
        raise Unsupported(what)


def _numbers(types: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Times that are finite JSON numbers (as ``float(v)``, as the reference converts them)."""
    _only(types, _NUMBERS, "a time that is not a number")
    if not np.isfinite(values).all():
        raise Unsupported("a non-finite time")
    return values


def _ints(types: np.ndarray, values: np.ndarray) -> list[int | None]:
    """Ids that are ints (or None); anything else is not taken."""
    _only(types, (*_NONE, jit.T_INT), "an id that is not an int")
    return [v if t == jit.T_INT else None for v, t in zip(values.tolist(), types.tolist(), strict=True)]


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


class KinetoColumns:
    """The kernels (file order) of a Kineto trace and, per kernel, the innermost op that launched it (-1: none)."""

    def __init__(self, stream: BinaryIO, top_level_list: bool) -> None:
        events = ScannedEvents(stream, top_level_list)
        self.texts = events.texts
        self._strings: dict[int, str] = {}
        rows = events.ints
        categories = self.strings(rows[:, jit.C_CAT])
        device_actions = sorted({a for a in map(_action, categories.values()) if a in _DEVICE_ACTIONS})
        codes = {"op": _OP, "launch": _LAUNCH, "annotation": _ANNOTATION,
                 **{a: 4 + i for i, a in enumerate(device_actions)}}
        of_code = np.zeros(len(self.texts) + 1, dtype=np.int64)
        for code, text in categories.items():
            of_code[code] = codes.get(_action(text), 0)
        action = of_code[rows[:, jit.C_CAT]]
        notes = rows[(action == _ANNOTATION) & (rows[:, jit.C_NAME_T] == jit.T_STR), jit.C_NAME]
        if any(n.startswith(COLLECTIVE_ANNOTATION) for n in self.strings(notes).values()):
            raise Unsupported("a collective annotation")
        is_device = action >= 4
        n_devices, n_ops = int(is_device.sum()), int((action == _OP).sum())
        if events.seen == 0 or not n_devices or n_devices > MAX_RECORDS or n_ops > 4 * MAX_RECORDS:
            raise Unsupported("no kernels (or too many): the reference says what it makes of the file")
        self.op_rows, self.op_times = rows[action == _OP], events.times[action == _OP]
        self.op_count = n_ops
        self._thread_index: dict[tuple[int, ...], int] = {}
        self._thread_texts: dict[str, int] = {}
        self._kernel_columns(rows[is_device], events.times[is_device], action[is_device] - 4, device_actions)
        self._op_columns()
        self.kernel_op = self._attribute(rows[action == _LAUNCH], events.times[action == _LAUNCH])

    def strings(self, codes: np.ndarray) -> dict[int, str]:
        """The decoded string of each distinct code (once per code)."""
        wanted = [c for c in np.unique(codes[codes >= 0]).tolist() if c not in self._strings]
        for code in wanted:
            try:
                value: Any = msgspec.json.decode(self.texts[code])
            except (msgspec.DecodeError, UnicodeDecodeError) as exc:
                raise Unsupported("a string msgspec does not decode") from exc
            if type(value) is not str:  # pragma: no cover - the scanner interns strings there
                raise Unsupported("not a string")
            self._strings[code] = value
        return {c: self._strings[c] for c in np.unique(codes[codes >= 0]).tolist()}

    def _text(self, code: int) -> bytes | None:
        return None if code < 0 else self.texts[code]

    def _kernel_columns(self, rows: np.ndarray, times: np.ndarray, action: np.ndarray, actions: list[str]) -> None:
        kinds = [_DEVICE_ACTIONS[a] for a in actions]
        listed = action.tolist()
        self.categories = [kinds[a][0] for a in listed]
        self.device_kinds = [kinds[a][1] for a in listed]
        _only(rows[:, jit.C_NAME_T], (jit.T_STR,), "a name that is not a string")
        clipped = {c: clip_name(n) for c, n in self.strings(rows[:, jit.C_NAME]).items()}
        self.names = list(map(clipped.__getitem__, rows[:, jit.C_NAME].tolist()))
        self.ts_us = _numbers(rows[:, jit.C_TS_T], times[:, 0])
        self.dur_us = _numbers(rows[:, jit.C_DUR_T], times[:, 1])
        if (self.dur_us < 0).any():
            raise Unsupported("a negative duration")
        _only(rows[:, jit.C_COLL_T], _NONE, "a collective kernel")
        self.device_ext = rows[:, [jit.C_EXT_T, jit.C_EXT]]
        _only(rows[:, jit.C_CORR_T], (*_NONE, jit.T_INT), "a correlation id that is not an int")
        self.has_correlation = rows[:, jit.C_CORR_T] == jit.T_INT
        self.correlation = rows[:, jit.C_CORR]
        from_size = rows[:, jit.C_BYTES_T] == jit.T_ABSENT
        self.nbytes = _ints(np.where(from_size, rows[:, jit.C_SIZE_T], rows[:, jit.C_BYTES_T]),
                            np.where(from_size, rows[:, jit.C_SIZE], rows[:, jit.C_BYTES]))
        self.grids = self._dim3s(rows[:, jit.C_GRID])
        self.blocks = self._dim3s(rows[:, jit.C_BLOCK])

    def _dim3s(self, codes: np.ndarray) -> list[tuple[int, int, int] | None]:
        """Grid or block sizes as ``Collector`` converts them (``_dim3``), once per distinct raw text."""
        known: dict[int, Any] = {-1: None}
        for code in np.unique(codes[codes >= 0]).tolist():
            known[code] = _dim3(msgspec.json.decode(self.texts[code]))
        return list(map(known.__getitem__, codes.tolist()))

    def _op_columns(self) -> None:
        rows, times = self.op_rows, self.op_times
        self.op_ts = _numbers(rows[:, jit.C_TS_T], times[:, 0])
        dur = _numbers(rows[:, jit.C_DUR_T], times[:, 1])
        if (dur < 0).any():
            raise Unsupported("a negative op duration")
        self.op_end = self.op_ts + dur
        _only(rows[:, jit.C_NAME_T], (jit.T_STR,), "an op name that is not a string")
        names = self.strings(rows[:, jit.C_NAME])
        distinct = {n: i for i, n in enumerate(dict.fromkeys(names.values()))}  # one code per decoded name
        self.name_texts = list(distinct)
        self.clipped = [clip_name(n) for n in self.name_texts]
        to_name = np.zeros(len(self.texts) + 1, dtype=np.int64)
        for code, name in names.items():
            to_name[code] = distinct[name]
        self.op_name_code = to_name[rows[:, jit.C_NAME]]
        n = len(rows)
        self.op_thread = self._threads(rows)
        order = np.lexsort((-self.op_end, self.op_ts))  # kineto._time_order: call id = position
        self.call_ids = np.empty(n, dtype=np.int64)
        self.call_ids[order] = np.arange(n)
        by_thread = order[np.argsort(self.op_thread[order], kind="stable")]
        threads = self.op_thread[by_thread]
        first = np.flatnonzero(np.r_[True, threads[1:] != threads[:-1]]) if n else np.zeros(0, np.int64)
        segment = np.repeat(first, np.diff(np.r_[first, n]))
        previous = _previous_enclosing(self.op_end[by_thread], segment)
        self.parent = np.full(n, -1, dtype=np.int64)
        self.parent[by_thread] = np.where(previous >= 0, by_thread[np.maximum(previous, 0)], -1)
        self.by_thread, self.thread_codes, self.thread_first = by_thread, threads[first], first

    def op_name(self, index: int) -> str:
        """An op's name, clipped (``clip_name``)."""
        return self.clipped[int(self.op_name_code[index])]

    def _threads(self, rows: np.ndarray) -> np.ndarray:
        """A code per (pid, tid) (ints and strings, strings by their decoded text), shared by ops and launches."""
        kinds = rows[:, [jit.C_PID_T, jit.C_TID_T]]
        _only(kinds, (jit.T_INT, jit.T_STR), "a process or thread id that is not an int or a string")
        values = rows[:, [jit.C_PID, jit.C_TID]].copy()
        texts = self.strings(values[kinds == jit.T_STR])
        canonical = self._thread_texts
        for text in texts.values():
            canonical.setdefault(text, len(canonical))
        if texts:
            to_text = np.zeros(max(texts) + 1, dtype=np.int64)
            for code, text in texts.items():
                to_text[code] = canonical[text]
            values[kinds == jit.T_STR] = to_text[values[kinds == jit.T_STR]]
        table = np.column_stack((kinds, values))
        inverse = factorised(table)
        _, first = np.unique(inverse, return_index=True)
        index = self._thread_index
        codes = np.array([index.setdefault(tuple(k), len(index)) for k in table[first].tolist()], dtype=np.int64)
        return codes[inverse]

    def _attribute(self, launches: np.ndarray, times: np.ndarray) -> np.ndarray:
        """Per kernel, its op (``kineto._records``): through its launch, else its External id."""
        if not (launches[:, jit.C_CORR_T] == jit.T_INT).all() or len(launches) >= 4 * MAX_RECORDS:
            raise Unsupported("a launch without an int correlation id")
        correlations = launches[:, jit.C_CORR]
        by_id = np.argsort(correlations, kind="stable")
        ids = correlations[by_id]
        last = np.r_[ids[1:] != ids[:-1], True]  # the last launch of an id counts
        ids, position = ids[last], by_id[last]
        count = len(self.names)
        at = np.minimum(np.searchsorted(ids, self.correlation), max(len(ids) - 1, 0))
        found_id = self.has_correlation & (ids[at] == self.correlation) if len(ids) else np.zeros(count, bool)
        launch = np.where(found_id, position[at] if len(ids) else -1, -1)
        has = launch >= 0
        used = np.unique(launch[has])
        ts = _numbers(launches[used, jit.C_TS_T], times[used, 0])
        thread = self._threads(launches[used])
        found = self._find(thread, ts)
        op = np.full(count, -1, dtype=np.int64)
        slot = np.searchsorted(used, launch[has])
        op[has] = found[slot]
        slots = np.full(count, -1, dtype=np.int64)
        slots[has] = slot
        unplaced = np.flatnonzero(op < 0)  # their launch's External id, else their own (read only here)
        from_launch = slots[unplaced] >= 0
        launch_rows = launches[used[slots[unplaced][from_launch]]]
        launch_types = np.full(len(unplaced), jit.T_ABSENT, dtype=np.int64)
        launch_values = np.zeros(len(unplaced), dtype=np.int64)
        launch_types[from_launch] = launch_rows[:, jit.C_EXT_T]
        launch_values[from_launch] = launch_rows[:, jit.C_EXT]
        launch_ids = _ints(launch_types, launch_values)
        own_ids = _ints(self.device_ext[unplaced, 0], self.device_ext[unplaced, 1])
        missing: list[tuple[int, int]] = []
        for k, launch_id, own_id in zip(unplaced.tolist(), launch_ids, own_ids, strict=True):
            either = launch_id if launch_id is not None else own_id
            if either is not None:
                missing.append((k, either))
        if missing:
            by_external: dict[int, int] = {}
            for i, each in enumerate(_ints(self.op_rows[:, jit.C_EXT_T], self.op_rows[:, jit.C_EXT])):
                if each is not None:
                    by_external[each] = -1 if each in by_external else i
            for k, own in missing:
                op[k] = by_external.get(own, -1)
        return op

    def _find(self, thread: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """The innermost op of each (thread, time) holding it (``kineto._Locator.find``); -1 where none."""
        out = np.full(len(ts), -1, dtype=np.int64)
        starts = self.op_ts[self.by_thread]
        bounds = np.r_[self.thread_first, self.op_count]
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
        rows = columns.op_rows
        self.dims = np.where(rows[:, jit.C_DIMS] >= 0, rows[:, jit.C_DIMS], rows[:, jit.C_LEGACY])
        nodes = [("Backward" in n and not n.startswith("aten::")) for n in columns.name_texts]
        self.node = np.array(nodes or [False], dtype=bool)[columns.op_name_code]

    def keys(self, indices: list[int], reads_args: Callable[[str], bool]) -> list[int]:
        """A code per op of what its call holds besides its id and times (equal codes: equal calls): its name, the
        raw JSON texts of its dims, types, concrete values and strides, and its outputs; only the name for an op
        whose arguments no reader reads (``reads_args`` of its name False)."""
        columns = self.columns
        at = np.array(indices, dtype=np.int64)
        rows = columns.op_rows[at]
        has_args = rows[:, jit.C_ARGS] == 1
        if (has_args & ~np.isin(rows[:, jit.C_COLL_T], _NONE)).any():
            raise Unsupported("an op that records a collective")
        clipped = {n: i for i, n in enumerate(dict.fromkeys(columns.clipped))}
        name_code = np.array([clipped[n] for n in columns.clipped], dtype=np.int64)[columns.op_name_code[at]]
        wanted_of = np.array([reads_args(n) for n in clipped] or [False], dtype=bool)
        read = has_args & wanted_of[name_code]
        outputs = np.full(len(at), -1, dtype=np.int64)
        values: dict[Any, int] = {None: -1}
        for position in np.flatnonzero(read & (rows[:, jit.C_SEQ_T] == jit.T_INT)).tolist():
            value = self._outputs(int(at[position]))
            outputs[position] = values.setdefault(value, len(values) - 1)
        fields = np.column_stack((name_code, self.dims[at], rows[:, jit.C_TYPES], rows[:, jit.C_CONCRETE],
                                  rows[:, jit.C_STRIDES], outputs))
        fields[~read, 1:] = -2  # the name alone
        if not len(fields):
            return []
        out: list[int] = factorised(fields).tolist()
        return out

    def _outputs(self, index: int) -> Any:
        rows = self.columns.op_rows
        if rows[index, jit.C_SEQ_T] != jit.T_INT or self.node[index]:
            return None
        if self.gradients is None:  # the first backward node (file order) of each sequence number with shapes
            self.gradients = {}
            for i in np.flatnonzero(self.node & (rows[:, jit.C_SEQ_T] == jit.T_INT)).tolist():
                seq = int(rows[i, jit.C_SEQ])
                if seq not in self.gradients:
                    dims = self.shapes(self.columns._text(int(self.dims[i])))
                    if dims:
                        self.gradients[seq] = dims
        return self.gradients.get(int(rows[index, jit.C_SEQ]))

    def __call__(self, index: int) -> OpCall:
        pending: list[int] = []
        while index >= 0 and index not in self.calls:
            pending.append(index)
            index = int(self.columns.parent[index])
        parent = self.calls[index] if index >= 0 else None
        columns = self.columns
        text = columns._text
        for i in reversed(pending):
            row = columns.op_rows[i]
            dims_raw = text(int(self.dims[i]))
            types = self.types(text(int(row[jit.C_TYPES])))
            ts, end = float(columns.op_ts[i]), float(columns.op_end[i])
            lists = self.lists(dims_raw) if types and LIST_TYPE in types and dims_raw is not None else None
            parent = self.calls[i] = OpCall(
                int(columns.call_ids[i]), columns.op_name(i), ts * US, (end - ts) * US, self.shapes(dims_raw),
                types, self.concrete(text(int(row[jit.C_CONCRETE]))), parent,
                self.shapes(text(int(row[jit.C_STRIDES]))), self._outputs(i), lists)
        assert parent is not None
        return parent
