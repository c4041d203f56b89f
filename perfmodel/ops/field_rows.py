"""``Op.field_values`` of many JSON dicts of one kind, checked column by column (``field_rows``), and the ops built
from them (``build_ops``): the values, ops and errors of ``make_op`` row by row, with per-dict Python reduced to
a few reads.

Dicts are grouped by their keys (in order); each key's values form a column, and a column is checked at once where
its converter allows (every value an ``int`` for an int field, a finite ``float`` for a number, a ``bool`` for a flag,
each distinct dtype name parsed once), value by value with the field's own converter otherwise. Any problem (an
unknown or missing field, a value a converter rejects) sends the whole batch the row-by-row way, which raises
``make_op``'s error for the first bad row, word for word.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

from perfmodel.ops.base import Op
from perfmodel.ops.checks import OpError
from perfmodel.ops.convert import (
    Converter,
    _as_bool,
    _as_dtype,
    _as_float,
    _as_int,
    _as_int_tuple,
    _as_optional,
    _converters,
)


def field_rows(cls: type[Op], dicts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``[cls.field_values(d) for d in dicts]``: the same values (and, for a bad dict, the same error)."""
    plain = [d if d.__class__ is dict else dict(d) for d in dicts]
    rows = _columns_checked(cls, plain)
    return rows if rows is not None else [cls.field_values(d) for d in plain]


def build_ops(cls: type[Op], dicts: Sequence[Mapping[str, Any]]) -> list[Op]:
    """``[make_op(d) for d in dicts]`` of dicts whose ``kind`` is ``cls``'s: the same ops or the same error."""
    plain = [d if d.__class__ is dict else dict(d) for d in dicts]
    if getattr(cls._build, "__func__", None) is not getattr(Op._build, "__func__", None):
        return [cls._build(d) for d in plain]  # a class that rewrites its fields first (embedding's table)
    rows = _columns_checked(cls, plain)
    if rows is None:
        return [cls._build(d) for d in plain]
    try:
        return [cls(**values) for values in rows]
    except (ValueError, TypeError):  # an op's own check: the row-by-row way names the first bad row's
        return [cls._build(d) for d in plain]


