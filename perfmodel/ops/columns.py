"""Ops as columns (``OpColumns``) built from plain dicts or from arrays, checked as ``make_op`` checks them.

A class with ``columnar = True`` reads ``OpColumns`` in its ``work`` and says which rows its own checks
reject (``invalid_rows``, the vectorised ``__post_init__``). A bad row is re-built as an ``Op`` so the
error is the one ``make_op`` raises, word for word. ``row_op`` builds the ``Op`` of one row on demand.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from perfmodel.dtypes import DType, parse_dtype
from perfmodel.ops.base import DTYPE_INDEX, DTYPES, NO_DTYPE, Op, OpColumns, OpError, _schema
from perfmodel.ops.field_rows import field_columns_named

BoolArray = np.ndarray[Any, np.dtype[np.bool_]]
_DTYPE_CODES: dict[Any, int] = {None: NO_DTYPE, **DTYPE_INDEX}  # an unset optional dtype: NO_DTYPE
RANK_SUFFIX = "#rank"  # values[f"shape{RANK_SUFFIX}"]: each row's rank where the shapes came from dicts


def _kind_of(hint: Any) -> tuple[str, bool]:
    """('dtype' | 'number' | 'int' | 'flag' | 'choice' | 'shape' | 'other', optional) of a field's type hint."""
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        optional = type(None) in args
        hint = next(a for a in args if a is not type(None))
    if hint is DType:
        return "dtype", optional
    if hint is bool:
        return "flag", optional
    if hint is int:
        return "int", optional
    if hint is float:
        return "number", optional
    if typing.get_origin(hint) is tuple:
        return "shape", optional
    if typing.get_origin(hint) is Literal:
        return "choice", optional
    return "other", optional


def _default(spec: dataclasses.Field[Any]) -> Any:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return dataclasses.MISSING


