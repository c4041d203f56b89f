"""StableHLO (JAX: ``jax.jit(f).lower(*args).as_text()``) → graph: one node per top-level operation of ``main``.

- ``dot_general`` → ``matmul`` (batch = the batching dims, K = the contracting dims, M and N the free dims of
  each side); ``convolution`` → ``conv2d`` (1-3 spatial dims, NCHW or NHWC from ``dim_numbers``, strides,
  padding, dilation, feature groups); ``reduce`` → ``reduce`` (sum / max / min from the reducer);
  element-wise ops by the shared cost table (1 FLOP per element; exp, log, tanh... as transcendentals);
  ``transpose`` → ``transpose``; reshape, broadcast, slice, iota, constant → views (no bytes: XLA fuses them);
  ``concatenate`` / ``pad`` → copies. ``call`` inlines the callee; a ``while`` with a constant trip count
  (``fori_loop``, ``scan``) is unrolled (``perfmodel.graph.stablehlo_loops``; ``meta['loops']`` lists them);
  one whose count is not constant (``while_loop``, a ``fori_loop`` over a traced bound) takes the user's
  ``trip_counts`` entry for its first result (``%0``; ``"*"`` for every other), else ``DEFAULT_TRIP_COUNT``
  (the time per iteration), said in ``meta['loops']`` (``perfmodel.graph.loops``).
- Weights: arguments of ``main`` read as the right operand of a ``dot_general`` without batching dims, or as
  a convolution's kernel (activations such as attention's K and V are batched operands; weights a loop
  slices out of a stacked argument are not counted).
- Anything else (a ``while`` whose body cannot be read or that unrolls past ``MAX_UNROLLED_NODES``,
  ``custom_call``, ``gather``, ``reduce_window``...) is an ``unsupported`` node with a bytes-bound fallback
  and the reason; a dynamic ``?`` dimension or an unknown element type is a ``GraphError`` naming the line.
  The estimate never aborts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfmodel.dtypes import parse_dtype
from perfmodel.graph.ir import Graph, Node
from perfmodel.graph.loops import LoopTrips, hlo_template
from perfmodel.graph.mapping import (
    UnsupportedOp,
    elementwise,
    fallback,
    full_size_inputs,
    storage,
    transposed_conv,
    view,
)
from perfmodel.graph.stablehlo_loops import body_function, cond_function, scalar_constant, trip_count
from perfmodel.graph.stablehlo_text import HloFunction, HloOp, TensorType, parse_stablehlo
from perfmodel.ops import OpError, make_op

ELEMENTWISE_NAMES = {
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "maximum": "max", "minimum": "min",
    "power": "pow", "remainder": "mod", "and": "and", "or": "or", "xor": "xor", "not": "not", "negate": "neg",
    "abs": "abs", "exponential": "exp", "exponential_minus_one": "exp", "log": "log", "log_plus_one": "log",
    "tanh": "tanh", "logistic": "sigmoid", "sqrt": "sqrt", "rsqrt": "rsqrt", "cbrt": "sqrt", "sine": "sin",
    "cosine": "cos", "floor": "floor", "ceil": "ceil", "round_nearest_even": "round", "round_nearest_afz": "round",
    "sign": "sign", "compare": "eq", "select": "where", "clamp": "clamp", "convert": "cast", "erf": "erf",
}
VIEW_NAMES = {"reshape", "broadcast_in_dim", "broadcast", "slice", "dynamic_slice", "iota", "constant",
              "get_tuple_element", "tuple", "bitcast_convert", "optimization_barrier", "real_dynamic_slice"}
COPY_NAMES = {"concatenate", "pad", "dynamic_update_slice", "reverse", "copy"}
REDUCERS = {"add": "sum", "maximum": "max", "minimum": "min"}
MAX_CALL_DEPTH = 16
MAX_UNROLLED_NODES = 200_000


def import_stablehlo(source: str | Path, name: str | None = None,
                     trip_counts: Mapping[str, int] | None = None) -> Graph:
    """Import StableHLO text (or a file of it); ``main`` (else the first public function) is the entry.
    ``trip_counts``: iterations of ``while`` loops whose count is not a constant, by first result (``%0``)."""
    trips = LoopTrips(trip_counts)
    text = Path(source).read_text() if isinstance(source, Path) else source
    functions = parse_stablehlo(text)
    entry = functions.get("main") or next(iter(functions.values()))
    graph = Graph(name=name or entry.name)
    values: dict[str, TensorType] = {}
    for arg, typ in entry.args.items():
        values[arg] = typ
        graph.add_tensor(arg, typ.shape, storage(typ.dtype))
    _emit(graph, functions, entry, "", values, set(entry.args), 0, trips)
    graph.meta.update({"kind": "stablehlo", "phase": "inference", "entry": entry.name})
    trips.into(graph.meta)
    return graph


def _emit(graph: Graph, functions: dict[str, HloFunction], fn: HloFunction, prefix: str,
          values: dict[str, TensorType], weights: set[str], depth: int, trips: LoopTrips) -> None:
    layer = prefix.rstrip("/") or fn.name
    constants: dict[str, float] = {}
    for op in fn.ops:
        names = [f"{prefix}{r}" for r in op.results]
        operands = [f"{prefix}{o}" for o in op.operands]
        ins = op.inputs or [values[o] for o in operands if o in values]
        for result, typ in zip(names, op.outputs, strict=False):
            values[result] = typ
            graph.add_tensor(result, typ.shape, storage(typ.dtype))
        if (value := scalar_constant(op)) is not None:
            constants[op.results[0]] = value
        if op.name == "while" and depth < MAX_CALL_DEPTH:
            why = _unroll(graph, functions, op, prefix, values, constants, depth, trips)
            if why == "":
                continue
            if why is not None:  # past the unrolled-node cap: bounded by its bytes, named
                graph.add(Node(f"{prefix}%{op.results[0]} while", None, operands, names, layer, "stablehlo.while",
                               unsupported=why, fallback=fallback([t.shape for t in ins],
                                                                  [t.shape for t in op.outputs],
                                                                  storage(op.outputs[0].dtype))))
                continue
        if op.name == "call" and depth < MAX_CALL_DEPTH:
            callee = re.search(r"@([\w.$-]+)", op.attributes)
            if callee and callee.group(1) in functions:
                _inline(graph, functions, functions[callee.group(1)], f"{prefix}{callee.group(1)}/", operands,
                        names, values, depth, trips)
                continue
        if op.name in ("return",) or not op.outputs:
            continue
        label = f"{prefix}%{op.results[0]} {op.name}"
        for node in _nodes(op, label, ins, operands, weights if depth == 0 else set()):
            node.inputs, node.outputs, node.layer = operands, names, layer
            graph.add(node)


def _unroll(graph: Graph, functions: dict[str, HloFunction], op: HloOp, prefix: str,
            values: dict[str, TensorType], constants: dict[str, float], depth: int,
            trips: LoopTrips) -> str | None:
    """Emit a while's body once per iteration (its constant count, else the user's or the default): "" when
    done, None when the body cannot be read (reported as an unmodelled op), else why it was not unrolled (the
    unrolled graph would exceed ``MAX_UNROLLED_NODES``)."""
    body = body_function(op)
    if body is None or not op.outputs:
        return None
    name = f"{prefix}%{op.results[0]}" if op.results else f"{prefix}while{op.line}"
    # inside another while's copy (``while4.2/...``) the loop is listed under its template name, ``while4/...``
    template = re.sub(r"(while\d+)\.\d+/", r"\1/", name)
    given = trips.supplied(name, template, f"%{op.results[0]}" if op.results else "")
    counted = trip_count(op, constants)
    if given is not None:
        count, source = given[0], "argument"
    elif counted is not None:
        count, source = counted, "constant bound"
    else:
        count, source = trips.unseen()
    # a loop whose count is not constant tests its cond on the device each iteration (a while_loop's exit test
    # may reduce the whole state); a counted loop's cond is a scalar compare of its counter, left out as before
    cond = cond_function(op) if counted is None else None
    per = len(body.ops) + (len(cond.ops) if cond is not None else 0)
    if count * max(per, 1) + len(graph.nodes) > MAX_UNROLLED_NODES:  # listed; _emit adds its fallback node
        trips.record(template, "stablehlo.while", count, source, hlo_template(f"{prefix}%{op.results[0]} while"),
                     per, cap=MAX_UNROLLED_NODES, line=op.line)
        return (f"line {op.line}: while {name!r} of {count} iterations ({source}) x {per} body ops "
                f"exceeds {MAX_UNROLLED_NODES} unrolled nodes; bounded by its bytes over DRAM bandwidth")
    for i in range(count):
        inner = f"{prefix}while{op.line}.{i}/"
        for part, fn in ((f"{inner}cond/", cond), (inner, body)):
            if fn is None:
                continue
            for arg, typ in fn.args.items():
                values[f"{part}{arg}"] = typ
            _emit(graph, functions, fn, part, values, set(), depth + 1, trips)
    trips.record(template, "stablehlo.while", count, source, hlo_template(f"{prefix}while{op.line}."), per,
                 line=op.line, cond_costed=cond is not None)
    return ""


def _inline(graph: Graph, functions: dict[str, HloFunction], callee: HloFunction, prefix: str,
            operands: list[str], results: list[str], values: dict[str, TensorType], depth: int,
            trips: LoopTrips) -> None:
    for arg, operand in zip(callee.args, operands, strict=False):
        values[f"{prefix}{arg}"] = values.get(operand, callee.args[arg])
    _emit(graph, functions, callee, prefix, values, set(), depth + 1, trips)
    returned = callee.ops[-1].results if callee.ops else []
    for result, inner in zip(results, returned, strict=False):
        if f"{prefix}{inner}" in values:
            values[result] = values[f"{prefix}{inner}"]


def _nodes(op: HloOp, label: str, ins: list[TensorType], operands: list[str], weights: set[str]) -> list[Node]:
    """The op's node (a transposed convolution: its GEMM, col2im and output write, ``label/k``)."""
    out = op.outputs[0]
    dtype = storage(out.dtype)
    params = 0
    built: dict[str, Any] | list[dict[str, Any]] | None
    try:
        if op.name == "dot_general":
            built = _dot(op, ins)  # a right operand without batch dims that ``main`` takes is a weight
            plain = built["batch"] == 1 and not _pair(op.attributes, "batching_dims")[1]
            params = math.prod(ins[1].shape) if plain and operands[1:2] and operands[1] in weights else 0
        elif op.name == "convolution":
            built = _conv(op, ins)
            params = math.prod(ins[1].shape) if operands[1:2] and operands[1] in weights else 0
        elif op.name == "reduce":
            built = _reduce(op, ins)
        elif op.name == "transpose":
            perm = _ints(op.attributes, "dims") or list(range(len(ins[0].shape)))[::-1]
            built = {"kind": "transpose", "shape": list(ins[0].shape) or [1], "perm": perm, "dtype": dtype}
        elif op.name in VIEW_NAMES:
            built = view(out.shape, out.dtype)
        elif op.name in COPY_NAMES:
            built = elementwise("copy", out.shape, out.dtype, max(1, len(ins)))
        elif op.name in ELEMENTWISE_NAMES:
            built = elementwise(ELEMENTWISE_NAMES[op.name], out.shape, out.dtype,
                                full_size_inputs([t.shape for t in ins], out.shape) if ins else 1)
        else:
            raise UnsupportedOp(f"stablehlo.{op.name} is not modelled"
                               + (" (control flow: its regions are not expanded)" if op.has_region else ""))
        if built is None:
            raise UnsupportedOp(f"stablehlo.{op.name}: no cost model")
        ops = built if isinstance(built, list) else [built]
        for one in ops:
            make_op(one)  # a bad size is reported on this node, not when the graph is estimated
    except (UnsupportedOp, OpError, ValueError, IndexError) as exc:
        reason = str(exc) if isinstance(exc, UnsupportedOp) else f"line {op.line}: {exc}"
        return [Node(label, None, source_op=f"stablehlo.{op.name}", unsupported=reason,
                     fallback=fallback([t.shape for t in ins], [t.shape for t in op.outputs], dtype))]
    weight_bytes = params * float(parse_dtype(storage(ins[1].dtype)).bytes) if params else 0.0
    if len(ops) == 1:
        return [Node(label, ops[0], source_op=f"stablehlo.{op.name}", params=params, weight_bytes=weight_bytes)]
    return [Node(f"{label}/{k}", one, source_op=f"stablehlo.{op.name}", params=params if k == 0 else 0,
                 weight_bytes=weight_bytes if k == 0 else 0.0) for k, one in enumerate(ops)]


