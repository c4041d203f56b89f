"""Field readers over many ops at once, given as ``Op`` objects or as ``OpColumns`` (one array per field):
each returns one numpy array per field, so an op family's ``work`` is written once for both."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from perfmodel.ops.work import DTYPE_BYTES, DTYPE_INDEX, NO_DTYPE, FloatArray, IntArray

if TYPE_CHECKING:
    from perfmodel.ops.base import Op


@dataclass
class OpColumns:
    """``n`` ops of one class as columns instead of objects: what ``work`` reads, without building ``Op``s.

    ``values`` maps each dataclass field to an array of length ``n``: numbers and flags as float64,
    dtypes as int64 codes into ``DTYPES`` (``NO_DTYPE`` for an unset optional one), choices (``pass_``)
    as str arrays, shapes as float64 ``n x rank`` arrays right-aligned (leading dims padded with 1).
    """

    cls: type[Op]
    n: int
    values: dict[str, np.ndarray[Any, Any]]

    def __len__(self) -> int:
        return self.n


def dtype_column(ops: Sequence[Any] | OpColumns, name: str, fallback: str | None = None) -> IntArray:
    """Dtype codes of field ``name``, or of ``fallback`` where it is unset (``out_dtype or dtype``)."""
    if isinstance(ops, OpColumns):
        codes: IntArray = ops.values[name]
        if fallback is not None:
            codes = np.where(codes == NO_DTYPE, ops.values[fallback], codes)
        return codes
    if fallback is None:
        return np.fromiter((DTYPE_INDEX[getattr(o, name)] for o in ops), dtype=np.int64, count=len(ops))
    return np.fromiter((DTYPE_INDEX[getattr(o, name) or getattr(o, fallback)] for o in ops), dtype=np.int64,
                       count=len(ops))


def dtype_bytes(ops: Sequence[Any] | OpColumns, name: str, fallback: str | None = None) -> FloatArray:
    """Element size in bytes of field ``name`` (or ``fallback`` where unset)."""
    out: FloatArray = DTYPE_BYTES[dtype_column(ops, name, fallback)]
    return out


def dtype_set(ops: Sequence[Any] | OpColumns, name: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Whether the optional dtype field ``name`` is set."""
    if isinstance(ops, OpColumns):
        out: np.ndarray[Any, np.dtype[np.bool_]] = ops.values[name] != NO_DTYPE
        return out
    return np.fromiter((getattr(o, name) is not None for o in ops), dtype=bool, count=len(ops))


def shape_elements(ops: Sequence[Any] | OpColumns, name: str = "shape") -> FloatArray:
    """Elements of the shape field ``name`` of each op."""
    if isinstance(ops, OpColumns):
        out: FloatArray = ops.values[name].prod(axis=1)
        return out
    # the exact integer product (``math.prod``, ~10x ``np.prod`` of a short tuple), the same float below 2**53
    return np.fromiter((math.prod(getattr(o, name)) for o in ops), dtype=np.float64, count=len(ops))


def last_dim(ops: Sequence[Any] | OpColumns, name: str = "shape") -> FloatArray:
    """The last dimension of the shape field ``name`` of each op."""
    if isinstance(ops, OpColumns):
        out: FloatArray = ops.values[name][:, -1].astype(np.float64)
        return out
    return np.fromiter((float(getattr(o, name)[-1]) for o in ops), dtype=np.float64, count=len(ops))


GemmArrays = tuple[FloatArray, FloatArray, FloatArray, FloatArray]


def gemm_slots(*slots: GemmArrays) -> GemmArrays:
    """(batch, m, n, k) arrays of shape ops x slots from one (batch, m, n, k) per slot.

    A batch of 0 means no GEMM in that slot.
    """
    b, m, n, k = (np.stack([slot[i] for slot in slots], axis=1) for i in range(4))
    return b, m, n, k


def column(ops: Sequence[Any] | OpColumns, name: str) -> FloatArray:
    """One numeric (or flag) field of many ops as a float array."""
    if isinstance(ops, OpColumns):
        values: FloatArray = ops.values[name].astype(np.float64, copy=False)
        return values
    return np.fromiter(map(attrgetter(name), ops), dtype=np.float64, count=len(ops))  # ~2x a generator's getattr


def pass_factors(ops: Sequence[Any] | OpColumns) -> tuple[FloatArray, FloatArray]:
    """(forward share, backward share) per op: 1/0, 0/1 or 1/1."""
    if isinstance(ops, OpColumns):
        passes = ops.values["pass_"]
        if passes.ndim == 1 and passes.size > 1 and passes.strides[0] == 0:  # a default column: one value
            one = str(passes[0])
            return np.full(passes.size, float(one != "backward")), np.full(passes.size, float(one != "forward"))
        return (passes != "backward").astype(np.float64), (passes != "forward").astype(np.float64)
    fwd = np.fromiter((o.pass_ != "backward" for o in ops), dtype=np.float64, count=len(ops))
    bwd = np.fromiter((o.pass_ != "forward" for o in ops), dtype=np.float64, count=len(ops))
    return fwd, bwd
