"""ONNX control flow: the subgraphs of ``If`` (``then_branch`` / ``else_branch``), ``Loop`` and ``Scan``
(``body``) are imported node by node in the scope of the enclosing graph (outer-scope tensors keep their
shapes; the subgraph's inputs take theirs from the node's inputs where its value_info has none).

- ``If``: the taken branch when the condition is a constant, else the more expensive branch (more FLOPs,
  then more bytes: the import has no device), said in ``graph.meta["control_flow"]``.
- ``Loop``: the body copied once per iteration when the trip count ``M`` is a constant (initializer,
  ``Constant`` node or folded shape arithmetic); a constant ``M`` with a run-time ``cond`` is costed as
  ``M`` iterations (an upper bound, noted). An absent, run-time or ``INT64_MAX`` (torch's while-loop export)
  ``M`` takes the user's trip count for the node (``perfmodel.graph.loops``: by node name or path, then
  ``"*"``), else ``DEFAULT_TRIP_COUNT`` (the time per iteration), said in ``graph.meta["loops"]``; a count
  the user gives replaces a constant ``M`` too.
- ``Scan``: the body once per element of the scanned axis of its first scan input (opset 8: x batch); the
  user's count for the node replaces that length, and a length the file does not fix (a dynamic sequence axis)
  takes the user's count, then ``"*"``, else ``DEFAULT_TRIP_COUNT``, said in ``graph.meta["loops"]``.

Copies share their op dicts; a copy's tensors are renamed ``<node>/<i>/<tensor>`` and only the first copy
holds the body's parameters. Bodies that would unroll past ``MAX_UNROLLED_NODES`` fall back, named.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import onnx

from perfmodel.graph.ir import Node
from perfmodel.graph.mapping import view
from perfmodel.graph.onnx_ctx import Ctx, Info, attrs
from perfmodel.ops import make_op

__all__ = ["CONTROL_OPS", "MAX_UNROLLED_NODES", "map_control"]

CONTROL_OPS = ("If", "Loop", "Scan")
MAX_UNROLLED_NODES = 20_000
INT64_MAX = 2**63 - 1  # torch.onnx exports a while-loop as a Loop of this M with a computed cond
TAIL = "; bounded by its bytes over DRAM bandwidth"
MapFn = Callable[[Ctx, onnx.NodeProto, str], list[Node]]


def map_control(ctx: Ctx, node: onnx.NodeProto, label: str, map_fn: MapFn, base: dict[str, Any]) -> list[Node] | str:
    """Graph nodes for an If / Loop / Scan, or the reason it falls back (names the node and field)."""
    graphs = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
    if node.op_type == "If":
        return _if(ctx, node, label, map_fn, base, graphs)
    body = graphs.get("body")
    if body is None:
        return f"node {label!r}: {node.op_type} has no 'body' subgraph attribute{TAIL}"
    if node.op_type == "Loop":
        found = _loop_trips(ctx, node, label)
        if isinstance(found, str):
            return found
        trip, source = found
        seed = _loop_seed(ctx, node, body)
    else:
        scan = _scan_trips(ctx, node, label, body)
        if isinstance(scan, str):
            return scan
        trip, seed, source = scan
    if trip * max(len(body.node), 1) > MAX_UNROLLED_NODES:  # listed; the importer adds its fallback node, ``label``
        ctx.trips.record(label, node.op_type, trip, source, label, len(body.node), cap=MAX_UNROLLED_NODES)
        return (f"node {label!r}: {node.op_type} of {trip} iterations ({source}) x {len(body.node)} body nodes "
                f"exceeds {MAX_UNROLLED_NODES} unrolled nodes; bounded by its bytes over DRAM bandwidth")
    child = Ctx(ctx.model, ctx.dims, graph=body, outer=ctx, seed=seed)
    template = _subgraph(child, body, f"{label}/body", map_fn)
    ctx.charged |= child.charged
    ctx.notes.append({"node": label, "op": node.op_type, "iterations": trip,
                      "note": f"{node.op_type} body ({len(body.node)} nodes) costed x {trip} iterations"})
    ctx.trips.record(label, node.op_type, trip, source, f"{label}/", len(body.node))
    out: list[Node] = []
    for i in range(trip):
        out += _copy(ctx, child, body, template, label, i)
    return [*out, _result(ctx, label, base)]


def _if(ctx: Ctx, node: onnx.NodeProto, label: str, map_fn: MapFn, base: dict[str, Any],
        graphs: dict[str, onnx.GraphProto]) -> list[Node] | str:
    branches: dict[str, onnx.GraphProto] = {k: graphs[k] for k in ("then_branch", "else_branch") if k in graphs}
    if not branches:
        return f"node {label!r}: If has no 'then_branch' / 'else_branch' subgraph{TAIL}"
    cond = ctx.ints(node.input[0]) if node.input and node.input[0] else None
    why = f"only {', '.join(branches)} is present: costed it"
    if cond is not None and len(cond) == 1:
        taken = "then_branch" if cond[0] else "else_branch"
        if taken not in branches:
            return f"node {label!r}: If condition is constant but its '{taken}' subgraph is missing"
        branches = {taken: branches[taken]}
        why = f"condition {node.input[0]!r} is the constant {bool(cond[0])}: costed the taken {taken}"
    built: dict[str, tuple[Ctx, list[Node]]] = {}
    loops: dict[str, tuple[int, int]] = {}  # branch -> its span of ctx.trips.records (the loops inside it)
    for key, g in branches.items():
        child = Ctx(ctx.model, ctx.dims, graph=g, outer=ctx)
        start = len(ctx.trips.records)
        built[key] = (child, _subgraph(child, g, f"{label}/{key}", map_fn))
        loops[key] = (start, len(ctx.trips.records))
    costs = {k: _work(nodes) for k, (_, nodes) in built.items()}
    chosen = max(costs, key=lambda k: costs[k])
    for key, (start, end) in loops.items():  # a loop in the branch not costed is listed as such, with no time
        for record in ctx.trips.records[start:end] if key != chosen else []:
            if record.get("taken") is False:
                continue
            record["taken"] = False
            record["note"] += f"; inside If {label!r}'s {key}, not taken (the If costs its {chosen}): not costed"
    if len(built) > 1:
        why = ("condition is computed at run time: costed the more expensive branch, "
               + ", ".join(f"{k} {costs[k][0]:.4g} FLOP / {costs[k][1]:.4g} B" for k in costs)
               + f" -> {chosen}")
    child, nodes = built[chosen]
    ctx.charged |= child.charged
    ctx.notes.append({"node": label, "op": "If", "branch": chosen, "note": why})
    return [*_copy(ctx, child, branches[chosen], nodes, label, None), _result(ctx, label, base)]


def _loop_trips(ctx: Ctx, node: onnx.NodeProto, label: str) -> tuple[int, str] | str:
    """(iterations, where the count came from), or why the Loop falls back. The user's count for the node wins;
    a trip count the file does not hold takes the user's ``"*"`` or the default (``perfmodel.graph.loops``)."""
    m = node.input[0] if node.input else ""
    names = (label, node.name)
    given = ctx.trips.supplied(*names)
    if given is not None:
        return given[0], "argument"
    if not m:
        return _unseen(ctx, label, names, "field 'M' (trip count) is absent: a while-loop")
    value = ctx.ints(m)
    if value is None or len(value) != 1:
        return _unseen(ctx, label, names, f"field 'M' (trip count, tensor {m!r}) is computed at run time")
    if value[0] < 0:
        return f"node {label!r}: Loop field 'M' (trip count, tensor {m!r}) is negative ({value[0]}){TAIL}"
    if value[0] >= INT64_MAX:
        return _unseen(ctx, label, names, f"field 'M' (tensor {m!r}) is INT64_MAX: a while-loop export")
    cond = node.input[1] if len(node.input) > 1 else ""
    if cond and ctx.ints(cond) != [1]:
        ctx.notes.append({"node": label, "op": "Loop", "note": f"condition {cond!r} is not a constant true: "
                          f"costed the full {value[0]} iterations of M (an upper bound)"})
        return value[0], "constant M (an upper bound: cond is computed)"
    return value[0], "constant M"