def _ints(text: str, key: str) -> list[int]:
    """'contracting_dims = [1] x [0]' style lists after ``key`` (first list), or [] when absent."""
    found = re.search(rf"{key}\s*=\s*(?:array<i64:\s*)?\[?([\d,\s]*)\]?", text)
    return [int(v) for v in found.group(1).replace(" ", "").split(",") if v] if found else []


def _pair(text: str, key: str) -> tuple[list[int], list[int]]:
    found = re.search(rf"{key}\s*=\s*\[([\d,\s]*)\]\s*x\s*\[([\d,\s]*)\]", text)
    if not found:
        return [], []
    return ([int(v) for v in found.group(1).replace(" ", "").split(",") if v],
            [int(v) for v in found.group(2).replace(" ", "").split(",") if v])


def _dot(op: HloOp, ins: list[TensorType]) -> dict[str, Any]:
    lhs, rhs = ins[0], ins[1]
    lb, rb = _pair(op.attributes, "batching_dims")
    lc, rc = _pair(op.attributes, "contracting_dims")
    batch = math.prod(lhs.shape[i] for i in lb)
    k = math.prod(lhs.shape[i] for i in lc)
    m = math.prod(d for i, d in enumerate(lhs.shape) if i not in lb and i not in lc)
    n = math.prod(d for i, d in enumerate(rhs.shape) if i not in rb and i not in rc)
    out: dict[str, Any] = {"kind": "matmul", "m": m, "n": n, "k": k, "dtype": storage(lhs.dtype), "batch": batch}
    if op.outputs[0].dtype != lhs.dtype:
        out["out_dtype"] = storage(op.outputs[0].dtype)
    return out


