"""Batch prediction from columns or JSON dicts, without an ``Op`` object per row where the kind allows.

``predict_columns(hw, {"kind": [...], "m": [...], "n": [...], "k": [...], "dtype": [...]})`` takes a
table (field name -> array, one row per op; a ``shape`` column is an ops x rank array), and
``predict_dicts(hw, [{"kind": "matmul", ...}, ...])`` takes what ``predict_many`` takes. Kinds whose
class reads ``OpColumns`` (``columnar``: matmul, the row ops, elementwise, attention, conv2d, embedding and the
collectives but hostcopy) skip the per-op objects; the others are built with ``make_op``. The answers are
``predict_many``'s, and ``CostBatch.ops`` builds each row's ``Op`` when it is asked for.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat
from operator import itemgetter
from types import SimpleNamespace
from typing import Any, overload

import numpy as np

from perfmodel import row_keys, uncalibrated_interval
from perfmodel.cost import CostBatch
from perfmodel.cost_stitch import Stitch
from perfmodel.efficiency import ModelDefaults
from perfmodel.machine import tables
from perfmodel.ops import Op, OpError, Work, make_op, op_class, op_kinds
from perfmodel.ops.base import FloatArray, OpColumns
from perfmodel.ops.columns import factorize, from_arrays, from_dicts, row_op
from perfmodel.ops.field_rows import build_ops
from perfmodel.roofline import HardwareLike, SpaceName, Timing, evaluate, resolve_hardware
from perfmodel.search import choice_memo
from perfmodel.search.gemm_space import compact_space, full_space

IntArray = np.ndarray[Any, np.dtype[np.intp]]
Part = tuple[OpColumns | list[Op], IntArray]  # one kind's ops and their rows in the batch


class RowOps(Sequence[Op]):
    """The ops of a batch, each built when first asked for (from its columns)."""

    def __init__(self, n: int, parts: list[Part]) -> None:
        self._n = n
        self._parts = [ops for ops, _ in parts]
        # which part holds each row, and where in it (the narrowest integers that hold them: 5-9 bytes a row)
        self._part = np.zeros(n, dtype=np.min_scalar_type(max(len(parts) - 1, 0)))
        self._position = np.zeros(n, dtype=np.int32 if n < 2**31 else np.intp)
        for p, (_, rows) in enumerate(parts):
            self._part[rows] = p
            self._position[rows] = np.arange(rows.size)
        self._built: dict[int, Op] = {}

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Op: ...

    @overload
    def __getitem__(self, i: slice) -> list[Op]: ...

    def __getitem__(self, i: int | slice) -> Op | list[Op]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        op = self._built.get(i)
        if op is None:
            ops, j = self._parts[int(self._part[i])], int(self._position[i])
            op = ops[j] if isinstance(ops, list) else row_op(ops, j)
            self._built[i] = op
        return op

    def __iter__(self) -> Iterator[Op]:
        return (self[i] for i in range(self._n))


def _work(parts: list[Part], n: int, granularity: float) -> Work:
    """The work of every part, in batch row order."""
    works = [(ops.cls if isinstance(ops, OpColumns) else type(ops[0])).work(ops, granularity)  # type: ignore[arg-type]
             for ops, _ in parts]
    if len(parts) == 1 and np.array_equal(parts[0][1], np.arange(n)):
        return works[0]
    return Work.interleave(works, [rows for _, rows in parts], n)


def _interval_ratios(parts: list[Part], n: int) -> FloatArray:
    """Per row, the (low, high) ratios of its class's uncalibrated band (``uncalibrated_interval``)."""
    ratios = np.empty((n, 2))
    for ops, rows in parts:
        if isinstance(ops, list):
            ratios[rows] = uncalibrated_interval.interval_s(ops, np.ones(len(ops)))
            continue
        passes = ops.values.get("pass_", np.broadcast_to(np.array("forward"), ops.n))
        one = bool(ops.n) and (passes.strides[0] == 0 or bool((passes == passes[0]).all()))
        names, inverse = (passes[:1], None) if one else np.unique(passes, return_inverse=True)
        proxies = [SimpleNamespace(kind=ops.cls.kind, pass_=str(p)) for p in names.tolist()]
        band = uncalibrated_interval.interval_s(proxies, np.ones(len(proxies)))  # type: ignore[arg-type]
        if rows.size == n and np.array_equal(rows, np.arange(n)):  # the whole batch, in order (a chunk of one kind)
            rows = slice(None)  # type: ignore[assignment]
        ratios[rows] = band[0] if inverse is None else band[inverse.ravel()]  # one pass: its row, broadcast
    return ratios


