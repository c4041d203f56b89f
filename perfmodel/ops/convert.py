"""JSON-value converters for op fields, built once per op class from its type hints: each checks one
value and raises ``OpError`` naming the kind, the field and the reason."""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import TYPE_CHECKING, Any, Literal

from perfmodel.dtypes import DType, parse_dtype
from perfmodel.ops.checks import OpError

if TYPE_CHECKING:
    from perfmodel.ops.base import Op

@functools.cache
def _schema(cls: type[Op]) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]], tuple[str, ...]]:
    """Type hints, fields and required field names of an op class (computed once)."""
    hints = typing.get_type_hints(cls)
    names = {f.name: f for f in dataclasses.fields(cls)}
    required = tuple(n for n, f in names.items()
                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    return hints, names, required


Converter = typing.Callable[[str, Any], Any]


@functools.cache
def _converters(cls: type[Op]) -> tuple[dict[str, Converter], tuple[str, ...]]:
    """One JSON-value converter per field of an op class, built once from its type hints."""
    hints, names, required = _schema(cls)
    return {name: _converter(cls.kind, hints[name]) for name in names}, required


def _converter(kind: str, hint: Any) -> Converter:
    """A function (key, raw) -> value that checks and converts one JSON value to ``hint``."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = _converter(kind, next(a for a in args if a is not type(None)))
        return functools.partial(_as_optional, inner) if type(None) in args else inner
    if hint is DType:
        return functools.partial(_as_dtype, kind)
    if hint is bool:
        return functools.partial(_as_bool, kind)
    if hint is int:
        return functools.partial(_as_int, kind)
    if hint is float:
        return functools.partial(_as_float, kind)
    if origin is tuple:
        return functools.partial(_as_int_tuple, kind)
    if origin is Literal:
        return functools.partial(_as_choice, kind, args)
    if hint is str:
        return functools.partial(_as_str, kind)
    return lambda key, raw: raw


def _as_optional(inner: Converter, key: str, raw: Any) -> Any:
    """None as it is, any other value through ``inner``."""
    return None if raw is None else inner(key, raw)


def _as_dtype(kind: str, key: str, raw: Any) -> DType:
    try:
        return parse_dtype(raw)
    except ValueError as exc:
        raise OpError(kind, key, str(exc)) from None


def _as_bool(kind: str, key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "false", "1", "0", "yes", "no"):
        return raw.lower() in ("true", "1", "yes")
    raise OpError(kind, key, f"expected true/false, got {raw!r}")


def _as_float(kind: str, key: str, raw: Any) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise OpError(kind, key, f"expected a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise OpError(kind, key, f"expected a finite number, got {raw!r}")
    return value


def _as_int_tuple(kind: str, key: str, raw: Any) -> tuple[int, ...]:
    if isinstance(raw, str):
        raw = [p for p in raw.replace("x", ",").split(",") if p.strip()]
    if not isinstance(raw, list | tuple):
        raise OpError(kind, key, f"expected a list, got {raw!r}")
    return tuple(_as_int(kind, key, item) for item in raw)


def _as_choice(kind: str, choices: tuple[Any, ...], key: str, raw: Any) -> Any:
    if raw not in choices:
        raise OpError(kind, key, f"expected one of {', '.join(map(str, choices))}, got {raw!r}")
    return raw


def _as_str(kind: str, key: str, raw: Any) -> str:
    if not isinstance(raw, str):
        raise OpError(kind, key, f"expected a string, got {raw!r}")
    return raw


def _as_int(kind: str, key: str, raw: Any) -> int:
    if type(raw) is int:
        return raw
    if isinstance(raw, bool):
        raise OpError(kind, key, f"expected an integer, got {raw!r}")
    if isinstance(raw, int):
        return int(raw)
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        return int(raw)
    raise OpError(kind, key, f"expected an integer, got {raw!r}")
