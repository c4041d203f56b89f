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
from typing import cast

import numpy as np

from perfmodel.ops import Op
from perfmodel.ops.base import FloatArray, column
from perfmodel.ops.conv import Conv2d, along_w_column

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
    out: FloatArray = np.where(n <= m, column(ops, "transpose_a"), column(ops, "transpose_b"))
    return out


def _matmul(ops: Sequence[Op]) -> FloatArray:
    m, n, k = (column(ops, name) for name in ("m", "n", "k"))
    narrow, deep = _gemm(m, n, k)
    very_narrow = np.maximum(0.0, VERY_NARROW_LOG2 - _log2(np.minimum(m, n)))
    return np.column_stack([narrow, deep, _unaligned(m) + _unaligned(n) + _unaligned(k),
                            column(ops, "transpose_a"), column(ops, "transpose_b"), _log2(column(ops, "batch")),
                            very_narrow, _wide_transposed(ops, m, n) * narrow])


def _conv(ops: Sequence[Op]) -> FloatArray:
    convs = cast("Sequence[Conv2d]", ops)
    stride, stride_w = column(ops, "stride"), along_w_column(convs, "stride")
    kh, kw = column(ops, "kernel_h"), column(ops, "kernel_w")
    p = np.fromiter((o.out_h for o in convs), dtype=np.float64, count=len(ops))
    q = np.fromiter((o.out_w for o in convs), dtype=np.float64, count=len(ops))
    c = column(ops, "in_channels") / np.maximum(column(ops, "groups"), 1)
    out_channels = column(ops, "out_channels")
    narrow, deep = _gemm(column(ops, "batch") * p * q, out_channels, c * kh * kw)
    winograd = np.fromiter((o.algorithm.startswith("winograd") for o in convs), dtype=np.float64, count=len(ops))
    return np.column_stack([narrow, deep, _unaligned(np.floor(c)) + _unaligned(out_channels), _log2(kh * kw),
                            (np.maximum(stride, stride_w) > 1).astype(float), np.maximum(0.0, 4.0 - _log2(c)),
                            winograd, np.zeros(len(ops))])


def _attention(ops: Sequence[Op]) -> FloatArray:
    zeros = np.zeros(len(ops))
    return np.column_stack([_log2(column(ops, "head_dim")) - 6.0, column(ops, "causal"),
                            _log2(column(ops, "seq_q")) - _log2(column(ops, "seq_kv")), zeros, zeros, zeros, zeros,
                            zeros])


def _collective(ops: Sequence[Op]) -> FloatArray:
    d = _log2(column(ops, "devices"))
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


def _row(ops: Sequence[Op]) -> FloatArray:
    row_len, rows = np.array([_row_dims(o) for o in ops], dtype=float).reshape(len(ops), 2).T
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


def shape_matrix(ops: Sequence[Op]) -> FloatArray:
    """n x ``N_SHAPE`` shape numbers, one row per op (0 = the shape the model assumes), per family in numpy."""
    out = np.zeros((len(ops), N_SHAPE))
    groups: dict[str, list[int]] = {}
    for i, op in enumerate(ops):
        groups.setdefault(family(op), []).append(i)
    for name, idx in groups.items():
        out[idx] = _BY_FAMILY[name]([ops[i] for i in idx])
    return out


def op_features(op: Op) -> tuple[float, ...]:
    """The ``N_SHAPE`` shape numbers of one op."""
    return tuple(float(v) for v in shape_matrix([op])[0])
