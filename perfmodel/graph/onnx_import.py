"""ONNX → graph: shapes from ``onnx.shape_inference``, one graph node per ONNX node (two for a
com.microsoft ``Attention``, which includes its QKV projection). Initializers are weights: the
first node that reads one holds its parameters. Symbolic dims bind through ``dims``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
from onnx import helper, numpy_helper, shape_inference

from perfmodel.dtypes import parse_dtype
from perfmodel.graph.ir import Graph, GraphError, Node
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

ONNX_DTYPES = {"FLOAT": "fp32", "FLOAT16": "fp16", "BFLOAT16": "bf16", "DOUBLE": "fp64", "INT8": "int8",
               "UINT8": "int8", "INT16": "int32", "UINT16": "int32", "INT32": "int32", "UINT32": "int32",
               "INT64": "int64", "UINT64": "int64", "BOOL": "bool", "FLOAT8E4M3FN": "fp8_e4m3",
               "FLOAT8E4M3FNUZ": "fp8_e4m3", "FLOAT8E5M2": "fp8_e5m2", "FLOAT8E5M2FNUZ": "fp8_e5m2",
               "INT4": "int4", "UINT4": "int4"}
_INDEX_TYPES = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)  # shape constants and indices, not weights
Shape = tuple[int, ...]
Info = tuple[Shape, str]


class _Ctx:
    """Tensor shapes/dtypes, initializer values, and which initializers are already charged."""

    def __init__(self, model: onnx.ModelProto, dims: dict[str, int]) -> None:
        g = model.graph
        self.dims = dims
        self.info: dict[str, Info] = {}
        self.init = {t.name: t for t in g.initializer}
        self.charged: set[str] = set()
        for vi in [*g.input, *g.value_info, *g.output]:
            parsed = self._value_info(vi)
            if parsed is not None:
                self.info[vi.name] = parsed
        for t in g.initializer:
            self.info[t.name] = (tuple(int(d) for d in t.dims), _dtype(t.data_type, t.name))

    def _value_info(self, vi: onnx.ValueInfoProto) -> Info | None:
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            return None
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(int(d.dim_value))
            elif d.dim_param in self.dims:
                shape.append(int(self.dims[d.dim_param]))
            else:
                return None  # unresolved here; a node that needs it names it
        return tuple(shape), _dtype(tt.elem_type, vi.name)

    def get(self, name: str, node: str) -> Info:
        if name not in self.info:
            raise GraphError(node, f"shape or dtype of tensor {name!r} is unknown (shape inference could not "
                                   "resolve it; bind symbolic dims with dims={'name': size} / --dim name=size)")
        return self.info[name]

    def ints(self, name: str) -> list[int] | None:
        t = self.init.get(name)
        return [int(v) for v in numpy_helper.to_array(t).reshape(-1)] if t is not None else None


def _dtype(code: int, where: str) -> str:
    name = onnx.TensorProto.DataType.Name(code)
    if name not in ONNX_DTYPES:
        raise GraphError(where, f"ONNX dtype {name} is not supported; known: {', '.join(ONNX_DTYPES)}")
    return ONNX_DTYPES[name]


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def import_onnx(source: str | Path | bytes | onnx.ModelProto, dims: dict[str, int] | None = None,
                name: str | None = None) -> Graph:
    """Load an ONNX model (path, bytes or ModelProto), infer shapes, map every node."""
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
    ctx = _Ctx(model, dims or {})
    graph = Graph(name=name or model.graph.name or "onnx")
    for index, node in enumerate(model.graph.node):
        label = node.name or f"{node.op_type}_{index}"
        for out in _map(ctx, node, label):
            graph.add(out)
    for t, (shape, dtype) in ctx.info.items():
        graph.add_tensor(t, shape, storage(dtype))
    graph.meta.update({"kind": "onnx", "phase": "inference", "opset": [o.version for o in model.opset_import]})
    return graph


def _map(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[Node]:
    """Graph nodes for one ONNX node (covered, view, or unsupported with a fallback)."""
    ins = [x for x in node.input if x]
    outs = [x for x in node.output if x]
    op_type = node.op_type
    params, wbytes = _charge(ctx, ins)
    base: dict[str, Any] = {"inputs": ins, "outputs": outs, "layer": layer_of(label), "source_op": op_type,
            "params": params, "weight_bytes": wbytes}
    handler = HANDLERS.get(op_type)
    if handler is not None:
        ops = handler(ctx, node, label)
        if len(ops) == 1:
            return [Node(name=label, op=ops[0], **base)]
        return [Node(name=f"{label}/{k}", op=op, **{**base, "params": params if k == 0 else 0,
                                                     "weight_bytes": wbytes if k == 0 else 0.0})
                for k, op in enumerate(ops)]
    if op_type.lower() in VIEWS:
        shape, dtype = ctx.get(outs[0], label) if outs and outs[0] in ctx.info else ((1,), "fp32")
        return [Node(name=label, op=view(shape, dtype), **base)]
    in_info = [ctx.get(i, label) for i in ins]
    out_info = [ctx.info[o] for o in outs if o in ctx.info]
    if out_info and len(out_info) == len(outs):
        op = elementwise(op_type, out_info[0][0], _wider(in_info, out_info[0][1]),
                         full_size_inputs([s for s, _ in in_info], out_info[0][0]))
        if op is not None:
            return [Node(name=label, op=op, **base)]
    reason = (f"ONNX op {op_type} ({node.domain or 'ai.onnx'}) has no cost model; "
              "bounded by its bytes over DRAM bandwidth")
    if len(out_info) < len(outs):
        if not in_info:
            raise GraphError(label, f"{op_type}: neither input nor output shapes are known")
        largest = max(in_info, key=lambda i: numel(i[0]))
        out_info = [*out_info, *[largest] * (len(outs) - len(out_info))]
        reason += " (output shape unknown: assumed the size of its largest input)"
    dtype = (out_info or in_info)[0][1]
    return [Node(name=label, op=None, unsupported=reason,
                 fallback=fallback([s for s, _ in in_info], [s for s, _ in out_info], dtype), **base)]


def _wider(infos: list[Info], default: str) -> str:
    floats = [d for _, d in infos if d not in ("bool",) and parse_dtype(d).is_float]
    return max(floats, key=lambda d: parse_dtype(d).bytes) if floats else default


def _charge(ctx: _Ctx, ins: list[str]) -> tuple[int, float]:
    params, size = 0, 0.0
    for name in ins:
        t = ctx.init.get(name)
        if t is not None and name not in ctx.charged and len(t.dims) >= 1 and t.data_type not in _INDEX_TYPES:
            ctx.charged.add(name)
            n = numel(tuple(int(d) for d in t.dims))
            params += n
            size += n * parse_dtype(storage(_dtype(t.data_type, name))).bytes
    return params, size


# --- handlers: each returns the op dicts of one ONNX node -------------------------------------

def _matmul(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
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


def _gemm(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    at = _attrs(node)
    (a, da), (b, _) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    m, k = (a[1], a[0]) if at.get("transA") else (a[0], a[1])
    n = b[0] if at.get("transB") else b[1]
    return [{"kind": "matmul", "m": m, "n": n, "k": k, "dtype": da, "bias": len(node.input) > 2 and bool(node.input[2]),
             "transpose_a": bool(at.get("transA")), "transpose_b": bool(at.get("transB"))}]


def _conv(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    at = _attrs(node)
    (x, dx), (w, _) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    if len(x) not in (3, 4):
        raise GraphError(label, f"Conv of rank {len(x)}: only 1-D and 2-D convolutions are modelled")
    if len(x) == 3:
        x, w = (x[0], x[1], 1, x[2]), (w[0], w[1], 1, w[2])
    strides, pads, dil = at.get("strides", [1, 1]), at.get("pads", [0, 0, 0, 0]), at.get("dilations", [1, 1])
    return [{"kind": "conv2d", "batch": x[0], "in_channels": x[1], "out_channels": w[0], "height": x[2],
             "width": x[3], "kernel_h": w[2], "kernel_w": w[3], "dtype": dx, "stride": int(strides[0]),
             "stride_w": int(strides[-1]), "padding": int(pads[0]), "padding_w": int(pads[len(pads) // 2 - 1]),
             "dilation": int(dil[0]), "dilation_w": int(dil[-1]), "groups": int(at.get("group", 1)),
             "bias": len(node.input) > 2 and bool(node.input[2])}]


def _norm(kind: str) -> Callable[[_Ctx, onnx.NodeProto, str], list[dict[str, Any]]]:
    def handler(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
        x, dx = ctx.get(node.input[0], label)
        return [{"kind": kind, "shape": as_2d(x, int(_attrs(node).get("axis", -1))), "dtype": dx}]
    return handler


def _batchnorm(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    return [{"kind": "batchnorm", "shape": [x[0], *x[2:], x[1]] if len(x) > 1 else list(x), "dtype": dx}]


def _softmax(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    axis = int(_attrs(node).get("axis", -1)) % max(len(x), 1)
    return [{"kind": "softmax", "shape": [max(numel(x[:axis]) * numel(x[axis + 1:]), 1), x[axis] if x else 1],
             "dtype": dx}]


def _reduce(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    at = _attrs(node)
    axes = at.get("axes") or (ctx.ints(node.input[1]) if len(node.input) > 1 and node.input[1] else None)
    axes = [int(a) % len(x) for a in axes] if axes else list(range(len(x)))
    kind = {"ReduceMax": "max", "ReduceMin": "min", "ReduceMean": "mean"}.get(node.op_type, "sum")
    return [{"kind": "reduce", "shape": list(x) or [1], "axes": axes or [0], "dtype": dx, "op": kind}]


def _transpose(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    perm = _attrs(node).get("perm") or list(reversed(range(len(x))))
    return [{"kind": "transpose", "shape": list(x), "perm": [int(p) for p in perm], "dtype": storage(dx)}]


def _gather(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    (data, dd), (idx, di) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
    if int(_attrs(node).get("axis", 0)) % max(len(data), 1) != 0:
        return [fallback([data, idx], [ctx.get(node.output[0], label)[0]], dd)]
    table = [data[0], numel(data[1:])] if data else [1, 1]
    kind = "embedding" if node.input[0] in ctx.init and len(data) == 2 else "gather"
    return [{"kind": kind, "table_shape": table, "num_indices": max(numel(idx), 1), "dtype": storage(dd),
             "index_dtype": di if di in ("int32", "int64") else "int64"}]


def _scatter(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    (data, dd), (upd, _) = ctx.get(node.input[0], label), ctx.get(node.input[-1], label)
    row = numel(data[1:]) if len(data) > 1 else 1
    reduction = _attrs(node).get("reduction", b"none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else str(reduction)
    return [{"kind": "scatter", "table_shape": [data[0] if data else 1, row], "dtype": storage(dd),
             "num_indices": max(numel(upd) // max(row, 1), 1), "reduce": "add" if reduction == "add" else "none"}]


def _quant(kind: str) -> Callable[[_Ctx, onnx.NodeProto, str], list[dict[str, Any]]]:
    def handler(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
        (x, dx), (scale, ds) = ctx.get(node.input[0], label), ctx.get(node.input[1], label)
        _, dy = ctx.get(node.output[0], label)
        block = int(_attrs(node).get("block_size", 0))
        gran = "group" if block else ("tensor" if numel(scale) == 1 else "channel")
        op: dict[str, Any] = {"kind": kind, "shape": list(x) or [1], "from_dtype": dx, "to_dtype": dy,
                              "granularity": gran, "scale_dtype": ds}
        if block:
            op["group_size"] = block
        return [op]
    return handler


def _attention(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """ONNX (opset 23) ``Attention`` and com.microsoft ``MultiHeadAttention`` / ``Attention``."""
    at = _attrs(node)
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


def _matmul_nbits(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    """com.microsoft MatMulNBits: weight-only int4/int8 GEMM with block-wise scales."""
    at = _attrs(node)
    a, da = ctx.get(node.input[0], label)
    bits = int(at.get("bits", 4))
    return [{"kind": "matmul", "m": numel(a[:-1]), "k": int(at["K"]), "n": int(at["N"]), "dtype": da,
             "weight_dtype": "int4" if bits == 4 else "int8", "group_size": int(at.get("block_size", 128))}]


def _concat(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    y, dy = ctx.get(node.output[0], label)
    op = elementwise("copy", y, dy, 1)
    assert op is not None
    return [op]


def _split(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    x, dx = ctx.get(node.input[0], label)
    op = elementwise("copy", x, dx, 1)
    assert op is not None
    return [op]


def _fill(ctx: _Ctx, node: onnx.NodeProto, label: str) -> list[dict[str, Any]]:
    y, dy = ctx.get(node.output[0], label)
    return [{"kind": "elementwise", "shape": list(y) or [1], "dtype": storage(dy), "inputs": 0, "outputs": 1,
             "flops_per_element": 1.0}]


HANDLERS: dict[str, Callable[[_Ctx, onnx.NodeProto, str], list[dict[str, Any]]]] = {
    "MatMul": _matmul, "Gemm": _gemm, "Conv": _conv, "LayerNormalization": _norm("layernorm"),
    "SimplifiedLayerNormalization": _norm("rmsnorm"), "RMSNormalization": _norm("rmsnorm"),
    "SkipSimplifiedLayerNormalization": _norm("rmsnorm"), "BatchNormalization": _batchnorm, "Softmax": _softmax,
    "ReduceSum": _reduce, "ReduceMean": _reduce, "ReduceMax": _reduce, "ReduceMin": _reduce,
    "ReduceSumSquare": _reduce, "ReduceL2": _reduce, "Transpose": _transpose, "Gather": _gather,
    "ScatterND": _scatter, "ScatterElements": _scatter, "Scatter": _scatter,
    "QuantizeLinear": _quant("quantize"), "DequantizeLinear": _quant("dequantize"),
    "Attention": _attention, "MultiHeadAttention": _attention, "MatMulNBits": _matmul_nbits,
    "Concat": _concat, "Slice": _concat, "Pad": _concat, "Tile": _concat, "Expand": _concat, "Split": _split,
    "ConstantOfShape": _fill, "Range": _fill,
}
