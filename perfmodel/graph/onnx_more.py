"""More ONNX operators costed by their own model (issue 26, tenth pass): element and n-D gathers, TopK, CumSum,
the depth / space block permutations and the Lp / mean-variance normalizations. Each is memory-bound; its
model says which bytes move.

- ``GatherElements``: y[i] = x[..., idx[i], ...]: a pass over the output reading the indices and one element of
  x each, writing y (as ``torch.gather`` along a dim: the reads follow the output's order).
- ``GatherND``: rows of x (the dims after ``batch_dims + k``) picked by the k-tuples of the indices: a ``gather``
  of ``numel(idx[:-1])`` rows from a table of ``numel(x[:batch_dims + k])`` rows.
- ``TopK``: a selection over one axis: x read once (a ``reduce`` over the axis); the k values and indices are
  small next to x.
- ``CumSum``: a scan: x read once, y written once, one add per element.
- ``DepthToSpace`` / ``SpaceToDepth``: a block permutation, a ``transpose`` of the 6-D view (x read and y
  written once), as ONNX defines them (Reshape, Transpose, Reshape).
- ``LpNormalization`` / ``MeanVarianceNormalization``: a LayerNorm-like pass over the normalized axes (rows of
  the other dims; statistics, then scale).
- ``LSTM`` / ``GRU`` / ``RNN``: cuDNN's standard algorithm — one GEMM of all steps' inputs against W, then per
  step a recurrent GEMM and a gate pass, serially.
- ``RoiAlign``: s x s bilinear samples per output element (s = ``sampling_ratio``, 2 when adaptive);
  ``NonMaxSuppression``: the score sort and an all-pairs IoU bitmask per batch and class (torchvision's kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx

from perfmodel.graph.ir import GraphError
from perfmodel.graph.mapping import numel, storage
from perfmodel.graph.onnx_ctx import Ctx, attrs


def _gather_elements(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    (_, dx), (idx, _) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    return [{"kind": "elementwise", "shape": list(idx) or [1], "dtype": storage(dx), "inputs": 2, "outputs": 1,
             "flops_per_element": 0.0}]


def _gather_nd(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    (x, dx), (idx, di) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    batch = int(attrs(node).get("batch_dims", 0))
    k = idx[-1] if idx else 0
    if not idx or not 0 < batch + k <= len(x):
        raise GraphError(label, f"GatherND indices {list(idx)} (batch_dims {batch}) do not index data {list(x)}")
    return [{"kind": "gather", "table_shape": [numel(x[:batch + k]), numel(x[batch + k:])],
             "num_indices": max(numel(idx[:-1]), 1), "dtype": storage(dx),
             "index_dtype": di if di in ("int32", "int64") else "int64"}]


def _topk(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    axis = int(attrs(node).get("axis", -1)) % max(len(x), 1)
    return [{"kind": "reduce", "shape": list(x) or [1], "axes": [axis], "dtype": dx, "op": "max"}]


def _cumsum(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    return [{"kind": "elementwise", "shape": list(x) or [1], "dtype": storage(dx), "inputs": 1, "outputs": 1,
             "flops_per_element": 1.0}]


def _block_permute(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    b = int(attrs(node).get("blocksize", 0))
    if len(x) != 4 or b <= 0:
        raise GraphError(label, f"{node.op_type}: blocksize {b} on input {list(x)} (need [N, C, H, W], blocksize > 0)")
    n, c, h, w = x
    if node.op_type == "DepthToSpace":  # DCR: [N, b, b, C/b², H, W] -> [N, C/b², H, b, W, b]
        if c % (b * b):
            raise GraphError(label, f"blocksize: {b}² does not divide {c} channels")
        shape, perm = [n, b, b, c // (b * b), h, w], [0, 3, 4, 1, 5, 2]
    else:  # SpaceToDepth: [N, C, H/b, b, W/b, b] -> [N, b, b, C, H/b, W/b]
        if h % b or w % b:
            raise GraphError(label, f"blocksize: {b} does not divide the spatial size {h}x{w}")
        shape, perm = [n, c, h // b, b, w // b, b], [0, 3, 5, 1, 2, 4]
    return [{"kind": "transpose", "shape": shape, "perm": perm, "dtype": storage(dx)}]


def _lp_norm(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    if node.op_type == "LpNormalization":
        axes = [int(attrs(node).get("axis", -1)) % max(len(x), 1)]
    else:
        axes = [int(a) % max(len(x), 1) for a in attrs(node).get("axes", [0, 2, 3])]
    cols = numel(tuple(x[a] for a in set(axes)))
    return [{"kind": "layernorm", "shape": [max(numel(x) // max(cols, 1), 1), cols], "dtype": dx}]


MORE_HANDLERS: dict[str, Callable[[Ctx, onnx.NodeProto, str], list[dict[str, Any]]]] = {
    "GatherElements": _gather_elements, "GatherND": _gather_nd, "TopK": _topk, "CumSum": _cumsum,
    "DepthToSpace": _block_permute, "SpaceToDepth": _block_permute, "LpNormalization": _lp_norm,
    "MeanVarianceNormalization": _lp_norm,
}


RNN_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
# per element of the gate pre-activations: sigmoid/tanh (2 FLOPs, 1 transcendental each) and the state update
RNN_GATE_COST = {"LSTM": (3.0, 1.25), "GRU": (3.0, 1.0), "RNN": (2.0, 1.0)}


def _rnn(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """LSTM / GRU / RNN as cuDNN's standard algorithm runs them: one GEMM of every step's input against W
    (seq·batch rows, gates·hidden per direction), then per step and direction the recurrent GEMM h·Rᵀ (batch
    rows) and the gate nonlinearities, step after step (each its own kernels: the recurrence is serial)."""
    (x, dx), (w, _) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    at = attrs(node)
    gates = RNN_GATES[node.op_type]
    if len(x) != 3 or len(w) != 3:
        raise GraphError(label, f"{node.op_type} of X {list(x)} and W {list(w)}: need rank-3 X and W")
    seq, batch = (x[1], x[0]) if int(at.get("layout", 0)) == 1 else (x[0], x[1])
    dirs, hidden = w[0], int(at.get("hidden_size", w[1] // gates))
    if hidden <= 0 or w[1] != gates * hidden:
        raise GraphError(label, f"hidden_size: {hidden} x {gates} gates does not match W {list(w)}")
    if seq > MAX_RNN_STEPS:
        raise GraphError(label, f"sequence length {seq}: more than {MAX_RNN_STEPS} steps are not unrolled")
    flops, special = RNN_GATE_COST[node.op_type]
    ops: list[dict[str, Any]] = [{"kind": "matmul", "m": seq * batch, "n": gates * hidden, "k": x[2], "dtype": dx,
                                  "batch": dirs}]
    step = [{"kind": "matmul", "m": batch, "n": gates * hidden, "k": hidden, "dtype": dx, "batch": dirs},
            {"kind": "elementwise", "shape": [dirs, batch, gates * hidden], "dtype": storage(dx), "inputs": 2,
             "outputs": 1, "flops_per_element": flops, "transcendentals_per_element": special}]
    return ops + step * seq


MAX_RNN_STEPS = 4096  # each step is two graph nodes
# torchvision's RoIAlign heads (MultiScaleRoIAlign, Mask R-CNN / Faster R-CNN) use sampling_ratio=2; an ONNX 0 is
# adaptive (ceil(roi size / output size)), unknown at import: taken as 2
ROI_SAMPLES_DEFAULT = 2
BILINEAR_FLOPS = 8.0  # 4 weights x value products, 3 adds, the accumulate
NMS_MASK_BITS = 64  # torchvision csrc/ops/cuda/nms_kernel.cu: each thread compares one box with 64 (a u64 mask)
IOU_FLOPS = 10.0  # intersection (4 min/max, 2 sub, 1 mul), union (2 add/sub), the compare


def _roi_align(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """RoiAlign: each output element averages (or maxes) s x s bilinear samples of its ROI bin; the features
    are read once per output (the bins of one ROI are neighbours in cache), y written once."""
    (x, dx), (rois, _) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    at = attrs(node)
    if len(x) != 4 or len(rois) != 2:
        raise GraphError(label, f"RoiAlign of X {list(x)} and rois {list(rois)}: need [N, C, H, W] and [R, 4]")
    ratio = int(at.get("sampling_ratio", 0)) or ROI_SAMPLES_DEFAULT
    out = [rois[0], x[1], int(at.get("output_height", 1)), int(at.get("output_width", 1))]
    return [{"kind": "elementwise", "shape": out, "dtype": storage(dx), "inputs": 1, "outputs": 1,
             "flops_per_element": BILINEAR_FLOPS * ratio * ratio}]


def _nms(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """NonMaxSuppression as torchvision's CUDA kernel runs it, per batch and class: the scores sorted (one read),
    then every box against every other in 64-box words of an IoU bitmask (N x N/64 u64 written)."""
    (boxes, dx), (scores, _) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    if len(boxes) != 3 or len(scores) != 3 or boxes[1] != scores[2]:
        raise GraphError(label, f"NonMaxSuppression of boxes {list(boxes)} and scores {list(scores)}: need "
                                "[B, N, 4] and [B, C, N]")
    n, words = boxes[1], -(-boxes[1] // NMS_MASK_BITS)
    return [{"kind": "reduce", "shape": list(scores), "axes": [2], "dtype": dx, "op": "max"},
            {"kind": "elementwise", "shape": [scores[0] * scores[1], n, words], "dtype": "int64", "inputs": 0,
             "outputs": 1, "flops_per_element": IOU_FLOPS * NMS_MASK_BITS}]


MORE_HANDLERS.update({"LSTM": _rnn, "GRU": _rnn, "RNN": _rnn, "RoiAlign": _roi_align, "NonMaxSuppression": _nms})