def _conv(op: HloOp, ins: list[TensorType]) -> dict[str, Any] | list[dict[str, Any]]:
    a = op.attributes
    spec = re.search(r"dim_numbers\s*=\s*\[([^\]]*)\]x\[([^\]]*)\]->\[([^\]]*)\]", a)
    if not spec:
        raise UnsupportedOp("convolution without dim_numbers")
    lhs_dims, rhs_dims = ([p.strip() for p in spec.group(g).split(",")] for g in (1, 2))
    groups = int(m.group(1)) if (m := re.search(r"feature_group_count\s*=\s*(\d+)", a)) else 1
    if (m := re.search(r"batch_group_count\s*=\s*(\d+)", a)) and int(m.group(1)) != 1:
        raise UnsupportedOp("batch_group_count > 1 (a weight-gradient convolution) is not modelled")
    x, w = ins[0], ins[1]
    spatial = sorted(p for p in lhs_dims if p.isdigit())
    size = [x.shape[lhs_dims.index(s)] for s in spatial]
    kernel = [w.shape[rhs_dims.index(s)] for s in spatial]
    if any(v != 1 for v in _ints(a, "lhs_dilate")):  # a transposed convolution (jax.lax.conv_transpose)
        out_channels = w.shape[rhs_dims.index("o")]
        return transposed_conv(x.shape[lhs_dims.index("b")] * math.prod(size), x.shape[lhs_dims.index("f")] // groups,
                               out_channels // groups * math.prod(kernel), groups, op.outputs[0].shape,
                               storage(x.dtype), False)
    strides = _ints(a, "stride") or [1] * len(spatial)
    dilation = _ints(a, "rhs_dilate") or [1] * len(spatial)
    pads = [[int(v) for v in p] for p in re.findall(r"\[(\d+),\s*(\d+)\]", a.split("pad =", 1)[1])] if (
        "pad =" in a) else [[0, 0]] * len(spatial)
    padding = [(lo + hi) // 2 for lo, hi in pads[:len(spatial)]]
    if not 1 <= len(spatial) <= 3:
        raise UnsupportedOp(f"a {len(spatial)}-D convolution is not modelled")
    lead = 3 - len(spatial)  # fill depth and height with 1 for 1-D / 2-D
    size, kernel = [1] * lead + size, [1] * lead + kernel
    strides, dilation, padding = [1] * lead + strides, [1] * lead + dilation, [0] * lead + padding
    layout = "nchw" if lhs_dims.index("f") == 1 else "nhwc"
    return {"kind": "conv2d", "batch": x.shape[lhs_dims.index("b")], "in_channels": x.shape[lhs_dims.index("f")],
            "out_channels": w.shape[rhs_dims.index("o")], "depth": size[0], "height": size[1], "width": size[2],
            "kernel_d": kernel[0], "kernel_h": kernel[1], "kernel_w": kernel[2], "stride_d": strides[0],
            "stride": strides[1], "stride_w": strides[2], "padding_d": padding[0], "padding": padding[1],
            "padding_w": padding[2], "dilation_d": dilation[0], "dilation": dilation[1], "dilation_w": dilation[2],
            "groups": groups, "dtype": storage(x.dtype), "layout": layout}


def _reduce(op: HloOp, ins: list[TensorType]) -> dict[str, Any]:
    axes = _ints(op.attributes, "dimensions")
    applied = re.search(r"applies\s+stablehlo\.(\w+)", op.attributes)
    kind = REDUCERS.get(applied.group(1), "sum") if applied else "sum"
    data = ins[0]
    return {"kind": "reduce", "shape": list(data.shape) or [1], "axes": axes or [0], "dtype": storage(data.dtype),
            "op": kind}