def _predict(hardware: HardwareLike, parts: list[Part], n: int, timing: Timing, warm_cache: bool,
             defaults: ModelDefaults | None, space: SpaceName) -> CostBatch:
    hw = resolve_hardware(hardware)
    work = _work(parts, n, float(hw.dram.access_granularity_bytes or 1))
    t = tables(hw)
    batch = evaluate(work, RowOps(n, parts), hw, timing, warm_cache, defaults,
                     full_space(t) if space == "full" else compact_space(t))
    batch.uncalibrated_interval_s = batch.time_s[:, None] * _interval_ratios(parts, n)
    return batch


def predict_dicts(hardware: HardwareLike, dicts: Sequence[Mapping[str, Any]], timing: Timing = "kernel",
                  warm_cache: bool = False, defaults: ModelDefaults | None = None,
                  space: SpaceName = "compact") -> CostBatch:
    """``predict_many`` of JSON-style dicts; columnar kinds are read field by field into columns, the others
    built column-checked (``field_rows.build_ops``), and a dict repeated (same keys in the same order, same values
    of the same types) is predicted once when a spread sample shows repeats (``_distinct``)."""
    distinct = _distinct(dicts)
    if distinct is not None and len(distinct[0]) < len(dicts):
        first, inverse = distinct
        batch = _predict_dicts([dicts[i] for i in first], hardware, timing, warm_cache, defaults, space)
        return batch.take(inverse)
    return _predict_dicts(dicts, hardware, timing, warm_cache, defaults, space)


