"""ONNX → graph: shapes from ``onnx.shape_inference``, one graph node per ONNX node (two for a
com.microsoft ``Attention``, which includes its QKV projection). Initializers are weights, and so are
the float tensors of ``Constant`` nodes and of ``ConstantOfShape`` nodes whose shape is constant (the
ONNX backend-test "light" models build every weight that way): the first node that reads one holds its
parameters, and the constant-producing node itself is free (folded before the first run). Symbolic dims
bind through ``dims``. Shape arithmetic on constants is folded (``onnx_fold``: exporter attention masks),
and shapes that folding resolves are propagated late. A node whose handler cannot build a valid op (an
unresolvable shape, sizes the op rejects) becomes an ``unsupported`` node with a bytes-bound fallback and
the reason, never an abort.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import onnx
from onnx import shape_inference

from perfmodel.dtypes import parse_dtype
from perfmodel.graph.ir import Graph, GraphError, Node
from perfmodel.graph.loops import LoopTrips
from perfmodel.graph.mapping import (
    VIEWS,
    as_2d,
    elementwise,
    fallback,
    full_size_inputs,
    layer_of,
    numel,
    storage,
    view,
)
from perfmodel.graph.onnx_control import CONTROL_OPS, map_control
from perfmodel.graph.onnx_ctx import INDEX_TYPES, ONNX_DTYPES, Ctx, Info, attrs, dtype_of
from perfmodel.graph.onnx_fold import einsum_dims, late_shape
from perfmodel.graph.onnx_more import MORE_HANDLERS
from perfmodel.graph.onnx_vision import SHAPE_PRESERVING, VISION_HANDLERS
from perfmodel.ops import OpError, make_op

__all__ = ["ONNX_DTYPES", "import_onnx"]

def import_onnx(source: str | Path | bytes | onnx.ModelProto, dims: dict[str, int] | None = None,
                name: str | None = None, trip_counts: Mapping[str, int] | None = None) -> Graph:
    """Load an ONNX model (path, bytes or ModelProto), infer shapes, map every node. ``trip_counts``: iterations
    of Loops whose ``M`` the file does not hold, by node name (``"*"``: every other one; ``perfmodel.graph.loops``);
    ``graph.meta["loops"]`` lists each Loop / Scan with the count used and where it came from."""
    trips = LoopTrips(trip_counts)
    if isinstance(source, onnx.ModelProto):
        model = source
    else:
        try:
            model = onnx.load_from_string(source) if isinstance(source, bytes) else onnx.load(str(source))
        except Exception as exc:  # protobuf's DecodeError and OSError: not an ONNX file
            raise GraphError("<model>", f"not a readable ONNX model: {exc}") from exc
    try:
        model = shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception as exc:  # onnx raises its own InferenceError / ValidationError types
        raise GraphError("<model>", f"ONNX shape inference failed: {exc}") from exc
    try:
        ctx = Ctx(model, dims or {}, trips=trips)
        graph = Graph(name=name or model.graph.name or "onnx")
        for index, node in enumerate(model.graph.node):
            label = node.name or f"{node.op_type}_{index}"
            if not isinstance(label, str):  # protobuf hands back bytes for a name that is not UTF-8
                raise GraphError(f"node #{index}", f"name {label!r} is not UTF-8 text")
            for out in _map(ctx, node, label):
                graph.add(out)
        for t, (shape, dtype) in [*ctx.info.items(), *ctx.sub_tensors.items()]:
            graph.add_tensor(t, shape, storage(dtype))
    except (TypeError, AttributeError) as exc:  # a field of the wrong type outside any one op's handler
        raise GraphError("<model>", f"malformed ONNX model: {type(exc).__name__}: {exc}") from exc
    graph.meta.update({"kind": "onnx", "phase": "inference", "opset": [o.version for o in model.opset_import],
                       "producer": model.producer_name})
    if ctx.notes:
        graph.meta["control_flow"] = ctx.notes
    trips.into(graph.meta)
    return graph


def _map(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[Node]:
    """Graph nodes for one ONNX node (covered, view, or unsupported with a fallback)."""
    ins = [x for x in node.input if x]
    outs = [x for x in node.output if x]
    op_type = node.op_type
    computed = bool(outs) and all(o in ctx.folded for o in outs) and op_type not in ("Constant", "ConstantOfShape")
    params, wbytes = _charge(ctx, [i for i in ins if not (computed and ctx.mask_like(i))],
                             buffers=_bn_buffers(ctx, ins) if op_type == "BatchNormalization" else [])
    base: dict[str, Any] = {"inputs": ins, "outputs": outs, "layer": layer_of(label), "source_op": op_type,
            "params": params, "weight_bytes": wbytes}
    if outs and all(o in ctx.folded for o in outs):  # Constant / ConstantOfShape: folded, no kernel
        shape, dtype = ctx.info.get(outs[0], ((1,), "fp32"))
        return [Node(name=label, op=view(shape, dtype), **base)]
    if outs and outs[0] not in ctx.info:
        _late_info(ctx, node, ins, outs[0])
    if op_type in CONTROL_OPS:
        try:
            control = map_control(ctx, node, label, _map, base)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, ZeroDivisionError) as exc:
            control = (f"node {label!r}: {op_type} subgraph could not be imported ({type(exc).__name__}: {exc}); "
                     "bounded by its bytes over DRAM bandwidth")
        return [_fallback_node(ctx, ins, outs, label, control, base)] if isinstance(control, str) else control
    handler = HANDLERS.get(op_type)
    if op_type in SHAPE_PRESERVING and ins and outs and ins[0] in ctx.info:
        ctx.info.setdefault(outs[0], ctx.info[ins[0]])
    if handler is not None:
        try:
            ops = handler(ctx, node, label)
            for built in ops:
                make_op(built)  # sizes the op rejects fall back here, naming the node and field
        except (ValueError, KeyError, IndexError, TypeError, ZeroDivisionError) as exc:
            why = str(exc) if isinstance(exc, GraphError | OpError) else (
                f"node {label!r}: malformed attributes or inputs: {type(exc).__name__}: {exc}")
            return [_fallback_node(ctx, ins, outs, label, f"ONNX op {op_type} could not be costed by its "
                                   f"model ({why}); bounded by its bytes over DRAM bandwidth", base)]
        if len(ops) == 1:
            return [Node(name=label, op=ops[0], **base)]
        return [Node(name=f"{label}/{k}", op=op, **{**base, "params": params if k == 0 else 0,
                                                     "weight_bytes": wbytes if k == 0 else 0.0})
                for k, op in enumerate(ops)]
    if op_type.lower() in VIEWS:
        shape, dtype = ctx.get(outs[0], label) if outs and outs[0] in ctx.info else ((1,), "fp32")
        return [Node(name=label, op=view(shape, dtype), **base)]
    unknown = [i for i in ins if i not in ctx.info]
    if unknown:
        return [_fallback_node(ctx, ins, outs, label, str(GraphError(label, ctx.missing(unknown[0]))), base)]
    in_info = [ctx.get(i, label) for i in ins]
    out_info = [ctx.info[o] for o in outs if o in ctx.info]
    if out_info and len(out_info) == len(outs):
        op = elementwise(op_type, out_info[0][0], _wider(in_info, out_info[0][1]),
                         full_size_inputs([s for s, _ in in_info], out_info[0][0]))
        if op is not None:
            return [Node(name=label, op=op, **base)]
    reason = (f"ONNX op {op_type} ({node.domain or 'ai.onnx'}) has no cost model; "
              "bounded by its bytes over DRAM bandwidth")
    return [_fallback_node(ctx, ins, outs, label, reason, base)]


def _fallback_node(ctx: Ctx, ins: list[str], outs: list[str], label: str, reason: str,
                   base: dict[str, Any]) -> Node:
    """An unsupported node: a zero-FLOP stream over the tensors whose shapes are known."""
    in_info = [ctx.info[i] for i in ins if i in ctx.info]
    out_info = [ctx.info[o] for o in outs if o in ctx.info]
    if not in_info and not out_info:  # listed, with a one-element stream: its time is not bounded
        return Node(name=label, op=None, unsupported=f"{reason} (no input or output shape is known: its time "
                    "is not bounded)", fallback=fallback([(1,)], [(1,)], "fp32"), **base)
    if len(out_info) < len(outs):
        largest = max(in_info, key=lambda i: numel(i[0]))
        out_info = [*out_info, *[largest] * (len(outs) - len(out_info))]
        reason += " (output shape unknown: assumed the size of its largest input)"
    dtype = (out_info or in_info)[0][1]
    return Node(name=label, op=None, unsupported=reason,
                fallback=fallback([s for s, _ in in_info], [s for s, _ in out_info], dtype), **base)


def _late_info(ctx: Ctx, node: onnx.NodeProto, ins: list[str], out: str) -> None:
    """Record the output shape shape inference missed once folding resolved the inputs (onnx_fold)."""
    in_shapes = [ctx.info[i][0] if i in ctx.info else None for i in ins]
    shape_arg = ctx.ints(ins[1]) if node.op_type in ("Expand", "Reshape") and len(ins) > 1 else None
    shape = late_shape(node.op_type, in_shapes[:1] if node.op_type == "Reshape" else in_shapes, attrs(node),
                       shape_arg)
    if shape is not None:
        data = 1 if node.op_type == "Where" else 0
        dtype = "bool" if node.op_type in ("Equal", "Less", "Greater", "And", "Or", "Not") else ctx.info[ins[data]][1]
        if node.op_type == "Cast":
            dtype = dtype_of(int(attrs(node)["to"]), out)
        ctx.info[out] = (shape, dtype)


def _wider(infos: list[Info], default: str) -> str:
    floats = [d for _, d in infos if d not in ("bool",) and parse_dtype(d).is_float]
    return max(floats, key=lambda d: parse_dtype(d).bytes) if floats else default


def _bn_buffers(ctx: Ctx, ins: list[str]) -> list[str]:
    """A BatchNormalization's stored inputs that are not learned: the running mean and variance, and a scale of
    ones with a bias of zeros (Caffe's BatchNorm layer has no affine, its Scale layer after it holds the learned
    one, and Caffe-converted models such as the zoo's DenseNet-121 carry that identity into the BN)."""
    scale = ctx.floats(ins[1]) if len(ins) > 2 else None
    bias = ctx.floats(ins[2]) if scale is not None else None
    identity = bool(scale) and bool(bias) and all(v == 1.0 for v in scale or []) and not any(bias or [])
    return ins[1:5] if identity else ins[3:5]


def _charge(ctx: Ctx, ins: list[str], buffers: list[str]) -> tuple[int, float]:
    """Parameters and weight bytes of the constant inputs not yet charged (``buffers``, a BatchNorm's running
    mean and variance, are stored bytes but not parameters)."""
    params, size = 0, 0.0
    for name in ins:
        t = ctx.init.get(name)
        made = (tuple(int(d) for d in t.dims), t.data_type) if t is not None else ctx.made.get(name)
        if made is None or name in ctx.charged:
            continue
        shape, code = made
        if len(shape) >= 1 and code not in INDEX_TYPES and code != onnx.TensorProto.BOOL:
            ctx.charged.add(name)
            n = numel(shape)
            params += 0 if name in buffers else n
            size += n * parse_dtype(storage(dtype_of(code, name))).bytes
    return params, size


# --- handlers: each returns the op dicts of one ONNX node -------------------------------------

def _matmul(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    (a, da), (b, _) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    if len(a) < 1 or len(b) < 2:
        raise GraphError(label, f"MatMul of shapes {list(a)} x {list(b)}: need a matrix operand B")
    a2 = a if len(a) >= 2 else (1, *a)
    m, k = a2[-2], a2[-1]
    if b[-2] != k:
        raise GraphError(label, f"MatMul inner dims differ: {list(a)} x {list(b)}")
    batch = max(numel(a2[:-2]), numel(b[:-2]))
    op: dict[str, Any] = {"kind": "matmul", "m": m, "n": b[-1], "k": k, "dtype": da, "batch": batch,
                          "b_batched": len(b) > 2 and numel(b[:-2]) > 1}
    if len(b) == 2 and batch > 1:  # a linear layer over a batch of rows: one GEMM
        op.update(m=m * batch, batch=1, b_batched=True)
    return [op]


def _gemm(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    at = attrs(node)
    (a, da), (b, _) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    m, k = (a[1], a[0]) if at.get("transA") else (a[0], a[1])
    n = b[0] if at.get("transB") else b[1]
    return [{"kind": "matmul", "m": m, "n": n, "k": k, "dtype": da, "bias": len(node.input) > 2 and bool(node.input[2]),
             "transpose_a": bool(at.get("transA")), "transpose_b": bool(at.get("transB"))}]


def _norm(kind: str) -> Callable[[Ctx, onnx.NodeProto, str], list[dict[str, Any]]]:
    def handler(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
        x, dx = ctx.get(node.input[0], label)
        return [{"kind": kind, "shape": as_2d(x, int(attrs(node).get("axis", -1))), "dtype": dx}]
    return handler


def _batchnorm(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    return [{"kind": "batchnorm", "shape": [x[0], *x[2:], x[1]] if len(x) > 1 else list(x), "dtype": dx}]


def _softmax(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    axis = int(attrs(node).get("axis", -1)) % max(len(x), 1)
    return [{"kind": "softmax", "shape": [max(numel(x[:axis]) * numel(x[axis + 1:]), 1), x[axis] if x else 1],
             "dtype": dx}]


def _reduce(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    at = attrs(node)
    axes = at.get("axes") or (ctx.ints(node.input[1]) if len(node.input) > 1 and node.input[1] else None)
    axes = [int(a) % len(x) for a in axes] if axes else list(range(len(x)))
    kind = {"ReduceMax": "max", "ReduceMin": "min", "ReduceMean": "mean"}.get(node.op_type, "sum")
    return [{"kind": "reduce", "shape": list(x) or [1], "axes": axes or [0], "dtype": dx, "op": kind}]


def _transpose(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    perm = attrs(node).get("perm") or list(reversed(range(len(x))))
    return [{"kind": "transpose", "shape": list(x), "perm": [int(p) for p in perm], "dtype": storage(dx)}]


def _gather(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    (data, dd), (idx, di) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    if int(attrs(node).get("axis", 0)) % max(len(data), 1) != 0:
        return [fallback([data, idx], [ctx.get(node.output[0], label)[0]], dd)]
    table = [data[0], numel(data[1:])] if data else [1, 1]
    kind = "embedding" if node.input[0] in ctx.init and len(data) == 2 else "gather"
    return [{"kind": kind, "table_shape": table, "num_indices": max(numel(idx), 1), "dtype": storage(dd),
             "index_dtype": di if di in ("int32", "int64") else "int64"}]


def _scatter(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    (data, dd), (upd, _) = ctx.get(node.input[0], label), ctx.get(node.input[-1], label)
    row = numel(data[1:]) if len(data) > 1 else 1
    reduction = attrs(node).get("reduction", b"none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else str(reduction)
    return [{"kind": "scatter", "table_shape": [data[0] if data else 1, row], "dtype": storage(dd),
             "num_indices": max(numel(upd) // max(row, 1), 1), "reduce": "add" if reduction == "add" else "none"}]


def _quant(kind: str) -> Callable[[Ctx, onnx.NodeProto, str], list[dict[str, Any]]]:
    def handler(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
        (x, dx), (scale, ds) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
        _, dy = ctx.get(node.output[0], label)
        block = int(attrs(node).get("block_size", 0))
        gran = "group" if block else ("tensor" if numel(scale) == 1 else "channel")
        op: dict[str, Any] = {"kind": kind, "shape": list(x) or [1], "from_dtype": dx, "to_dtype": dy,
                              "granularity": gran, "scale_dtype": ds}
        if block:
            op["group_size"] = block
        return [op]
    return handler


def _attention(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """ONNX (opset 23) ``Attention`` and com.microsoft ``MultiHeadAttention`` / ``Attention``."""
    at = attrs(node)
    q, dq = ctx.get(node.input[0], label)
    ops: list[dict[str, Any]] = []
    if node.domain == "com.microsoft" and node.op_type == "Attention":  # input x, packed QKV weights
        w, _ = ctx.get(node.input[1], label)
        heads = int(at["num_heads"])
        ops.append({"kind": "matmul", "m": q[0] * q[1], "k": w[0], "n": w[1], "dtype": dq,
                    "bias": len(node.input) > 2 and bool(node.input[2])})
        hidden = w[1] // 3
        return [*ops, _attn_op(q[0], heads, heads, q[1], q[1], hidden // heads, hidden // heads, dq,
                               bool(at.get("unidirectional", 0)))]
    k, _ = ctx.get(node.input[1], label)
    v, _ = ctx.get(node.input[2], label)
    if len(q) == 4:  # [B, H, S, D]
        return [_attn_op(q[0], q[1], k[1], q[2], k[2], q[3], v[3], dq, bool(at.get("is_causal", 0)))]
    heads = int(at.get("q_num_heads") or at.get("num_heads") or 0)
    if not heads:
        raise GraphError(label, "3-D attention inputs need the num_heads / q_num_heads attribute")
    kv_heads = int(at.get("kv_num_heads") or heads)
    d, dv = q[2] // heads, v[2] // kv_heads
    return [_attn_op(q[0], heads, kv_heads, q[1], k[1], d, dv, dq, bool(at.get("is_causal", 0)))]


def _attn_op(b: int, h: int, kvh: int, sq: int, skv: int, d: int, dv: int, dtype: str, causal: bool) -> dict[str, Any]:
    return {"kind": "attention", "batch": b, "heads": h, "kv_heads": kvh, "seq_q": sq, "seq_kv": skv,
            "head_dim": d, "head_dim_v": dv, "dtype": dtype, "causal": causal}


def _matmul_nbits(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """com.microsoft MatMulNBits: weight-only int4/int8 GEMM with block-wise scales."""
    at = attrs(node)
    a, da = ctx.get(node.input[0], label)
    bits = int(at.get("bits", 4))
    return [{"kind": "matmul", "m": numel(a[:-1]), "k": int(at["K"]), "n": int(at["N"]), "dtype": da,
             "weight_dtype": "int4" if bits == 4 else "int8", "group_size": int(at.get("block_size", 128))}]


def _einsum(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """Two-operand Einsum as a batched GEMM (onnx_fold.einsum_dims); other forms fall back, named."""
    infos = [ctx.get(i, label) for i in node.input if i]
    eq = attrs(node)["equation"]
    eq = eq.decode() if isinstance(eq, bytes) else str(eq)
    dims = einsum_dims(eq, [s for s, _ in infos])
    if dims is None:
        raise GraphError(label, f"Einsum {eq!r}: only two-operand equations without '...' are costed")
    batch, m, n, k = dims
    return [{"kind": "matmul", "m": m, "n": n, "k": k, "dtype": infos[0][1], "batch": batch,
             "b_batched": batch > 1}]


def _concat(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    y, dy = ctx.get(node.output[0], label)
    op = elementwise("copy", y, dy, 1)
    assert op is not None
    return [op]


def _split(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    op = elementwise("copy", x, dx, 1)
    assert op is not None
    return [op]


def _fill(ctx: Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    y, dy = ctx.get(node.output[0], label)
    return [{"kind": "elementwise", "shape": list(y) or [1], "dtype": storage(dy), "inputs": 0, "outputs": 1,
             "flops_per_element": 1.0}]


HANDLERS: dict[str, Callable[[Ctx, onnx.NodeProto, str], list[dict[str, Any]]]] = {
    "MatMul": _matmul, "Gemm": _gemm, "LayerNormalization": _norm("layernorm"),
    "SimplifiedLayerNormalization": _norm("rmsnorm"), "RMSNormalization": _norm("rmsnorm"),
    "SkipSimplifiedLayerNormalization": _norm("rmsnorm"), "BatchNormalization": _batchnorm, "Softmax": _softmax,
    "ReduceSum": _reduce, "ReduceMean": _reduce, "ReduceMax": _reduce, "ReduceMin": _reduce,
    "ReduceSumSquare": _reduce, "ReduceL2": _reduce, "Transpose": _transpose, "Gather": _gather,
    "ScatterND": _scatter, "ScatterElements": _scatter, "Scatter": _scatter,
    "QuantizeLinear": _quant("quantize"), "DequantizeLinear": _quant("dequantize"),
    "Einsum": _einsum, "Attention": _attention, "MultiHeadAttention": _attention, "MatMulNBits": _matmul_nbits,
    "Concat": _concat, "Slice": _concat, "Pad": _concat, "Tile": _concat, "Expand": _concat, "Split": _split,
    "ConstantOfShape": _fill, "Range": _fill, "ReduceProd": _reduce, "ReduceL1": _reduce, "ReduceLogSum": _reduce,
    "ReduceLogSumExp": _reduce, **VISION_HANDLERS, **MORE_HANDLERS,
}
