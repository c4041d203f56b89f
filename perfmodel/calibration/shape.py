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
  matmul: ``transpose_a``, ``transpose_b``, ``log2 batch``; conv: ``log2 R·S`` (filter taps),
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
from collections.abc import Sequence

import numpy as np

from perfmodel.ops import Op
from perfmodel.ops.base import FloatArray

N_SHAPE = 7
NAMES = tuple(f"shape_{i}" for i in range(N_SHAPE))
ALIGN_ELEMENTS = 8  # a dimension not a multiple of this loses vector loads / the tensor-core fast path
FAMILY_FEATURES: dict[str, tuple[str, ...]] = {
    "matmul": ("narrow", "deep", "unaligned", "transpose_a", "transpose_b", "log2_batch", ""),
    "conv2d": ("narrow", "deep", "unaligned", "log2_taps", "strided", "thin_channels", "winograd"),
    "row": ("log2_row_len", "log2_rows", "unaligned", "log2_row_len_sq", "log2_rows_sq", "long_few_rows", ""),
    "collective": ("log2_devices", "log2_devices_sq", "", "", "", "", ""),
    "attention": ("log2_head_dim", "causal", "log2_q_per_kv", "", "", "", ""),
}
_COLLECTIVES = frozenset({"allreduce", "allgather", "reducescatter", "alltoall"})


def _log2(x: float) -> float:
    return math.log2(max(float(x), 1.0))


def _gemm(m: float, n: float, k: float) -> tuple[float, float, float]:
    narrow = max(0.0, 7.0 - _log2(min(m, n)))
    deep = min(max(_log2(k) - 0.5 * (_log2(m) + _log2(n)), -8.0), 8.0)
    unaligned = float(sum(int(d) % ALIGN_ELEMENTS != 0 for d in (m, n, k)))
    return narrow, deep, unaligned


def _row(row_len: float, rows: float) -> tuple[float, ...]:
    x = min(max(_log2(row_len) - 10.0, -8.0), 8.0)
    y = min(max(_log2(rows) - 10.0, -12.0), 12.0)
    long_few = max(x, 0.0) * max(-y, 0.0) / 8.0  # long rows, few of them: one block per row works serially
    return x, y, float(int(row_len) % ALIGN_ELEMENTS != 0), x * x / 8.0, y * y / 16.0, long_few, 0.0


def family(op: Op) -> str:
    """Which feature family (``FAMILY_FEATURES``) an op uses."""
    if op.kind in ("matmul", "conv2d", "attention"):
        return op.kind
    if op.kind in _COLLECTIVES:
        return "collective"
    return "row"


def op_features(op: Op) -> tuple[float, ...]:
    """The ``N_SHAPE`` shape numbers of one op (0 = the shape the model assumes)."""
    kind = op.kind
    a = op.__dict__
    if kind == "matmul":
        narrow, deep, unaligned = _gemm(a["m"], a["n"], a["k"])
        return narrow, deep, unaligned, float(a["transpose_a"]), float(a["transpose_b"]), _log2(a["batch"]), 0.0
    if kind == "conv2d":
        stride, pad, dil = a["stride"], a["padding"], a["dilation"]
        stride_w = a["stride_w"] or stride
        pad_w = a["padding_w"] if a["padding_w"] is not None else pad
        dil_w = a["dilation_w"] or dil
        p = max((a["height"] + 2 * pad - dil * (a["kernel_h"] - 1) - 1) // stride + 1, 1)
        q = max((a["width"] + 2 * pad_w - dil_w * (a["kernel_w"] - 1) - 1) // stride_w + 1, 1)
        c = a["in_channels"] / max(a["groups"], 1)
        taps = a["kernel_h"] * a["kernel_w"]
        narrow, deep, unaligned = _gemm(a["batch"] * p * q, a["out_channels"], c * taps)
        unaligned = float(int(c) % ALIGN_ELEMENTS != 0) + float(a["out_channels"] % ALIGN_ELEMENTS != 0)
        return (narrow, deep, unaligned, _log2(taps), float(max(stride, stride_w) > 1),
                max(0.0, 4.0 - _log2(c)), float(a["algorithm"] == "winograd"))
    if kind == "attention":
        return (_log2(a["head_dim"]) - 6.0, float(a["causal"]), _log2(a["seq_q"]) - _log2(a["seq_kv"]),
                0.0, 0.0, 0.0, 0.0)
    if kind in _COLLECTIVES:
        d = _log2(a["devices"])
        return d, d * d / 4.0, 0.0, 0.0, 0.0, 0.0, 0.0
    shape = a.get("table_shape")
    if shape is not None:  # gather / embedding / scatter: rows looked up x row length
        row_len = float(np.prod(shape[1:])) if len(shape) > 1 else 1.0
        return _row(row_len, a["num_indices"])
    shape = a.get("shape")
    if shape:
        total = float(np.prod(shape))
        return _row(float(shape[-1]), total / max(float(shape[-1]), 1.0))
    return (0.0,) * N_SHAPE


def shape_matrix(ops: Sequence[Op]) -> FloatArray:
    """n x ``N_SHAPE`` shape numbers, one row per op."""
    out = np.zeros((len(ops), N_SHAPE))
    for i, op in enumerate(ops):
        out[i] = op_features(op)
    return out