def _distinct(dicts: Sequence[Mapping[str, Any]]) -> tuple[list[int], IntArray] | None:
    """The first row of each distinct dict and each row's distinct number; None when a row is not a dict of
    JSON values (those go the plain way, which names any error).

    Dicts are told apart by their ``marshal`` bytes (format 2: no references between objects, so equal dicts
    give equal bytes), ~2.5x faster than ``repr``. Each value's type tag and bits are in the bytes: 1, 1.0, True
    and "1" differ, and so do 0.0 and -0.0. A tag names one exact type (``str``, ``int``, ``float``, ``list``...)
    except a byte string, which any buffer (a numpy scalar) also writes: rows with the same bytes have the same
    tags, so checking the first row of each distinct dict for JSON types (lists included) checks every row.

    A batch of more than ``SAMPLE_DICTS`` rows whose spread sample of about that many rows has no two equal is
    not merged (None): rows repeated so rarely save less than marshalling every row costs (the answers are the
    same either way). A batch of up to ``SAMPLE_DICTS`` rows is its own sample."""
    step = max(1, len(dicts) // SAMPLE_DICTS)
    try:
        sample = list(map(marshal.dumps, [dicts[i] for i in range(0, len(dicts), step)],  # type: ignore[arg-type]
                          repeat(_MARSHAL_FORMAT)))
        if len(set(sample)) == len(sample):  # no two of a spread sample equal: too few repeats to pay
            return None
        keys = sample if step == 1 else list(map(marshal.dumps, dicts, repeat(_MARSHAL_FORMAT)))  # type: ignore[arg-type]
    except ValueError:  # not a dict, or a value marshal does not know
        return None
    seen: dict[bytes, int] = {}
    inverse = [seen.setdefault(key, len(seen)) for key in keys]  # numbered in order of first appearance
    if len(seen) == len(keys):  # no dict repeats: nothing to merge (the plain way checks every row anyway)
        return None
    codes = np.array(inverse, dtype=np.intp)
    new = np.ones(codes.size, dtype=bool)  # a row whose number exceeds every earlier one's is its dict's first
    new[1:] = codes[1:] > np.maximum.accumulate(codes)[:-1]
    first = np.flatnonzero(new).tolist()
    if not all(dicts[i].__class__ is dict and all(map(_json_value, dicts[i].values())) for i in first):
        return None
    return first, codes


SAMPLE_DICTS = 256  # spread rows marshalled first: a batch is merged only when two of them are equal (or it is short)
_MARSHAL_FORMAT = 2  # the last format without references between objects (3 added them, keyed by identity)
_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


def _json_value(value: Any) -> bool:
    """A JSON scalar (exact type) or a list of JSON values."""
    if value.__class__ is list:
        return all(map(_json_value, value))
    return value.__class__ in _JSON_SCALARS


def _predict_dicts(dicts: Sequence[Mapping[str, Any]], hardware: HardwareLike, timing: Timing, warm_cache: bool,
                   defaults: ModelDefaults | None, space: SpaceName) -> CostBatch:
    parts: list[Part] = []
    for kind, rows in _kind_rows(dicts).items():
        cls = op_class(kind)
        picked = list(itemgetter(*rows.tolist())(dicts)) if rows.size > 1 else [dicts[int(rows[0])]]
        ops: OpColumns | list[Op] = from_dicts(cls, picked) if cls.columnar else build_ops(cls, picked)
        parts.append((ops, rows))
    if len(dicts) > DICT_CHUNK_ROWS:
        batch = _predict_part_chunks(hardware, parts, len(dicts), timing, warm_cache, defaults, space)
        if batch is not None:
            return batch
    return _predict(hardware, parts, len(dicts), timing, warm_cache, defaults, space)


def _predict_part_chunks(hardware: HardwareLike, parts: list[Part], n: int, timing: Timing, warm_cache: bool,
                         defaults: ModelDefaults | None, space: SpaceName) -> CostBatch | None:
    """The ``n`` rows of ``parts`` (one kind each, ops already read, rows ascending) predicted ``DICT_CHUNK_ROWS``
    consecutive rows at a time into arrays allocated once (``Stitch``), as ``_predict_table_chunks`` does for a
    table: the same answers, with one chunk's work and intermediate columns alive at a time instead of the whole
    batch's (the dict path's peak was ~1.5 kB a row, ~5.6 kB for attention's candidates). None when two chunks'
    batches do not stack (other keys: the caller predicts the batch in one piece)."""
    stitch = Stitch(n)
    with choice_memo.scope():  # each distinct GEMM shape is searched once for the whole batch
        for start in range(0, n, DICT_CHUNK_ROWS):
            end = min(start + DICT_CHUNK_ROWS, n)
            chunk: list[Part] = []
            for ops, rows in parts:
                lo, hi = np.searchsorted(rows, (start, end)).tolist()
                if hi > lo:
                    some: OpColumns | list[Op] = (
                        OpColumns(ops.cls, hi - lo, {k: v[lo:hi] for k, v in ops.values.items()})
                        if isinstance(ops, OpColumns) else ops[lo:hi])
                    chunk.append((some, rows[lo:hi] - start))
            batch = _predict(hardware, chunk, end - start, timing, warm_cache, defaults, space)
            if not stitch.add(start, batch):
                return None
            del batch
    return stitch.batch(RowOps(n, parts))


def _kind_rows(dicts: Sequence[Mapping[str, Any]]) -> dict[str, IntArray]:
    """Each kind's rows, kinds in order of first appearance and rows in batch order; a row that is not a mapping
    or whose kind is not a string raises ``make_op``'s error. Plain dicts are grouped at once (their kinds
    numbered through one dict lookup each and sorted stably: no Python loop over the rows)."""
    if set(map(type, dicts)) == {dict}:
        kinds: list[Any] = [d.get("kind") for d in dicts]
        if set(map(type, kinds)) == {str}:
            names: list[str] = list(dict.fromkeys(kinds))  # in order of first appearance
            if len(names) == 1:
                return {names[0]: np.arange(len(kinds), dtype=np.intp)}
            code_of = {name: code for code, name in enumerate(names)}
            codes = np.fromiter(map(code_of.__getitem__, kinds), dtype=np.intp, count=len(kinds))
            order = np.argsort(codes, kind="stable")
            ends = np.cumsum(np.bincount(codes, minlength=len(names)))
            return {name: order[end - count:end] for name, end, count in
                    zip(names, ends.tolist(), np.bincount(codes, minlength=len(names)).tolist(), strict=True)}
    return _kind_rows_one_by_one(dicts)


def _kind_rows_one_by_one(dicts: Sequence[Mapping[str, Any]]) -> dict[str, IntArray]:
    """``_kind_rows`` row by row (any mapping; raises for the first row without a string kind)."""
    groups: dict[str, list[int]] = {}
    for i, d in enumerate(dicts):
        kind = d.get("kind") if isinstance(d, Mapping) else None
        if not isinstance(kind, str):
            make_op(d)  # type: ignore[arg-type]  # raises make_op's error
            raise OpError("?", "kind", "missing or not a string")
        groups.setdefault(kind, []).append(i)
    return {kind: np.array(rows, dtype=np.intp) for kind, rows in groups.items()}


CHUNK_ROWS = 1 << 14  # a table of more rows is predicted this many rows at a time (``predict_columns``)
DICT_CHUNK_ROWS = 1 << 13  # JSON dicts: half a table's chunk, as each dict row also holds its parsed op
# (speed27: 1M distinct dicts peak 309 B/op at 16,384 rows a chunk, 295 at 8,192; predict_speed.py --dict-rows)


def predict_columns(hardware: HardwareLike, columns: Mapping[str, Any], timing: Timing = "kernel",
                    warm_cache: bool = False, defaults: ModelDefaults | None = None,
                    space: SpaceName = "compact") -> CostBatch:
    """Predict the ops of a table: ``columns["kind"]`` names each row's kind, the other columns its fields
    (``dtype`` as names, a ``shape`` column as an ops x rank array; a kind ignores the columns it has no
    field for). Rows of a kind whose class does not read columns are built as ``Op``s from their cells.

    A table of numpy arrays longer than ``CHUNK_ROWS`` is predicted ``CHUNK_ROWS`` rows at a time into arrays
    allocated once (``cost_stitch``): the same answers, with one chunk's intermediate columns alive at a time
    instead of the whole table's."""
    if "kind" not in columns:
        raise OpError("?", "kind", "the table has no 'kind' column")
    n = len(columns["kind"])
    if n > CHUNK_ROWS and all(isinstance(v, np.ndarray) and len(v) == n for v in columns.values()):
        args = (timing, warm_cache, defaults, space)
        batch = _predict_distinct(hardware, columns, n, *args)
        if batch is None:
            batch = _predict_chunks(hardware, columns, n, *args)
        if batch is not None:
            return batch
    parts, n = _table_parts(columns)
    return _predict(hardware, parts, n, timing, warm_cache, defaults, space)


MOST_DISTINCT = 0.5  # a table whose sample has more distinct rows than this share is predicted chunk by chunk


def _predict_distinct(hardware: HardwareLike, columns: Mapping[str, Any], n: int, timing: Timing, warm_cache: bool,
                      defaults: ModelDefaults | None, space: SpaceName) -> CostBatch | None:
    """``predict_columns`` of a table that repeats rows: each distinct row of a kind (its fields' values, bit for
    bit; ``row_keys``) predicted once, and every row given its distinct row's answers (``CostBatch.take``).
    None when a spread sample of the table has more than ``MOST_DISTINCT`` distinct rows (merging would not pay)
    or a row raises (the table then raises the error the one-piece path names)."""
    step = max(1, n // row_keys.SAMPLE_ROWS)
    try:
        sample, size = _table_parts({name: values[::step] for name, values in columns.items()})
        if sum(_distinct_count(ops) for ops, _ in sample) > MOST_DISTINCT * size:
            return None
        # the rows' ops are their distinct rows' (``CostBatch.take``): the whole table's columns are not kept
        merged, inverse, size = _merge(_table_parts(columns)[0], n)
        batch = _predict(hardware, merged, size, timing, warm_cache, defaults, space)
    except OpError:
        return None
    return batch.take(inverse)


def _merge(parts: list[Part], n: int) -> tuple[list[Part], IntArray, int]:
    """The parts of the ``n`` rows reduced to each kind's distinct rows (``Op`` objects and parts whose rows do
    not hash kept as they are), each row's index among them, and their count."""
    merged: list[Part] = []
    inverse = np.empty(n, dtype=np.intp)
    start = 0
    for ops, rows in parts:
        found = row_keys.distinct_rows(ops.values, ops.n) if isinstance(ops, OpColumns) else None
        first, at = found or (np.arange(len(ops), dtype=np.intp), np.arange(len(ops), dtype=np.intp))
        part: OpColumns | list[Op] = ops
        if isinstance(ops, OpColumns):
            part = OpColumns(ops.cls, int(first.size), {k: v[first] for k, v in ops.values.items()})
        merged.append((part, np.arange(start, start + first.size, dtype=np.intp)))
        inverse[rows] = start + at
        start += int(first.size)
    return merged, inverse, start


def _distinct_count(ops: OpColumns | list[Op]) -> int:
    """The distinct rows of a part (its length for ``Op`` objects or columns that do not hash)."""
    found = row_keys.distinct_rows(ops.values, ops.n) if isinstance(ops, OpColumns) else None
    return len(ops) if found is None else int(found[0].size)


def _predict_chunks(hardware: HardwareLike, columns: Mapping[str, Any], n: int, timing: Timing, warm_cache: bool,
                    defaults: ModelDefaults | None, space: SpaceName) -> CostBatch | None:
    """``predict_columns`` chunk by chunk, the rows taken kind by kind (``_kind_order``) so that a chunk holds one
    kind: its work is its class's alone (no interleaving of kinds) and its answers go to their rows in the
    table (``Stitch.add`` of an index array). The chunks of mixed kinds in table order (``_predict_table_chunks``)
    when two kinds' batches do not stack (other level or schedule keys); None when a chunk raises (the whole table
    then raises the error the one-piece path names)."""
    split = _kind_order(columns)
    if split is None:
        return None
    order, kinds = split
    stitch = Stitch(n)
    all_parts: list[Part] = []
    with choice_memo.scope():  # each distinct GEMM shape is searched once for the whole table
        for kind, lo, hi in kinds:
            cls = op_class(kind)
            for start in range(lo, hi, CHUNK_ROWS):
                rows = order[start:min(start + CHUNK_ROWS, hi)]
                try:
                    ops = (from_arrays(cls, columns, rows) if cls.columnar
                           else [_cell_op(kind, columns, int(i)) for i in rows])
                    batch = _predict(hardware, [(ops, np.arange(rows.size, dtype=np.intp))], int(rows.size),
                                     timing, warm_cache, defaults, space)
                except OpError:
                    return None
                if not stitch.add(rows, batch):
                    return _predict_table_chunks(hardware, columns, n, timing, warm_cache, defaults, space)
                del batch
                all_parts.append((ops, rows))
    return stitch.batch(RowOps(n, all_parts))


def _kind_order(columns: Mapping[str, Any]) -> tuple[IntArray, list[tuple[str, int, int]]] | None:
    """The table's rows ordered by kind (a stable partition: table order within a kind) and each kind's
    (name, start, end) in that order; None when a kind is unknown (the one-piece path names it)."""
    kinds = np.asarray(columns["kind"])
    names = op_kinds()
    codes = factorize(kinds if kinds.dtype.kind == "U" else kinds.astype(str), names)
    if (codes < 0).any():
        return None
    small = codes.astype(np.uint8 if len(names) <= 256 else np.uint16)
    order = np.argsort(small, kind="stable")  # a radix sort of the 1- or 2-byte codes
    ends = np.cumsum(np.bincount(small, minlength=len(names)))
    starts = ends - np.bincount(small, minlength=len(names))
    return order, [(names[c], int(starts[c]), int(ends[c])) for c in np.flatnonzero(ends > starts).tolist()]


def _predict_table_chunks(hardware: HardwareLike, columns: Mapping[str, Any], n: int, timing: Timing,
                          warm_cache: bool, defaults: ModelDefaults | None, space: SpaceName) -> CostBatch | None:
    """``predict_columns`` chunk by chunk in table order (every kind in each chunk); None when the chunks' batches
    do not stack (other level, engine or schedule keys) or a chunk raises (the whole table then raises the error the
    one-piece path names)."""
    stitch = Stitch(n)
    all_parts: list[Part] = []
    with choice_memo.scope():  # each distinct GEMM shape is searched once for the whole table
        for start in range(0, n, CHUNK_ROWS):
            chunk = {name: values[start:start + CHUNK_ROWS] for name, values in columns.items()}
            try:
                parts, rows = _table_parts(chunk)
                batch = _predict(hardware, parts, rows, timing, warm_cache, defaults, space)
            except OpError:
                return None
            if not stitch.add(start, batch):
                return None
            del batch
            all_parts += [(ops, at + start) for ops, at in parts]
    return stitch.batch(RowOps(n, all_parts))


def _table_parts(columns: Mapping[str, Any]) -> tuple[list[Part], int]:
    """The table's rows grouped by kind (``OpColumns`` or ``Op``s, and their rows), and its row count."""
    kinds = np.asarray(columns["kind"])
    if kinds.dtype.kind != "U":  # a unicode column is read as it is (not copied)
        kinds = kinds.astype(str)
    names = op_kinds()
    inverse = factorize(kinds, names)
    if (inverse < 0).any():
        op_class(str(kinds[inverse < 0][0]))  # raises: unknown kind, naming the known ones
    for name, values in columns.items():
        if len(values) != kinds.size:
            raise OpError("?", name, f"column of {len(values)} rows; 'kind' has {kinds.size}")
    parts: list[Part] = []
    for code, kind in enumerate(names):
        rows = np.nonzero(inverse == code)[0]
        if rows.size == 0:
            continue
        cls = op_class(kind)
        ops = from_arrays(cls, columns, rows) if cls.columnar else [_cell_op(kind, columns, int(i)) for i in rows]
        parts.append((ops, rows))
    return parts, int(kinds.size)


def _cell_op(kind: str, columns: Mapping[str, Any], i: int) -> Op:
    """The op of row ``i`` built from its cells (missing cells — None or NaN — left to the defaults)."""
    cls = op_class(kind)
    known = set(cls.__dataclass_fields__) | set(cls.aliases)
    row: dict[str, Any] = {"kind": kind}
    for name, values in columns.items():
        if name == "kind" or name not in known:
            continue
        value = values[i]
        value = value.tolist() if isinstance(value, np.ndarray | np.generic) else value
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        row[name] = value
    return make_op(row)