def _shape_block(shapes: Sequence[tuple[int, ...]]) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Shapes as an n x rank float array, right-aligned, leading dims padded with 1."""
    ranks = set(map(len, shapes))
    if len(ranks) == 1 and 0 not in ranks:  # one rank: the shapes as they are
        return np.array(shapes, dtype=np.float64).reshape(len(shapes), -1)
    rank = max(ranks, default=1)
    block = np.ones((len(shapes), max(rank, 1)))
    for i, shape in enumerate(shapes):
        if shape:
            block[i, rank - len(shape):] = shape
    return block


def from_dicts(cls: type[Op], dicts: Sequence[Mapping[str, Any]]) -> OpColumns:
    """``OpColumns`` of ``cls`` from JSON-style dicts (each converted field by field as ``make_op`` does)."""
    hints, fields, _ = _schema(cls)
    rewrite = getattr(cls, "json_fields", None)  # a class whose JSON keys name other fields (embedding's table)
    if rewrite is not None:
        dicts = [rewrite(d) for d in dicts]
    given, named = field_columns_named(cls, dicts, {name: _default(spec) for name, spec in fields.items()})
    if named is None:  # read row by row: the fields some dict gives, from its keys
        named = {cls.aliases.get(key, key) for key in set().union(*dicts)}
    values: dict[str, np.ndarray[Any, Any]] = {}
    for name in fields:
        kind, _ = _kind_of(hints[name])
        column = given[name]
        if name not in named and (kind in ("dtype", "number", "int", "flag")
                                  or (kind == "choice" and isinstance(column[0] if column else None, str))):
            # no dict gives it: its default seen n times (a read-only view, as ``from_arrays`` gives a table's
            # missing column; the same values, no bytes per row)
            values[name] = _default_column(kind, column[0] if column else _default(fields[name]), len(dicts))
        elif kind == "dtype":
            values[name] = np.fromiter(map(_DTYPE_CODES.__getitem__, column), dtype=np.int64, count=len(column))
        elif kind in ("number", "int", "flag"):
            values[name] = np.array(column, dtype=np.float64)
        elif kind == "shape":
            values[name] = _shape_block(column)
            values[f"{name}{RANK_SUFFIX}"] = np.fromiter(map(len, column), dtype=np.int64, count=len(column))
        else:
            values[name] = np.array(column, dtype=object if kind == "other" else str)
    cols = OpColumns(cls, len(dicts), values)
    _raise_first_invalid(cols)
    return cols


def from_arrays(cls: type[Op], data: Mapping[str, Any], rows: np.ndarray[Any, np.dtype[np.intp]]) -> OpColumns:
    """``OpColumns`` of ``cls`` from the rows ``rows`` of a table of columns (field name -> array; ``dtype``
    columns hold names; a ``shape`` column is an n x rank array, right-aligned). Columns of other kinds'
    fields are ignored; a field this kind needs and the table lacks takes its default, else it is an error."""
    hints, fields, _ = _schema(cls)
    keys = {v: k for k, v in cls.aliases.items()}
    values: dict[str, np.ndarray[Any, Any]] = {}
    for name, spec in fields.items():
        kind, optional = _kind_of(hints[name])
        key = name if name in data else keys.get(name, name)
        default = _default(spec)
        if key not in data:
            if default is dataclasses.MISSING:
                raise OpError(cls.kind, key, "missing required field (no such column)")
            values[name] = _default_column(kind, default, int(rows.size))
            continue
        values[name] = _convert(cls.kind, key, kind, optional, np.asarray(data[key])[rows])
    cols = OpColumns(cls, int(rows.size), values)
    _raise_first_invalid(cols)
    return cols


def factorize(values: np.ndarray[Any, Any], names: Sequence[str]) -> np.ndarray[Any, np.dtype[np.intp]]:
    """Per element, its index in ``names`` (-1 for none): a vectorised binary search over the sorted names
    (log2 of the names' count comparisons per element, not one per name)."""
    if not names or values.shape[0] == 0:
        return np.full(values.shape[0], -1, dtype=np.intp)
    if values.dtype.kind == "U" and values.ndim == 1:
        return _factorize_unicode(values, names)
    table = np.array(names)
    order = np.argsort(table, kind="stable")
    ordered = table[order]
    at = np.minimum(np.searchsorted(ordered, values), len(names) - 1)
    codes: np.ndarray[Any, np.dtype[np.intp]] = np.where(ordered[at] == values, order[at], -1).astype(np.intp)
    return codes


FEW_NAMES = 4  # a column whose spread sample holds at most this many of the names is compared name by name
SAMPLE_ROWS = 1024  # rows of that sample


def _factorize_unicode(values: np.ndarray[Any, Any], names: Sequence[str]) -> np.ndarray[Any, np.dtype[np.intp]]:
    """``factorize`` of a unicode column. A long column whose spread sample holds few of the names (a table's kinds
    or dtypes) is compared with each of those (``values == name``, one pass each: ~30 ms per 1M rows, against ~180
    for the binary search), and only the rows none of them matched are searched."""
    n = values.shape[0]
    if n >= 4 * SAMPLE_ROWS:
        seen = np.unique(_search_unicode(values[::n // SAMPLE_ROWS], names))
        seen = seen[seen >= 0]
        if seen.size <= FEW_NAMES:
            codes = np.full(n, -1, dtype=np.intp)
            for code in seen.tolist():
                codes[values == names[code]] = code
            rest = np.flatnonzero(codes < 0)
            if rest.size:  # names the sample missed, or none
                codes[rest] = _search_unicode(values[rest], names)
            return codes
    return _search_unicode(values, names)


def _search_unicode(values: np.ndarray[Any, Any], names: Sequence[str]) -> np.ndarray[Any, np.dtype[np.intp]]:
    """``factorize`` of a unicode column: each string's fixed-width bytes compared as one ``void`` key (a memcmp,
    ~1.7x faster than comparing unicode strings); a name longer than the column's width matches no element."""
    width = values.dtype.itemsize // 4
    keep = [i for i, name in enumerate(names) if len(name) <= width]
    if not keep or width == 0:
        return np.full(values.shape[0], -1, dtype=np.intp)
    key = np.dtype((np.void, values.dtype.itemsize))
    table = np.array([names[i] for i in keep], dtype=values.dtype).view(key)
    order = np.argsort(table, kind="stable")
    ordered, index = table[order], np.array(keep, dtype=np.intp)[order]
    keys = np.ascontiguousarray(values).view(key)
    at = np.minimum(np.searchsorted(ordered, keys), ordered.size - 1)
    codes: np.ndarray[Any, np.dtype[np.intp]] = np.where(ordered[at] == keys, index[at], -1).astype(np.intp)
    return codes


def _dtype_codes(op_kind: str, key: str, optional: bool, raw: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Dtype names to codes: canonical names compared at once, the rest (aliases, None) parsed one distinct
    name at a time."""
    text = raw if raw.dtype.kind == "U" else raw.astype(str)
    canonical = [d.value for d in DTYPES]
    codes = factorize(text, canonical)
    other = np.nonzero(codes < 0)[0]
    if other.size:
        names, inverse = np.unique(text[other], return_inverse=True)
        parsed = np.empty(names.size, dtype=np.intp)
        for i, name in enumerate(names.tolist()):
            if optional and name in ("None", "", "nan"):
                parsed[i] = NO_DTYPE
                continue
            try:
                parsed[i] = DTYPE_INDEX[parse_dtype(name)]
            except ValueError as exc:
                raise OpError(op_kind, key, str(exc)) from None
        codes[other] = parsed[inverse.ravel()]
    return codes.astype(np.int64)


def _default_column(kind: str, default: Any, size: int) -> np.ndarray[Any, Any]:
    """A field's default for ``size`` rows, in the ``OpColumns`` layout."""
    # one value seen ``size`` times (a read-only view, no bytes per row): the defaults of a table's missing
    # columns are most of an ``OpColumns``' fields, and reading them indexes or broadcasts like a full column
    if kind == "dtype":
        return np.broadcast_to(np.array(NO_DTYPE if default is None else DTYPE_INDEX[default], dtype=np.int64), size)
    if kind in ("number", "int", "flag"):
        return np.broadcast_to(np.array(np.nan if default is None else float(default)), size)
    if kind == "choice":
        return np.broadcast_to(np.array(default), size)
    if kind == "shape":
        return _shape_block([default] * size)
    return np.full(size, default, dtype=object)


def _convert(op_kind: str, key: str, kind: str, optional: bool, raw: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """One column converted to the ``OpColumns`` layout, with ``make_op``'s words for a bad value."""
    if kind == "dtype":
        return _dtype_codes(op_kind, key, optional, raw)
    if kind in ("number", "int", "flag"):
        try:
            numbers: np.ndarray[Any, np.dtype[np.float64]] = raw.astype(np.float64)
        except (TypeError, ValueError):
            raise OpError(op_kind, key, "expected numbers") from None
        # NaN in an optional field is an unset cell (``None``, as ``_cell_op`` leaves it to the default)
        given = ~np.isnan(numbers) if optional else np.ones(numbers.shape, dtype=bool)
        if not np.isfinite(numbers[given]).all():
            bad = float(numbers[given][~np.isfinite(numbers[given])][0])
            raise OpError(op_kind, key, "missing required field" if np.isnan(bad) else f"expected a finite number, "
                          f"got {bad!r}")
        if kind == "int" and not (numbers[given] == np.floor(numbers[given])).all():
            bad = float(numbers[given][numbers[given] != np.floor(numbers[given])][0])
            raise OpError(op_kind, key, f"expected an integer, got {bad!r}")
        flags: np.ndarray[Any, np.dtype[np.float64]] = np.where(given, (numbers != 0), np.nan)
        return flags if kind == "flag" else numbers
    if kind == "shape":
        block = raw.astype(np.float64)
        if block.ndim != 2:
            raise OpError(op_kind, key, "a shape column is an ops x rank array")
        return block
    if kind == "choice":
        return raw.astype(str)
    return raw


def _raise_first_invalid(cols: OpColumns) -> None:
    """Raise ``make_op``'s error for the first row the class's own checks reject."""
    check = getattr(cols.cls, "invalid_rows", None)
    bad: BoolArray = check(cols) if check is not None else np.ones(cols.n, dtype=bool)
    for i in np.nonzero(bad)[0]:
        row_op(cols, int(i))  # raises for a bad row; a row only suspected bad builds and passes


def row_values(cols: OpColumns, i: int) -> dict[str, Any]:
    """Row ``i`` as the field values of its ``Op``."""
    hints, fields, _ = _schema(cols.cls)
    out: dict[str, Any] = {}
    for name in fields:
        kind, optional = _kind_of(hints[name])
        value = cols.values[name][i]
        if optional and kind in ("number", "int", "flag") and np.isnan(value):
            out[name] = None  # an unset optional number is NaN in its column
        elif kind == "dtype":
            out[name] = None if value == NO_DTYPE else DTYPES[int(value)]
        elif kind == "int":
            out[name] = int(value)
        elif kind == "flag":
            out[name] = bool(value)
        elif kind == "number":
            out[name] = float(value)
        elif kind == "shape":
            rank = cols.values.get(f"{name}{RANK_SUFFIX}")
            dims = [int(d) for d in value]
            out[name] = tuple(dims[len(dims) - int(rank[i]):] if rank is not None else dims)
        elif kind == "choice":
            out[name] = str(value)
        else:
            out[name] = value
    return out


def row_op(cols: OpColumns, i: int) -> Op:
    """The ``Op`` of row ``i`` (its checks run: a bad row raises ``make_op``'s error)."""
    try:
        return cols.cls(**row_values(cols, i))
    except OpError:
        raise
    except (ValueError, TypeError) as exc:
        raise OpError(cols.cls.kind, "<op>", str(exc)) from exc
