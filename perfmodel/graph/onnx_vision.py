"""ONNX vision ops: convolution 1-3 D and transposed, pooling, LRN, n-ary Sum/Mean, Dropout/Identity.
Each handler returns the op dicts of one ONNX node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx

from perfmodel.graph.ir import GraphError
from perfmodel.graph.mapping import full_size_inputs, numel, storage, transposed_conv, view
from perfmodel.graph.onnx_ctx import Ctx, Shape, attrs


def _conv(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """Conv 1-3 D: a 1-D conv is a 2-D one of height 1; a 3-D one fills ``conv2d``'s depth fields."""
    at = attrs(node)
    (x, dx), (w, _) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    rank = len(x) - 2
    if rank not in (1, 2, 3) or len(w) != len(x):
        raise GraphError(label, f"Conv of input {list(x)} and weight {list(w)}: 1-, 2- and 3-D convolutions "
                                "are modelled")
    strides, dil = _ints(at, "strides", rank, label), _ints(at, "dilations", rank, label)
    totals = _pad_totals(at, x[2:], w[2:], strides, dil, label)
    # the op pads both sides alike: an odd total puts its extra element on the input (exact output size)
    pads = [t // 2 for t in totals]
    spatial, kernel = [size + t % 2 for size, t in zip(x[2:], totals, strict=True)], list(w[2:])
    if rank == 1:
        spatial, kernel, strides, dil, pads = [1, *spatial], [1, *kernel], [1, *strides], [1, *dil], [0, *pads]
    depth: dict[str, Any] = {}
    if rank == 3:
        depth = {"depth": spatial[0], "kernel_d": kernel[0], "stride_d": strides[0], "padding_d": pads[0],
                 "dilation_d": dil[0]}
        spatial, kernel, strides, dil, pads = spatial[1:], kernel[1:], strides[1:], dil[1:], pads[1:]
    return [{"kind": "conv2d", "batch": x[0], "in_channels": x[1], "out_channels": w[0], "height": spatial[0],
             "width": spatial[1], "kernel_h": kernel[0], "kernel_w": kernel[1], "dtype": dx, "stride": strides[0],
             "stride_w": strides[1], "padding": pads[0], "padding_w": pads[1], "dilation": dil[0],
             "dilation_w": dil[1], "groups": int(at.get("group", 1)),
             "bias": len(node.input) > 2 and bool(node.input[2]), **depth}]


def _ints(at: dict[str, Any], name: str, n: int, label: str) -> list[int]:
    """An attribute of ``n`` positive integers (default ones), or a GraphError naming it."""
    value = at.get(name, [1] * n)
    if not isinstance(value, list) or len(value) != n or not all(isinstance(v, int) and v > 0 for v in value):
        raise GraphError(label, f"{name}: expected {n} positive integers, got {value!r}")
    return [int(v) for v in value]


def _pad_totals(at: dict[str, Any], spatial: Shape, kernel: Shape, strides: list[int], dil: list[int],
                label: str) -> list[int]:
    """Per-dim padding, begin + end: explicit ``pads``, or ``auto_pad`` SAME_* resolved to the padding that gives
    ceil(in/stride) outputs (VALID / NOTSET without pads: none)."""
    auto = at.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto.startswith("SAME"):
        return [max((-(-size // st) - 1) * st + dl * (k - 1) + 1 - size, 0)
                for size, k, st, dl in zip(spatial, kernel, strides, dil, strict=True)]
    n = len(spatial)
    pads = [int(v) for v in at.get("pads", [0] * 2 * n)]
    if len(pads) != 2 * n:
        raise GraphError(label, f"pads {pads}: need {2 * n} values for {n} spatial dims")
    return [pads[i] + pads[i + n] for i in range(n)]


def _conv_transpose(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """ConvTranspose 1-3 D as the libraries run it: x[N·spatial, C/g] x w[C/g, K/g·kernel] per group (the
    GEMM writes the columns), then col2im scatter-adds them into y (the columns read once more)."""
    at = attrs(node)
    (x, dx), (w, _) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    if len(x) < 3 or len(w) != len(x):
        raise GraphError(label, f"ConvTranspose of input {list(x)} and weight {list(w)}: need [N, C, spatial...]")
    groups = int(at.get("group", 1))
    if x[1] % groups or w[0] != x[1]:
        raise GraphError(label, f"ConvTranspose group={groups}: weight {list(w)} does not match {x[1]} channels")
    y, _ = ctx.get(node.output[0], label)
    return transposed_conv(x[0] * numel(x[2:]), x[1] // groups, w[1] * numel(w[2:]), groups, y, dx,
                           len(node.input) > 2 and bool(node.input[2]))


def _pool(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """Max/Average/Lp pooling: a windowed reduction, bytes-bound: x read once (overlapping windows hit in
    cache), y written once, one FLOP per window element of each output."""
    at = attrs(node)
    (x, dx), (y, _) = ctx.get(node.input[0], label), ctx.get(node.output[0], label)
    if len(x) < 3:
        raise GraphError(label, f"{node.op_type} of input {list(x)}: need [N, C, spatial...]")
    if node.op_type.startswith("Global"):
        return [{"kind": "reduce", "shape": list(x), "axes": list(range(2, len(x))), "dtype": dx,
                 "op": "max" if "Max" in node.op_type else "mean"}]
    window = numel(tuple(int(k) for k in at["kernel_shape"]))
    reads = max(1, round(numel(x) / max(numel(y), 1)))  # x's elements per output: x streamed once
    return [{"kind": "elementwise", "shape": list(y), "dtype": storage(dx), "inputs": reads, "outputs": 1,
             "flops_per_element": float(window)}]


def _lrn(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """LRN: per element a sum of squares over ``size`` channels (2 FLOPs each), scale and a pow."""
    x, dx = ctx.get(node.input[0], label)
    size = int(attrs(node)["size"])
    return [{"kind": "elementwise", "shape": list(x), "dtype": storage(dx), "inputs": 1, "outputs": 1,
             "flops_per_element": 2.0 * size + 3.0, "transcendentals_per_element": 1.0}]


def _sum(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """Sum / Mean / Max / Min of n tensors: elementwise, n - 1 FLOPs per output element."""
    y, dy = ctx.get(node.output[0], label)
    shapes = [ctx.get(i, label)[0] for i in node.input if i]
    return [{"kind": "elementwise", "shape": list(y) or [1], "dtype": storage(dy),
             "inputs": full_size_inputs(shapes, y), "outputs": 1,
             "flops_per_element": float(max(len(shapes) - 1, 1))}]


def _instance_norm(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """InstanceNormalization / GroupNormalization: a LayerNorm over rows of (N·groups) x (C/groups·spatial)."""
    x, dx = ctx.get(node.input[0], label)
    if len(x) < 3:
        raise GraphError(label, f"{node.op_type} of input {list(x)}: need [N, C, spatial...]")
    groups = int(attrs(node).get("num_groups", x[1])) if node.op_type == "GroupNormalization" else x[1]
    if groups <= 0 or x[1] % groups:
        raise GraphError(label, f"num_groups: {groups} does not divide {x[1]} channels")
    return [{"kind": "layernorm", "shape": [x[0] * groups, numel(x) // (x[0] * groups)], "dtype": dx}]


RESIZE_FLOPS_PER_OUTPUT = {"nearest": 0.0, "linear": 3.0, "cubic": 8.0}  # per interpolated spatial dim


def _resize(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """Resize / Upsample: each output element interpolates from its neighbours (in cache): x read and y written
    once, a lerp (3 FLOPs) or cubic (8) per interpolated spatial dim."""
    x, dx = ctx.get(node.input[0], label)
    y = ctx.info[node.output[0]][0] if node.output[0] in ctx.info else _resized(ctx, node, x, label)
    ctx.info.setdefault(node.output[0], (y, dx))
    mode = attrs(node).get("mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    dims = sum(1 for a, b in zip(x, y, strict=False) if a != b)
    reads = round(numel(x) / max(numel(y), 1))  # downsampling: x's elements per output; upsampling: under 1
    return [{"kind": "elementwise", "shape": list(y) or [1], "dtype": storage(dx), "inputs": reads, "outputs": 1,
             "flops_per_element": RESIZE_FLOPS_PER_OUTPUT.get(mode, 3.0) * dims}]


def _resized(ctx: Ctx, node: onnx.NodeProto, x: Shape, label: str) -> Shape:
    """Resize's output shape from its constant ``sizes`` (input 3) or ``scales`` (input 2, floor(x·scale))."""
    ins = list(node.input)
    sizes = ctx.ints(ins[3]) if len(ins) > 3 and ins[3] else None
    if sizes is not None and len(sizes) == len(x):
        return tuple(sizes)
    scales = ctx.floats(ins[2]) if len(ins) > 2 and ins[2] else None
    if scales is not None and len(scales) == len(x):
        return tuple(int(d * f) for d, f in zip(x, scales, strict=True))
    raise GraphError(label, f"{node.op_type}: output shape unknown and neither sizes nor scales is a constant")


def _arg_reduce(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """ArgMax / ArgMin: a max/min reduction along ``axis``."""
    x, dx = ctx.get(node.input[0], label)
    axis = int(attrs(node).get("axis", 0)) % max(len(x), 1)
    return [{"kind": "reduce", "shape": list(x) or [1], "axes": [axis], "dtype": dx,
             "op": "max" if node.op_type == "ArgMax" else "min"}]


def _identity(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """Dropout at inference (and Identity): y is x, no kernel."""
    x, dx = ctx.get(node.input[0], label)
    return [view(x, dx)]


# ops whose first output has the first input's shape and dtype: shape inference that misses one (GroupNormalization
# is an ONNX function op) gets it from the input, so the nodes after it still cost by their own models
SHAPE_PRESERVING = frozenset({"InstanceNormalization", "GroupNormalization", "LRN", "Dropout", "Identity",
                              "BatchNormalization", "LayerNormalization", "RMSNormalization", "Softmax"})

VISION_HANDLERS: dict[str, Callable[[Ctx, onnx.NodeProto, str], list[dict[str, Any]]]] = {
    "Conv": _conv, "ConvTranspose": _conv_transpose, "MaxPool": _pool, "AveragePool": _pool, "LpPool": _pool,
    "GlobalAveragePool": _pool, "GlobalMaxPool": _pool, "GlobalLpPool": _pool, "LRN": _lrn, "Sum": _sum, "Mean": _sum,
    "Dropout": _identity, "Identity": _identity, "InstanceNormalization": _instance_norm,
    "GroupNormalization": _instance_norm, "Resize": _resize, "Upsample": _resize, "ArgMax": _arg_reduce,
    "ArgMin": _arg_reduce,
}
