"""Each op's raw fields as numbers for the residual trees (``boost``): one op at a time (``op_fields``, what the fit
uses) and a whole batch at once (``field_matrix``, what prediction uses: the same numbers).

``field_matrix`` reads one field of all the ops of one class at a time (``operator.attrgetter``), converts each
distinct value of it once (``field_numbers``: the conversion ``op_fields`` applies per op) and scatters the numbers
to their rows, so that a batch of ops that all differ pays a dict lookup per field and op, not ``Op.to_dict`` and a
dict of names per op (10k ops: ~23 ms -> a few ms; docs/accuracy.md, eleventh pass calpred12).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from perfmodel.calibration.op_groups import by_type
from perfmodel.dtypes import DType
from perfmodel.ops.base import FloatArray, IntArray, Op, _json_keys

NAME_CODES = 97  # a string field (layout, algorithm, dtype) becomes crc32 % this: a category the trees split on


def field_numbers(name: str, value: Any) -> list[tuple[str, float]]:
    """The numbers one field (``name`` = ``kind.field``, ``value`` as ``Op.to_dict`` gives it) contributes: log2 of
    an integer, a flag as 0/1, a float as is, a shape as log2 of its last dimension and of the rows before it (none
    for an empty shape or one with a non-integer), a name as a category code; none for None."""
    if value is None:
        return []
    if isinstance(value, bool):
        return [(name, float(value))]
    if isinstance(value, int):
        return [(name, math.log2(max(value, 1)))]
    if isinstance(value, float):
        return [(name, value)]
    if isinstance(value, list):
        if value and all(isinstance(v, int) for v in value):
            return [(name + ".last", math.log2(max(value[-1], 1))),
                    (name + ".rows", math.log2(max(math.prod(value[:-1]), 1)))]
        return []
    return [(name, float(zlib.crc32(str(value).encode()) % NAME_CODES))]


def op_fields(op: Op) -> dict[str, float]:
    """Every field of ``op`` (``Op.to_dict``) as a number, named ``kind.field`` (``field_numbers``)."""
    out: dict[str, float] = {}
    for field, value in op.to_dict().items():
        if field != "kind":
            out.update(field_numbers(f"{op.kind}.{field}", value))
    return out


def _json_value(value: Any) -> Any:
    """A field's value as ``Op.to_dict`` writes it."""
    return value.value if isinstance(value, DType) else (list(value) if isinstance(value, tuple) else value)


def _value_key(value: Any) -> tuple[Any, ...]:
    """What makes two values of one field convert alike: equal values of the same type (1, 1.0 and True are equal
    in Python, not alike here), a tuple's element types too."""
    if isinstance(value, tuple):
        return tuple, value, tuple(map(type, value))
    return type(value), value


def _log2_at_least_1(values: list[int]) -> FloatArray:
    """``math.log2(max(v, 1))`` of each int, in C loops (the ``max`` pass skipped where every value is >= 1: then it
    returns ``v`` itself)."""
    source = values if not values or min(values) >= 1 else map(max, values, repeat(1))
    out: FloatArray = np.fromiter(map(math.log2, source), dtype=np.float64, count=len(values))
    return out


def _numbers_of_one_type(out: FloatArray, rows: IntArray, column: dict[str, int], prefix: str, types: set[type],
                         values: list[Any]) -> bool:
    """Write the numbers of a field whose values are all floats, flags, integers or tuples of integers to ``out``
    (``field_numbers``'s arithmetic, value by value in C loops: ``map``); False for any other field."""
    if len(types) != 1:
        return False
    kind = next(iter(types))
    if kind is float or kind is bool:
        if prefix in column:
            out[rows, column[prefix]] = np.array(values, dtype=np.float64)
        return True
    if kind is int:
        if prefix in column:  # one value throughout (equal ints): converted once, written to every row
            out[rows, column[prefix]] = _log2_at_least_1(values[:1] if _one_value(values) else values)
        return True
    if kind is tuple and all(values) and set(map(type, chain.from_iterable(values))) == {int}:
        if _one_value(values):  # equal tuples of ints: equal ints, the same numbers
            values = values[:1]
        if prefix + ".last" in column:
            out[rows, column[prefix + ".last"]] = _log2_at_least_1(list(map(itemgetter(-1), values)))
        if prefix + ".rows" in column:
            heads = map(itemgetter(slice(None, -1)), values)
            out[rows, column[prefix + ".rows"]] = _log2_at_least_1(list(map(math.prod, heads)))
        return True
    return False


def _one_value(values: list[Any]) -> bool:
    """Whether every one of ``values`` equals the first (``list.count``: one C loop, identity first)."""
    return len(values) > 1 and values.count(values[0]) == len(values)


def _alike(types: set[type], values: list[Any]) -> bool:
    """Whether equal ``values`` (of the ``types`` given) always convert alike: one type, an int, a name, a flag or a
    dtype, or a tuple of ints only (no 1 beside a True or a 1.0, whose conversions differ)."""
    if len(types) != 1:
        return False
    kind = next(iter(types))
    if kind is tuple:
        return set(map(type, chain.from_iterable(values))) <= {int}
    return kind in (int, str, bool) or issubclass(kind, DType)


def field_matrix(ops: Sequence[Op], fields: Sequence[str], out: FloatArray | None = None) -> FloatArray:
    """ops x ``fields``: row i holds ``op_fields(ops[i])[name]`` under each name of ``fields`` (nan where the op has
    no such number), the same floats, computed a field of one op class at a time (into ``out`` where given)."""
    column = {name: j for j, name in enumerate(fields)}
    if out is None:
        out = np.full((len(ops), len(fields)), math.nan)
    else:
        out[...] = math.nan
    for cls, rows, members in by_type(ops):
        for attribute, key in _json_keys(cls):
            prefix = f"{cls.kind}.{key}"
            wanted = [name for name in (prefix, prefix + ".last", prefix + ".rows") if name in column]
            if not wanted:  # a field the trees never split on: nothing to read
                continue
            values = list(map(attrgetter(attribute), members))
            types = set(map(type, values))
            if types == {type(None)}:  # no numbers (``field_numbers`` of None): the columns stay nan
                continue
            if _numbers_of_one_type(out, rows, column, prefix, types, values):
                continue
            keys = values if _alike(types, values) else list(map(_value_key, values))
            try:
                first = dict.fromkeys(keys)  # distinct values, first seen first (C loops, no Python per op)
            except TypeError:  # a value that does not hash: each its own
                first, keys = dict.fromkeys(range(len(values))), list(range(len(values)))
                distinct = values
            else:
                distinct = list(first) if keys is values else [key[1] for key in first]
            position = {key: u for u, key in enumerate(first)}
            code = np.fromiter(map(position.__getitem__, keys), dtype=np.intp, count=len(keys))
            numbers = np.full((len(distinct), len(fields)), math.nan)
            for u, value in enumerate(distinct):
                for name, number in field_numbers(prefix, _json_value(value)):
                    j = column.get(name)
                    if j is not None:
                        numbers[u, j] = number
            targets = [column[name] for name in wanted]
            out[rows[:, None], np.asarray(targets)[None, :]] = numbers[code][:, targets]
    return out


__all__ = ["NAME_CODES", "field_matrix", "field_numbers", "op_fields"]
