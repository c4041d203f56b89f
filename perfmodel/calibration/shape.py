"""Shape features of the calibration: what, besides size, makes real kernels of one class miss the model.

Size alone (log FLOPs, log bytes: ``curve``) cannot tell a skinny 512x8x500000 GEMM, which cuBLAS
runs at a fraction of its bandwidth, from a square GEMM of the same FLOPs that runs near peak; a
size-only fit of both is wrong for both. Each op gets ``N_SHAPE`` numbers, in units where 0 is
"the well-shaped case the model assumes" and 1 is one step of the effect (a halving of the
narrow dimension, an unaligned dimension, ...), and the calibration fits one log-time
coefficient per number (``curve``): t_body → t_body · exp(Σ β_j z_j).

Per family (slots unused by a family stay 0):

- GEMMs (matmul/bmm; conv2d as its implicit GEMM M = N·P·Q, N = K_out, K = C/groups·R·S):
  ``narrow`` halvings of min(M, N) below 128 (the narrow side of a tile runs empty, GEMV-like
  kernels); ``deep`` log2 K / sqrt(M·N) (split-K and accumulation-bound shapes); ``unaligned``
  how many of M, N, K are not multiples of 8 (no vector loads, no tensor-core fast path);
  matmul: ``transpose_a``, ``transpose_b``, ``log2 batch``, ``very_narrow`` halvings of min(M, N) below 32
  (a second slope: cuBLAS's GEMV-like kernels for N = 8-16 fall off a cliff that N = 32 does not, P100 fp32
  4096x16x4096 at 1.3 TFLOP/s next to 4096x32x4096 at 6.2; one slope fitted both badly),
  ``narrow_wide_transposed`` = narrow x whether the wide operand is transposed (A when N <= M, else B): a skinny
  GEMM's GEMV-like kernel streams its wide operand, and a transposed one costs (T4 fp32 2048x32x2048 NN in 89 us,
  TN 100 us; P100 fp32 2048x16x2048 NN 83 us, TN 116 us), not on square GEMMs (one transpose_a coefficient for
  all sizes over-corrected the NN ones) nor where the transposed operand is the small one (V100 fp16
  35x8457x2560 TN 128 us, NN 125 us: transpose_a x narrow put P100/MI25 35x8457 TN rows 25-64 % too slow);
  conv: ``log2 R·S`` (filter taps),
  ``strided``, ``thin_channels`` halvings of C/groups below 16 (first layers), ``winograd`` (the
  algorithm the library chose, when the op records it).
- Row ops (norms, softmax, reductions, elementwise chains, gathers, quantisation, layout):
  ``log2 row length / 1024``, ``log2 rows / 1024``, ``unaligned`` row length, the squares
  of the first two (/8, /16) so a kernel with an optimal row length is a parabola, not a line,
  and ``long_few_rows`` = max(0, x)·max(0, −y)/8: rows longer than 1024 and fewer than 1024 of
  them, where one-block-per-row kernels (vLLM's silu_and_mul: 10 µs for one token of 28672) work
  through each row serially while the model spreads the elements over the whole chip.
- Collectives: ``log2 devices`` and its square.
- Attention: ``log2 head_dim / 64``, ``causal``, ``log2 seq_q / seq_kv`` (decode vs prefill).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any, cast

import numpy as np

from perfmodel.calibration.op_groups import Group, by_type
from perfmodel.ops import Op
from perfmodel.ops.base import FloatArray
from perfmodel.ops.conv import Conv2d

N_SHAPE = 8
NAMES = tuple(f"shape_{i}" for i in range(N_SHAPE))
VERY_NARROW_LOG2 = 5.0  # GEMMs narrower than 32: GEMV-like kernels, a second slope below ``narrow``'s
ALIGN_ELEMENTS = 8  # a dimension not a multiple of this loses vector loads / the tensor-core fast path
FAMILY_FEATURES: dict[str, tuple[str, ...]] = {
    "matmul": ("narrow", "deep", "unaligned", "transpose_a", "transpose_b", "log2_batch", "very_narrow",
               "narrow_wide_transposed"),
    "conv2d": ("narrow", "deep", "unaligned", "log2_taps", "strided", "thin_channels", "winograd", ""),
    "row": ("log2_row_len", "log2_rows", "unaligned", "log2_row_len_sq", "log2_rows_sq", "long_few_rows", "", ""),
    "collective": ("log2_devices", "log2_devices_sq", "", "", "", "", "", ""),
    "attention": ("log2_head_dim", "causal", "log2_q_per_kv", "", "", "", "", ""),
}
_COLLECTIVES = frozenset({"allreduce", "allgather", "reducescatter", "alltoall"})


def _column(ops: Sequence[Op], name: str) -> FloatArray:
    """``readers.column`` (one field of many ops as floats), read in a C loop (``map`` of ``attrgetter``)."""
    out: FloatArray = np.fromiter(map(attrgetter(name), ops), dtype=np.float64, count=len(ops))
    return out


def _along_w(convs: Sequence[Conv2d], name: str, fields: _Fields | None = None) -> np.ndarray[Any, np.dtype[np.int64]]:
    """``Conv2d.along_w`` of many convolutions: the ``*_w`` field, else the height-wise one (``fields``: the
    convolutions' fields read once, where the caller keeps them)."""
    fields = _Fields(convs) if fields is None else fields
    wide = fields.values(f"{name}_w")
    if None not in wide:
        return np.array(wide, dtype=np.int64).reshape(len(convs))
    if wide.count(None) == len(wide):  # none given width-wise (square convolutions): the height-wise fields
        return np.fromiter(map(int, fields.values(name)), dtype=np.int64, count=len(convs))
    return np.fromiter(map(int, (h if w is None else w for w, h in zip(wide, fields.values(name), strict=True))),
                       dtype=np.int64, count=len(convs))


def _log2(x: FloatArray) -> FloatArray:
    out: FloatArray = np.log2(np.maximum(x, 1.0))
    return out


def _unaligned(x: FloatArray) -> FloatArray:
    out: FloatArray = (np.mod(x, ALIGN_ELEMENTS) != 0).astype(float)
    return out


def _gemm(m: FloatArray, n: FloatArray, k: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(narrow, deep) of GEMMs M x N x K."""
    narrow = np.maximum(0.0, 7.0 - _log2(np.minimum(m, n)))
    deep = np.clip(_log2(k) - 0.5 * (_log2(m) + _log2(n)), -8.0, 8.0)
    return narrow, deep


def _wide_transposed(ops: Sequence[Op], m: FloatArray, n: FloatArray) -> FloatArray:
    """1 where a GEMM's wide operand is stored transposed: A (M x K) when N <= M, else B (K x N)."""
    out: FloatArray = np.where(n <= m, _column(ops, "transpose_a"), _column(ops, "transpose_b"))
    return out


def _matmul(ops: Sequence[Op]) -> FloatArray:
    m, n, k = (_column(ops, name) for name in ("m", "n", "k"))
    narrow, deep = _gemm(m, n, k)
    very_narrow = np.maximum(0.0, VERY_NARROW_LOG2 - _log2(np.minimum(m, n)))
    return np.column_stack([narrow, deep, _unaligned(m) + _unaligned(n) + _unaligned(k),
                            _column(ops, "transpose_a"), _column(ops, "transpose_b"), _log2(_column(ops, "batch")),
                            very_narrow, _wide_transposed(ops, m, n) * narrow])


def _conv(ops: Sequence[Op]) -> FloatArray:
    convs = cast("Sequence[Conv2d]", ops)
    fields = _Fields(ops)  # each field read once, converted as each use wants it (the same objects)
    stride, stride_w = fields.floats("stride"), _along_w(convs, "stride", fields).astype(np.float64)
    kh, kw = fields.floats("kernel_h"), fields.floats("kernel_w")
    p, q = _out_hw(convs, fields)
    c = fields.floats("in_channels") / np.maximum(fields.floats("groups"), 1)
    out_channels = fields.floats("out_channels")
    narrow, deep = _gemm(fields.floats("batch") * p * q, out_channels, c * kh * kw)
    algorithms = fields.values("algorithm")
    is_winograd = {name: float(name.startswith("winograd")) for name in set(algorithms)}
    winograd = np.fromiter(map(is_winograd.__getitem__, algorithms), dtype=np.float64, count=len(ops))
    return np.column_stack([narrow, deep, _unaligned(np.floor(c)) + _unaligned(out_channels), _log2(kh * kw),
                            (np.maximum(stride, stride_w) > 1).astype(float), np.maximum(0.0, 4.0 - _log2(c)),
                            winograd, np.zeros(len(ops))])


class _Fields:
    """Fields of many ops, each read once (``map`` of ``attrgetter``) and kept as the list of its values."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.ops = ops
        self.read: dict[str, list[Any]] = {}

    def values(self, name: str) -> list[Any]:
        if name not in self.read:
            self.read[name] = list(map(attrgetter(name), self.ops))
        return self.read[name]

    def floats(self, name: str) -> FloatArray:
        """``_column``: the values as float64."""
        out: FloatArray = np.fromiter(self.values(name), dtype=np.float64, count=len(self.ops))
        return out

    def ints(self, name: str) -> np.ndarray[Any, np.dtype[np.int64]]:
        """``_ints``: the values as int64."""
        out: np.ndarray[Any, np.dtype[np.int64]] = np.fromiter(self.values(name), dtype=np.int64, count=len(self.ops))
        return out


def _out_hw(convs: Sequence[Conv2d], fields: _Fields | None = None) -> tuple[FloatArray, FloatArray]:
    """(``Conv2d.out_h``, ``Conv2d.out_w``) of many convolutions: their integer arithmetic in int64 columns (numpy's
    ``//`` floors as Python's does), as floats (``fields``: their fields read once, where the caller keeps them)."""
    fields = _Fields(convs) if fields is None else fields
    height, width, kernel_h, kernel_w = (fields.ints(name) for name in ("height", "width", "kernel_h", "kernel_w"))
    out_h = (height + 2 * fields.ints("padding") - fields.ints("dilation") * (kernel_h - 1) - 1) \
        // fields.ints("stride") + 1
    stride_w, padding_w, dilation_w = (_along_w(convs, name, fields) for name in ("stride", "padding", "dilation"))
    out_w = (width + 2 * padding_w - dilation_w * (kernel_w - 1) - 1) // stride_w + 1
    return out_h.astype(np.float64), out_w.astype(np.float64)


def _attention(ops: Sequence[Op]) -> FloatArray:
    zeros = np.zeros(len(ops))
    return np.column_stack([_log2(_column(ops, "head_dim")) - 6.0, _column(ops, "causal"),
                            _log2(_column(ops, "seq_q")) - _log2(_column(ops, "seq_kv")), zeros, zeros, zeros, zeros,
                            zeros])


def _collective(ops: Sequence[Op]) -> FloatArray:
    d = _log2(_column(ops, "devices"))
    zeros = np.zeros(len(ops))
    return np.column_stack([d, d * d / 4.0, zeros, zeros, zeros, zeros, zeros, zeros])


def _row_dims(op: Op) -> tuple[float, float]:
    """(row length, rows): a gather's looked-up rows x row length, else the last dimension x the rest."""
    table = getattr(op, "table_shape", None)
    if table is not None:
        return float(math.prod(table[1:])), float(op.num_indices)  # type: ignore[attr-defined]
    dims = getattr(op, "shape", None)
    if not dims:
        return 1024.0, 1024.0  # no shape: the reference point, every number 0
    row_len = max(float(dims[-1]), 1.0)
    return row_len, float(math.prod(dims)) / row_len


def _row_columns(ops: Sequence[Op]) -> tuple[FloatArray, FloatArray]:
    """``_row_dims`` of many ops of one class: from their ``shape`` (or gather ``table_shape``) tuples in C loops
    (``map``: the same Python arithmetic), op by op where a class's ops do not all have a non-empty one."""
    cls = type(ops[0])
    table = "table_shape" in getattr(cls, "__dataclass_fields__", {}) or hasattr(cls, "table_shape")
    field = "table_shape" if table else "shape"
    dims = list(map(attrgetter(field), ops)) if hasattr(ops[0], field) else []
    if len(dims) != len(ops) or not all(dims) or set(map(type, chain.from_iterable(dims))) != {int}:
        row_len, rows = np.array([_row_dims(o) for o in ops], dtype=float).reshape(len(ops), 2).T
        return row_len, rows
    if table:
        heads = map(math.prod, map(itemgetter(slice(1, None)), dims))
        row_len = np.fromiter(map(float, heads), dtype=np.float64, count=len(ops))
        rows = np.fromiter(map(float, map(attrgetter("num_indices"), ops)), dtype=np.float64, count=len(ops))
        return row_len, rows
    row_len = np.maximum(np.fromiter(map(float, map(itemgetter(-1), dims)), dtype=np.float64, count=len(ops)), 1.0)
    elements = np.fromiter(map(float, map(math.prod, dims)), dtype=np.float64, count=len(ops))
    return row_len, elements / row_len


def _row(ops: Sequence[Op]) -> FloatArray:
    """Row ops' shape numbers (ops of one class: ``shape_matrix`` calls it per class)."""
    row_len, rows = _row_columns(ops) if len(set(map(type, ops))) == 1 else np.array(
        [_row_dims(o) for o in ops], dtype=float).reshape(len(ops), 2).T
    x = np.clip(_log2(row_len) - 10.0, -8.0, 8.0)
    y = np.clip(_log2(rows) - 10.0, -12.0, 12.0)
    long_few = np.maximum(x, 0.0) * np.maximum(-y, 0.0) / 8.0  # long rows, few of them: one block per row
    return np.column_stack([x, y, _unaligned(np.floor(row_len)), x * x / 8.0, y * y / 16.0, long_few,
                            np.zeros(len(ops)), np.zeros(len(ops))])


_BY_FAMILY: dict[str, Callable[[Sequence[Op]], FloatArray]] = {
    "matmul": _matmul, "conv2d": _conv, "attention": _attention, "collective": _collective, "row": _row}


def family(op: Op) -> str:
    """Which feature family (``FAMILY_FEATURES``) an op uses."""
    if op.kind in ("matmul", "conv2d", "attention"):
        return op.kind
    if op.kind in _COLLECTIVES:
        return "collective"
    return "row"


def shape_matrix(ops: Sequence[Op], groups: list[Group] | None = None) -> FloatArray:
    """n x ``N_SHAPE`` shape numbers, one row per op (0 = the shape the model assumes), per family in numpy
    (``groups``: ``op_groups.by_type(ops)`` where the caller has it)."""
    out = np.zeros((len(ops), N_SHAPE))
    for _, rows, members in by_type(ops) if groups is None else groups:  # each row's numbers are its op's alone
        out[rows] = _BY_FAMILY[family(members[0])](members)
    return out


def op_features(op: Op) -> tuple[float, ...]:
    """The ``N_SHAPE`` shape numbers of one op."""
    return tuple(float(v) for v in shape_matrix([op])[0])