def field_columns(cls: type[Op], dicts: Sequence[Mapping[str, Any]],
                  defaults: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The converted values of each field of ``cls`` over ``dicts`` as one list per field (``defaults[name]`` where
    a dict does not give it): ``field_rows`` read field by field, without a dict per row; a bad dict raises its
    error (the row-by-row way). A shape given as a list of ints stays that list (no tuple per row)."""
    return field_columns_named(cls, dicts, defaults)[0]


def field_columns_named(cls: type[Op], dicts: Sequence[Mapping[str, Any]],
                        defaults: Mapping[str, Any]) -> tuple[dict[str, list[Any]], set[str] | None]:
    """``field_columns`` and the fields some dict gives (None where the dicts were read row by row)."""
    plain = [d if d.__class__ is dict else dict(d) for d in dicts]
    groups = _groups_checked(cls, plain, shape_lists=True)
    if groups is None:
        rows = [cls.field_values(d) for d in plain]  # raises for the first bad dict
        return {name: [row.get(name, default) for row in rows] for name, default in defaults.items()}, None
    named = {name for _, names, _ in groups for name in names}
    if len(groups) == 1:  # every dict gives the same keys: the columns as they are
        given = dict(zip(groups[0][1], groups[0][2], strict=True))
        return {name: given[name] if name in given else [default] * len(plain)
                for name, default in defaults.items()}, named
    out = {name: [default] * len(plain) for name, default in defaults.items()}
    for at, names, columns in groups:
        for name, values in zip(names, columns, strict=True):
            column = out[name]
            for i, value in zip(at, values, strict=True):
                column[i] = value
    return out, named


Group = tuple[list[int], list[str], list[list[Any]]]  # a key order's rows, its fields and their converted columns


def _groups_checked(cls: type[Op], dicts: list[dict[str, Any]], shape_lists: bool = False) -> list[Group] | None:
    """The dicts grouped by key order, each group's fields converted column by column; None when a dict has an
    unknown field, lacks a required one or holds a value its field's converter rejects (the caller then goes row by
    row)."""
    if dicts and ONE_GROUP_BY_LENGTH and set(map(len, dicts)) == {len(dicts[0])}:
        try:  # every dict as long as the first and holding each of its keys: the same keys (the usual batch)
            one = _group(cls, dicts, tuple(dicts[0]), list(range(len(dicts))), shape_lists)
            return None if one is None else [one]
        except KeyError:  # a dict lacks one of the first's keys: grouped by key order below
            pass
    groups: dict[tuple[str, ...], list[int]] = {}
    order = list(map(tuple, dicts))
    if order and order.count(order[0]) == len(order):  # one key order (the usual batch): no loop over the rows
        groups[order[0]] = list(range(len(order)))
    else:
        for i, keys in enumerate(order):
            groups.setdefault(keys, []).append(i)
    out: list[Group] = []
    for keys, at in groups.items():
        group = _group(cls, dicts, keys, at, shape_lists)
        if group is None:
            return None
        out.append(group)
    return out


ONE_GROUP_BY_LENGTH = True  # dicts all as long as the first: one group read by the first's keys (no key tuples)


def _group(cls: type[Op], dicts: list[dict[str, Any]], keys: tuple[str, ...], at: list[int],
           shape_lists: bool = False) -> Group | None:
    """The group of ``dicts``' rows ``at`` read by ``keys``, its fields converted column by column; None as
    ``_groups_checked``. A row lacking one of ``keys`` raises ``KeyError``."""
    converters, required = _converters(cls)
    aliases = cls.aliases
    fields = [(key, aliases.get(key, key)) for key in keys if not (key == "kind" and key not in converters)]
    if any(name not in converters for _, name in fields) or not set(required) <= {n for _, n in fields}:
        return None
    group = [dicts[i] for i in at] if len(at) < len(dicts) else dicts
    raw = [list(map(itemgetter(key), group)) for key, _ in fields]  # a missing key raises here, before converting
    columns = []
    try:
        for (key, name), values in zip(fields, raw, strict=True):
            columns.append(_column(converters[name], key, values, shape_lists))
    except (OpError, ValueError, TypeError):
        return None
    return at, [name for _, name in fields], columns


def _columns_checked(cls: type[Op], dicts: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Each dict's converted fields, or None when a dict has an unknown field, lacks a required one or holds a
    value its field's converter rejects (the caller then goes row by row)."""
    groups = _groups_checked(cls, dicts)
    if groups is None:
        return None
    out: list[dict[str, Any]] = [{}] * len(dicts)
    for at, names, columns in groups:
        rows = zip(*columns, strict=True) if columns else ((),) * len(at)
        for i, values in zip(at, rows, strict=True):
            out[i] = dict(zip(names, values, strict=True))
    return out


def _column(convert: Converter, key: str, raw: list[Any], shape_lists: bool = False) -> list[Any]:
    """``[convert(key, v) for v in raw]``, at once where every value is of the type the converter returns as is
    (``shape_lists``: a shape given as lists of ints left as those lists, for a reader that only reads their
    elements: no tuple per row)."""
    func = convert.func if isinstance(convert, functools.partial) else None
    types = set(map(type, raw))
    if isinstance(convert, functools.partial) and func is _as_optional and type(None) not in types:
        return _column(convert.args[0], key, raw, shape_lists)  # an optional field given everywhere: its converter's
    if (func is _as_int and types == {int}) or (func is _as_bool and types == {bool}):
        return raw
    if func is _as_float and types == {float} and all(map(math.isfinite, raw)):
        return raw
    if func is _as_int_tuple and types == {list} and set(map(type, chain.from_iterable(raw))) <= {int}:
        return raw if shape_lists else list(map(tuple, raw))  # lists of ints: their tuples, as the converter makes
    if func is _as_dtype and types == {str}:
        parsed: dict[str, Any] = {value: convert(key, value) for value in set(raw)}
        return list(map(parsed.__getitem__, raw))
    one: Callable[[Any], Any] = functools.partial(convert, key)
    return list(map(one, raw))
