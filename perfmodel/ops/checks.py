"""Op validation: ``OpError`` and the field checks ops run on one op (``require_*``, ``check_*``) and on
many columns at once (``*_invalid``, a boolean per row), with the same bounds."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from perfmodel.ops.readers import OpColumns
from perfmodel.ops.work import PASSES


class OpError(ValueError):
    """An op that cannot be built: names the kind, the field and the reason."""

    def __init__(self, kind: str, field_name: str, reason: str) -> None:
        super().__init__(f"op {kind!r}: field {field_name!r}: {reason}")
        self.kind = kind
        self.field = field_name
        self.reason = reason


MAX_DIMENSION = 2**40  # beyond any real tensor dimension or byte count: a typo, not a workload


def require_positive(kind: str, **values: int | float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise OpError(kind, name, f"must be > 0, got {value}")
        if value > MAX_DIMENSION:
            raise OpError(kind, name, f"{value:g} is larger than {MAX_DIMENSION:g}: not a real workload")


def positive_invalid(cols: OpColumns, *names: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Rows where a field of ``names`` breaks ``require_positive`` (<= 0 or beyond ``MAX_DIMENSION``)."""
    bad = np.zeros(cols.n, dtype=bool)
    for name in names:
        values = cols.values[name]
        bad |= (values <= 0) | (values > MAX_DIMENSION)
    return bad


def pass_invalid(cols: OpColumns) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Rows whose ``pass_`` breaks ``check_pass``."""
    passes = cols.values["pass_"]
    if passes.ndim == 1 and passes.size > 1 and passes.strides[0] == 0:  # a default column: one value, looked at once
        return np.full(passes.size, str(passes[0]) not in PASSES)
    return ~one_of(passes, PASSES)


def one_of(values: np.ndarray[Any, Any], choices: tuple[str, ...]) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Per row, whether a str column's value is one of ``choices``: ``np.isin``'s answer, one comparison per choice
    (``isin`` sorts the strings: several times slower for a handful of choices)."""
    out = np.zeros(values.shape, dtype=bool)
    for choice in choices:
        out |= values == choice
    return out


def shape_invalid(cols: OpColumns, name: str = "shape") -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Rows whose shape ``name`` breaks ``check_shape`` (rank 1..16, dims > 0, elements within bounds)."""
    block = cols.values[name]
    bad: np.ndarray[Any, np.dtype[np.bool_]] = ((block <= 0).any(axis=1) | (block.prod(axis=1) > MAX_DIMENSION)
                                                | (block.shape[1] > 16))
    return bad


def require_non_negative(kind: str, **values: int | float) -> None:
    for name, value in values.items():
        if value < 0:
            raise OpError(kind, name, f"must be >= 0, got {value}")


def check_pass(kind: str, value: str) -> None:
    if value not in PASSES:
        raise OpError(kind, "pass", f"expected one of {', '.join(PASSES)}, got {value!r}")


def check_shape(kind: str, name: str, shape: tuple[int, ...]) -> None:
    if len(shape) == 0:
        raise OpError(kind, name, "shape must have at least one dimension")
    if len(shape) > 16:
        raise OpError(kind, name, f"{len(shape)} dimensions: at most 16")
    for dim in shape:
        if dim <= 0:
            raise OpError(kind, name, f"dimensions must be > 0, got {list(shape)}")
    count = numel(shape)
    if count > MAX_DIMENSION:  # an int past float range cannot take :g (a trace's grid of 1e300: an OverflowError)
        shown = f"{count:g}" if count.bit_length() <= 1000 else f"about 2^{count.bit_length() - 1}"
        raise OpError(kind, name, f"{shown} elements: larger than {MAX_DIMENSION:g}, not a real workload")


def numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)
