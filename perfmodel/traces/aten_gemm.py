"""GEMM-like aten ops -> perfmodel op dicts: mm/addmm/bmm/baddbmm/matmul/linear, convolution, SDPA."""

from __future__ import annotations

import math
from typing import Any

from perfmodel.traces.aten_args import Args, Unbuildable
from perfmodel.traces.aten_nn import conv_geometry

OpDict = dict[str, Any]


def mm(a: Args) -> OpDict:
    x, w = a.shape(0), a.shape(1)
    _rank(a, x, 2)
    _rank(a, w, 2)
    return {"kind": "matmul", "m": x[0], "k": x[1], "n": w[1], "dtype": a.dtype(0)}


def addmm(a: Args) -> OpDict:
    x, w = a.shape(1), a.shape(2)
    _rank(a, x, 2)
    _rank(a, w, 2)
    return {"kind": "matmul", "m": x[0], "k": x[1], "n": w[1], "dtype": a.dtype(1), "bias": True}


def bmm(a: Args, first: int = 0) -> OpDict:
    x, w = a.shape(first), a.shape(first + 1)
    _rank(a, x, 3)
    _rank(a, w, 3)
    op: OpDict = {"kind": "matmul", "batch": x[0], "m": x[1], "k": x[2], "n": w[2], "dtype": a.dtype(first)}
    if first:
        op["bias"] = True
    return op


def baddbmm(a: Args) -> OpDict:
    return bmm(a, first=1)


def matmul(a: Args) -> OpDict:
    x, w = a.shape(0), a.shape(1)
    dtype = a.dtype(0)
    if len(x) == 1:
        x = (1, *x)
    if len(w) == 1:
        w = (*w, 1)
    if len(w) == 2:  # (..., m, k) @ (k, n): one weight shared by all rows
        return {"kind": "matmul", "m": math.prod(x[:-1]), "k": x[-1], "n": w[1], "dtype": dtype}
    batch = math.prod(x[:-2]) if len(x) >= len(w) else math.prod(w[:-2])
    op: OpDict = {"kind": "matmul", "batch": batch, "m": x[-2], "k": x[-1], "n": w[-1], "dtype": dtype}
    if len(x) == 2:
        op["m"] = x[0]
    return op


def linear(a: Args) -> OpDict:
    x, w = a.shape(0), a.shape(1)
    _rank(a, w, 2)
    return {"kind": "matmul", "m": math.prod(x[:-1]), "k": x[-1], "n": w[0], "dtype": a.dtype(0),
            "transpose_b": True, "bias": a.has_tensor(2)}


# argument positions of (stride, padding, dilation, groups, transposed) per convolution op
_CONV_ARGS = {
    "aten::convolution": (3, 4, 5, 8, 6), "aten::_convolution": (3, 4, 5, 8, 6),
    "aten::conv2d": (3, 4, 5, 6, None), "aten::cudnn_convolution": (3, 2, 4, 5, None),
    "aten::miopen_convolution": (4, 3, 5, 6, None),
}


def convolution(a: Args) -> OpDict:
    return _conv(a, 0, _CONV_ARGS[a.name], a.name != "aten::cudnn_convolution" and a.has_tensor(2))


# convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
# output_padding, groups, output_mask): the two gradient convolutions (and the bias gradient) of one layer
_CONV_BACKWARD_ARGS = (4, 5, 6, 9, 7)
_OUTPUT_MASK = 10


def convolution_backward(a: Args) -> tuple[OpDict, list[str]]:
    mask = a.flags(_OUTPUT_MASK)
    if mask is not None and len(mask) != 3:
        mask = None  # not the three gradients' flags: as if not recorded
    if mask is not None and not (mask[0] and mask[1]):
        needed = " and ".join(name for name, on in zip(("input", "weight"), mask[:2], strict=True) if on) or "no"
        raise Unbuildable(f"{a.name}: only the {needed} gradient computed (output_mask {mask}): perfmodel's "
                          "conv2d backward is both gradients")
    op = _conv(a, 1, _CONV_BACKWARD_ARGS, bool(mask and mask[2]))
    notes = [] if mask is not None else ["output_mask not recorded: both gradients assumed, no bias gradient"]
    return {**op, "pass": "backward"}, notes


