"""``torch.export`` (and FX graphs with shape metadata) → graph.

Shapes and dtypes come from each FX node's ``meta['val']`` (a FakeTensor) or ``meta['tensor_meta']``;
layers from ``nn_module_stack`` (a leaf module such as ``Linear`` names its parent as the layer).
Parameters and buffers are charged to the first node that reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from perfmodel.dtypes import parse_dtype
from perfmodel.graph.ir import Graph, GraphError, Node
from perfmodel.graph.mapping import (
    ELEMENTWISE,
    VIEWS,
    as_2d,
    elementwise,
    fallback,
    full_size_inputs,
    numel,
    storage,
    view,
)

Info = tuple[tuple[int, ...], str]
FILLS = {"arange", "zeros", "ones", "full", "empty", "scalar_tensor", "new_zeros", "new_ones", "new_full",
         "new_empty", "zeros_like", "ones_like", "full_like", "empty_like", "rand", "randn", "tril", "triu"}


def export_module(module: torch.nn.Module, args: tuple[Any, ...], name: str | None = None) -> Graph:
    """``torch.export.export`` the module on example ``args`` and import the result."""
    exported = torch.export.export(module.eval(), args)
    return import_exported(exported, name or type(module).__name__)


def import_exported(exported: torch.export.ExportedProgram, name: str = "torch") -> Graph:
    sig = exported.graph_signature
    owned = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
    return import_fx(exported.graph_module.graph, name, owned)


def import_fx(fx_graph: torch.fx.Graph, name: str = "torch", weights: dict[str, str] | None = None) -> Graph:
    """Map every ``call_function`` node; ``weights`` names the placeholders that are parameters."""
    weights = weights or {}
    graph = Graph(name=name)
    info: dict[str, Info] = {}
    charged: set[str] = set()
    for node in fx_graph.nodes:
        meta = _info(node)
        if meta is not None:
            info[node.name] = meta
            graph.add_tensor(node.name, meta[0] or (1,), storage(meta[1]))
        if node.op != "call_function":
            continue
        target = _target(node.target)
        ins = [a.name for a in node.all_input_nodes]
        params, wbytes = 0, 0.0
        for x in ins:
            if x in weights and x not in charged and x in info:
                charged.add(x)
                params += numel(info[x][0])
                wbytes += numel(info[x][0]) * parse_dtype(storage(info[x][1])).bytes
        layer = _layer(node)
        base = {"inputs": ins, "outputs": [node.name] if meta else [], "layer": layer, "source_op": target,
                "params": params, "weight_bytes": wbytes}
        graph.add(_map(node, target, info, f"{layer}.{node.name}", base))
    graph.meta.update({"kind": "torch", "phase": "inference"})
    return graph


def _args(node: torch.fx.Node) -> tuple[Any, ...]:
    return tuple(node.args)


def _kwargs(node: torch.fx.Node) -> dict[str, Any]:
    return dict(node.kwargs)


def _target(target: Any) -> str:
    text = str(target)
    if text.startswith("aten."):
        return text.split(".")[1]
    return getattr(target, "__name__", text).lower()


def _info(node: torch.fx.Node) -> Info | None:
    val = node.meta.get("val")
    if val is None:
        val = node.meta.get("tensor_meta")
    if val is None or not hasattr(val, "shape") or not hasattr(val, "dtype"):
        return None
    try:
        shape = tuple(int(d) for d in val.shape)
    except (TypeError, ValueError):
        return None  # symbolic sizes: export with concrete example inputs
    return shape, str(val.dtype).removeprefix("torch.")


def _layer(node: torch.fx.Node) -> str:
    stack = list((node.meta.get("nn_module_stack") or {}).values())
    if not stack:
        return "model"
    path, kind = stack[-1]
    path = str(path)
    if str(kind).startswith("torch.nn.modules") and "." in path:
        return path.rsplit(".", 1)[0]
    return path or "model"


def _get(info: dict[str, Info], arg: Any, label: str) -> Info:
    name = getattr(arg, "name", None)
    if name is None or name not in info:
        raise GraphError(label, f"shape or dtype of input {arg!r} is unknown (export with example inputs)")
    return info[name]


def _map(node: torch.fx.Node, target: str, info: dict[str, Info], label: str, base: dict[str, Any]) -> Node:
    out = info.get(node.name)
    handler = HANDLERS.get(target)
    if handler is not None:
        return Node(name=label, op=handler(node, info, label), **base)
    if target in VIEWS:
        shape, dtype = out if out else ((1,), "float32")
        return Node(name=label, op=view(shape, dtype), **base)
    tensors_in = [info[a.name] for a in node.all_input_nodes if a.name in info]
    if out is not None and target in FILLS:
        return Node(name=label, op={"kind": "elementwise", "shape": list(out[0]) or [1], "dtype": storage(out[1]),
                                    "inputs": 0, "outputs": 1, "flops_per_element": 1.0}, **base)
    if out is not None and target in ELEMENTWISE:
        op = elementwise(target, out[0], _float_dtype(tensors_in, out[1]),
                         full_size_inputs([s for s, _ in tensors_in], out[0]))
        return Node(name=label, op=op, **base)
    outs = [out] if out else []
    if not tensors_in and not outs:
        raise GraphError(label, f"{target}: no input or output shapes are known")
    dtype = (outs or tensors_in)[0][1]
    return Node(name=label, op=None, unsupported=f"aten op {target} has no cost model; bounded by its bytes over "
                "DRAM bandwidth", fallback=fallback([s for s, _ in tensors_in], [s for s, _ in outs], dtype), **base)


def _float_dtype(infos: Sequence[Info], default: str) -> str:
    floats = [d for _, d in infos if d != "bool" and parse_dtype(d).is_float]
    return max(floats, key=lambda d: parse_dtype(d).bytes) if floats else default


def _linear(node: torch.fx.Node, info: dict[str, Info], label: str) -> dict[str, Any]:
    (x, dx), (w, _) = _get(info, _args(node)[0], label), _get(info, _args(node)[1], label)
    bias = len(_args(node)) > 2 and _args(node)[2] is not None
    return {"kind": "matmul", "m": max(numel(x[:-1]), 1), "n": w[0], "k": w[1], "dtype": dx, "bias": bias,
            "transpose_b": True}


def _mm(node: torch.fx.Node, info: dict[str, Info], label: str) -> dict[str, Any]:
    args = _args(node)[1:] if _target(node.target) in ("addmm", "baddbmm") else _args(node)
    (a, da), (b, _) = _get(info, args[0], label), _get(info, args[1], label)
    if len(b) < 2:
        raise GraphError(label, f"matmul of shapes {list(a)} x {list(b)}: need a matrix operand")
    a2 = a if len(a) >= 2 else (1, *a)
    batch = max(numel(a2[:-2]), numel(b[:-2]))
    op: dict[str, Any] = {"kind": "matmul", "m": a2[-2], "n": b[-1], "k": a2[-1], "dtype": da, "batch": batch,
                          "bias": _target(node.target) in ("addmm", "baddbmm")}
    if len(b) == 2 and batch > 1:
        op.update(m=a2[-2] * batch, batch=1)
    return op


def _sdpa(node: torch.fx.Node, info: dict[str, Info], label: str) -> dict[str, Any]:
    (q, dq), (k, _), (v, _) = (_get(info, a, label) for a in _args(node)[:3])
    causal = bool(_kwargs(node).get("is_causal", _args(node)[5] if len(_args(node)) > 5 else False))
    return {"kind": "attention", "batch": numel(q[:-3]), "heads": q[-3], "kv_heads": k[-3], "seq_q": q[-2],
            "seq_kv": k[-2], "head_dim": q[-1], "head_dim_v": v[-1], "dtype": dq, "causal": causal}


def _norm(kind: str) -> Callable[[torch.fx.Node, dict[str, Info], str], dict[str, Any]]:
    def handler(node: torch.fx.Node, info: dict[str, Info], label: str) -> dict[str, Any]:
        x, dx = _get(info, _args(node)[0], label)
        normalized = _args(node)[1] if len(_args(node)) > 1 and isinstance(_args(node)[1], list | tuple) else [x[-1]]
        return {"kind": kind, "shape": as_2d(x, len(x) - len(normalized)), "dtype": dx}
    return handler


def _softmax(node: torch.fx.Node, info: dict[str, Info], label: str) -> dict[str, Any]:
    x, dx = _get(info, _args(node)[0], label)
    axis = int(_args(node)[1] if len(_args(node)) > 1 else -1) % max(len(x), 1)
    return {"kind": "softmax", "shape": [max(numel(x[:axis]) * numel(x[axis + 1:]), 1), x[axis] if x else 1],
            "dtype": dx}


def _embedding(node: torch.fx.Node, info: dict[str, Info], label: str) -> dict[str, Any]:
    (w, dw), (idx, di) = _get(info, _args(node)[0], label), _get(info, _args(node)[1], label)
    return {"kind": "embedding", "table_shape": [w[0], numel(w[1:])], "num_indices": max(numel(idx), 1),
            "dtype": dw, "index_dtype": di if di in ("int32", "int64") else "int64"}


def _reduce(node: torch.fx.Node, info: dict[str, Info], label: str) -> dict[str, Any]:
    x, dx = _get(info, _args(node)[0], label)
    dims = _args(node)[1] if len(_args(node)) > 1 else _kwargs(node).get("dim")
    dims = [dims] if isinstance(dims, int) else list(dims or range(len(x)))
    kind = {"mean": "mean", "amax": "max", "amin": "min", "max": "max", "min": "min"}.get(_target(node.target), "sum")
    return {"kind": "reduce", "shape": list(x) or [1], "axes": [int(d) % max(len(x), 1) for d in dims] or [0],
            "dtype": dx, "op": kind}


def _conv(node: torch.fx.Node, info: dict[str, Info], label: str) -> dict[str, Any]:
    (x, dx), (w, _) = _get(info, _args(node)[0], label), _get(info, _args(node)[1], label)
    if len(x) != 4:
        raise GraphError(label, f"convolution of rank {len(x)}: only 2-D convolutions are modelled here")
    arg = list(_args(node)) + [None] * 7
    stride, padding, dilation = (list(a) if a else [d] for a, d in ((arg[3], 1), (arg[4], 0), (arg[5], 1)))
    groups = int((arg[8] if _target(node.target) == "convolution" else arg[6]) or 1)
    return {"kind": "conv2d", "batch": x[0], "in_channels": x[1], "out_channels": w[0], "height": x[2],
            "width": x[3], "kernel_h": w[2], "kernel_w": w[3], "dtype": dx, "stride": int(stride[0]),
            "padding": int(padding[0]), "dilation": int(dilation[0]), "groups": groups, "bias": arg[2] is not None}


def _copy(node: torch.fx.Node, info: dict[str, Info], label: str) -> dict[str, Any]:
    shape, dtype = info.get(node.name) or _get(info, _args(node)[0], label)
    op = elementwise("copy", shape, dtype, 1)
    assert op is not None
    return op


HANDLERS: dict[str, Callable[[torch.fx.Node, dict[str, Info], str], dict[str, Any]]] = {
    "linear": _linear, "mm": _mm, "addmm": _mm, "bmm": _mm, "matmul": _mm, "baddbmm": _mm,
    "scaled_dot_product_attention": _sdpa, "_scaled_dot_product_flash_attention_for_cpu": _sdpa,
    "layer_norm": _norm("layernorm"), "native_layer_norm": _norm("layernorm"), "rms_norm": _norm("rmsnorm"),
    "softmax": _softmax, "_softmax": _softmax, "log_softmax": _softmax, "_log_softmax": _softmax,
    "_safe_softmax": _softmax, "embedding": _embedding, "sum": _reduce, "mean": _reduce, "amax": _reduce,
    "amin": _reduce, "conv2d": _conv, "convolution": _conv, "cat": _copy, "stack": _copy,
    "clone": _copy, "contiguous": _copy, "_to_copy": _copy,
}