def _unseen(ctx: Ctx, label: str, names: tuple[str, ...], why: str) -> tuple[int, str]:
    trip, source = ctx.trips.unseen(*names)
    ctx.notes.append({"node": label, "op": "Loop", "note": f"Loop {why}: costed {trip} iteration(s), from {source}"})
    return trip, source


def _loop_seed(ctx: Ctx, node: onnx.NodeProto, body: onnx.GraphProto) -> dict[str, Info]:
    """Body inputs (iteration_num, cond, loop-carried values) sized from the Loop's inputs."""
    seed: dict[str, Info] = {}
    names = [i.name for i in body.input]
    if names:
        seed[names[0]] = ((), "int64")
    if len(names) > 1:
        seed[names[1]] = ((), "bool")
    for name, outer in zip(names[2:], node.input[2:], strict=False):
        if outer in ctx.info:
            seed[name] = ctx.info[outer]
    return seed


def _scan_trips(ctx: Ctx, node: onnx.NodeProto, label: str,
                body: onnx.GraphProto) -> tuple[int, dict[str, Info], str] | str:
    """Iterations, body input shapes and where the count came from. Opset 8's Scan has a leading
    ``sequence_lens`` input and a batch axis 0 on every input (the body runs once per batch element and step:
    batch x steps iterations, scan axis 1). The sequence length is the scanned axis of the first scan input; the
    user's count for the node (``trip_counts``, by name or path) replaces it, and one the file does not fix (a
    dynamic axis) takes the user's, then ``"*"``, else ``DEFAULT_TRIP_COUNT`` (``perfmodel.graph.loops``)."""
    at = attrs(node)
    v8 = _opset(ctx) < 9
    ins = list(node.input[1:] if v8 else node.input)
    n_scan = int(at.get("num_scan_inputs", 0))
    if n_scan < 1 or n_scan > len(ins):
        return f"node {label!r}: Scan field 'num_scan_inputs' ({n_scan}) does not match its {len(ins)} inputs"
    n_state = len(ins) - n_scan
    axes = [1] * n_scan if v8 else [int(a) for a in at.get("scan_input_axes") or [0] * n_scan]
    first = ins[n_state]
    known = ctx.info.get(first) or ctx.partial.get(first)
    if known is None:
        return f"node {label!r}: Scan sequence length unknown: {ctx.missing(first)}{TAIL}"
    shape = known[0]
    if len(shape) < (2 if v8 else 1):
        return f"node {label!r}: Scan input {first!r} of shape {list(shape)} has no axis to scan{TAIL}"
    names_ = (label, node.name)
    given = ctx.trips.supplied(*names_)
    steps = shape[axes[0] % len(shape)]
    if given is not None:
        steps, source = given[0], "argument"
    elif steps >= 0:
        source = "constant (scanned axis)"
    else:
        steps, source = ctx.trips.unseen(*names_)
        ctx.notes.append({"node": label, "op": "Scan", "note": f"Scan sequence length (axis {axes[0]} of "
                          f"{first!r}) is not fixed in the file: costed {steps} iteration(s), from {source}"})
    drop = 1 if v8 else 0  # the batch axis, opset 8
    seed: dict[str, Info] = {}
    names = [i.name for i in body.input]
    for name, outer in zip(names[:n_state], ins[:n_state], strict=False):
        if outer in ctx.info:
            s, d = ctx.info[outer]
            seed[name] = (s[drop:], d)
    for j, (name, outer) in enumerate(zip(names[n_state:], ins[n_state:], strict=False)):
        found = ctx.info.get(outer) or ctx.partial.get(outer)
        if found is None:
            continue
        s, d = found
        ax = axes[j] % len(s) if j < len(axes) and s else 0
        element = (*s[drop:ax], *s[ax + 1:])
        if any(x < 0 for x in element) or (v8 and s and s[0] < 0):
            return f"node {label!r}: Scan input {outer!r}: {ctx.missing(outer)} (past the scanned axis){TAIL}"
        seed[name] = (element, d)
    return (shape[0] * steps if v8 else steps), seed, source