def _conv(a: Args, first: int, where: tuple[int, int, int, int, int | None], bias: bool) -> OpDict:
    """The conv2d of the input at argument ``first`` and the weight after it; ``where`` = argument index of
    stride, padding, dilation, groups, transposed."""
    x, w = a.shape(first), a.shape(first + 1)
    if len(x) != 4 or len(w) != 4:
        raise Unbuildable(f"{a.name}: only 2-D convolutions are modelled (input rank {len(x)})")
    stride_i, pad_i, dil_i, groups_i, transposed_i = where
    if transposed_i is not None and a.flag(transposed_i):
        raise Unbuildable(f"{a.name}: transposed convolution is not modelled")
    op: OpDict = {"kind": "conv2d", "batch": x[0], "in_channels": x[1], "height": x[2], "width": x[3],
                  "out_channels": w[0], "kernel_h": w[2], "kernel_w": w[3], "dtype": a.dtype(first), "bias": bias}
    if a.concrete(stride_i) is None and a.call.output_dims and a.call.output_dims[0]:
        # an older trace: no scalar arguments, but the backward node linked to the call gives its output shape
        fields, note = conv_geometry(x, w, a.call.output_dims[0])
        a.notes.append(f"{note} (output shape from its backward node)")
        if x[1] % w[1]:
            raise Unbuildable(f"{a.name}: input channels {x[1]} are not a multiple of the weight's {w[1]}")
        return {**op, **fields, "groups": x[1] // w[1]}
    stride, padding = _pair(a.int_list(stride_i, "stride")), _pair(a.int_list(pad_i, "padding"))
    dilation = _pair(a.int_list(dil_i, "dilation"))
    op.update(stride=stride[0], padding=padding[0], dilation=dilation[0], groups=a.int_list(groups_i, "groups")[0])
    for name, pair in (("stride", stride), ("padding", padding), ("dilation", dilation)):
        if pair[1] != pair[0]:
            op[f"{name}_w"] = pair[1]
    strides = a.strides(first)
    if strides is not None and len(strides) == 4 and x[1] > 1 and strides[1] == 1:
        op["layout"] = "nhwc"  # channels_last: the channel is the fastest dimension
    return op


# argument index of is_causal per SDPA op (None: the op has no such argument)
_CAUSAL_ARG = {
    "aten::scaled_dot_product_attention": 5, "aten::_scaled_dot_product_flash_attention": 4,
    "aten::_scaled_dot_product_efficient_attention": 6, "aten::_scaled_dot_product_cudnn_attention": 6,
    "aten::_scaled_dot_product_attention_math": 5, "aten::_scaled_dot_product_flash_attention_for_cpu": 4,
}


def attention(a: Args) -> tuple[OpDict, list[str]]:
    """An SDPA call (tensors [batch, heads, seq, head_dim]); backward ops start with grad_out."""
    backward = "backward" in a.name
    first = 1 if backward else 0
    q, k, v = a.shape(first), a.shape(first + 1), a.shape(first + 2)
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise Unbuildable(f"{a.name}: expected 4-D query/key/value, got ranks {len(q)}, {len(k)}, {len(v)}")
    notes: list[str] = []
    causal_arg = _CAUSAL_ARG.get(a.name)
    causal = a.flag(causal_arg) if causal_arg is not None else None
    if causal is None:
        notes.append("is_causal not recorded: assumed False")
    op: OpDict = {"kind": "attention", "batch": q[0], "heads": q[1], "kv_heads": k[1], "seq_q": q[2],
                  "seq_kv": k[2], "head_dim": q[3], "head_dim_v": v[3], "dtype": a.dtype(first),
                  "causal": bool(causal), "pass": "backward" if backward else "forward"}
    return op, notes


def _rank(a: Args, shape: tuple[int, ...], rank: int) -> None:
    if len(shape) != rank:
        raise Unbuildable(f"{a.name}: expected a rank-{rank} operand, got {list(shape)}")


def _pair(values: list[int]) -> tuple[int, int]:
    if not values:
        raise Unbuildable("empty stride/padding/dilation list")
    return values[0], values[1] if len(values) > 1 else values[0]