def _opset(ctx: Ctx) -> int:
    return next((int(o.version) for o in ctx.model.opset_import if o.domain in ("", "ai.onnx")), 21)


def _subgraph(child: Ctx, g: onnx.GraphProto, prefix: str, map_fn: MapFn) -> list[Node]:
    nodes: list[Node] = []
    for index, sub in enumerate(g.node):
        nodes += map_fn(child, sub, f"{prefix}/{sub.name or f'{sub.op_type}_{index}'}")
    return nodes


def _work(nodes: list[Node]) -> tuple[float, float]:
    """FLOPs and bytes of mapped nodes (a fallback: its bytes)."""
    flops = size = 0.0
    for n in nodes:
        op = n.cost_op
        if op is None:
            continue
        built = make_op(op)
        flops += built.flops if n.op is not None else 0.0
        size += built.bytes
    return flops, size


def _copy(ctx: Ctx, child: Ctx, g: onnx.GraphProto, template: list[Node], label: str, i: int | None) -> list[Node]:
    """One copy of a mapped subgraph: its own tensors renamed (iteration ``i``), outer ones kept."""
    local = {x.name for x in g.input} | {o for n in template for o in n.outputs}
    tag = f"{label}/{i}/" if i is not None else f"{label}/"

    def rn(x: str) -> str:
        return tag + x if x in local else x

    for x in local:
        info = child.info.get(x) or child.sub_tensors.get(x)
        if info is not None:
            ctx.sub_tensors[rn(x)] = info
    first = not i
    return [dataclasses.replace(n, name=n.name if i is None else f"{label}/{i}/{n.name[len(label) + 1:]}",
                                inputs=[rn(x) for x in n.inputs], outputs=[rn(x) for x in n.outputs],
                                params=n.params if first else 0, weight_bytes=n.weight_bytes if first else 0.0)
            for n in template]


def _result(ctx: Ctx, label: str, base: dict[str, Any]) -> Node:
    """The control node itself: a view producing its outputs (its work is in the copies before it)."""
    outs = base["outputs"]
    shape, dtype = ctx.info.get(outs[0], ((1,), "fp32")) if outs else ((1,), "fp32")
    return Node(name=label, op=view(shape, dtype), **base)
