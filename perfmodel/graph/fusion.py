"""Fusion: merge producer/consumer pairs into one kernel and report the DRAM bytes it saves.

Rules (each merges a producer whose output feeds the consumer, in execution order):

- ``attention``: matmul (Q·Kᵀ) → [scale/mask elementwise]* → softmax → matmul (·V) becomes one
  flash-attention op (S and P never reach memory).
- ``elementwise_chain``: elementwise → elementwise of the same size becomes one chain.
- ``gemm_epilogue``: matmul → unary elementwise (activation) or a bias add folds into the
  GEMM's epilogue (the activation's few FLOPs hide under the GEMM).
- ``add_norm``: a residual add → rmsnorm/layernorm becomes one pass (reads x and the residual,
  writes the sum and the normalised output), as fused add-RMSNorm kernels do.
- ``norm_quantize``: a norm → quantize writes the quantized tensor directly.
- ``dequant_gemm``: dequantize of a weight → matmul becomes a weight-only-quantized GEMM
  (the narrow weights are read and dequantized in registers).

Bytes saved = compulsory bytes of the nodes merged − compulsory bytes of the fused op.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from perfmodel.graph.ir import Graph, GraphError, Node
from perfmodel.ops import OpError, make_op

NORM_FLOPS = {"rmsnorm": 4.0, "layernorm": 8.0}


@dataclass
class FusionReport:
    """What was fused: one entry per merge, and the total bytes saved (per step, one device)."""

    fusions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def bytes_saved(self) -> float:
        return float(sum(f["bytes_saved"] for f in self.fusions))

    def to_json(self) -> dict[str, Any]:
        by_rule: dict[str, dict[str, float]] = {}
        for f in self.fusions:
            entry = by_rule.setdefault(f["rule"], {"count": 0, "bytes_saved": 0.0})
            entry["count"] += 1
            entry["bytes_saved"] += f["bytes_saved"]
        return {"bytes_saved": self.bytes_saved, "count": len(self.fusions), "by_rule": by_rule,
                "fusions": self.fusions[:200]}


@functools.lru_cache(maxsize=4096)
def _bytes_of(key: str) -> float:
    return make_op(json.loads(key)).bytes


def _bytes(op: dict[str, Any] | None, node: str) -> float:
    if op is None:
        return 0.0
    try:
        return _bytes_of(json.dumps(op, sort_keys=True))
    except OpError as exc:
        raise GraphError(node, str(exc)) from exc


OpBytes = dict[int, tuple[dict[str, Any], float]]  # id of an op dict -> (the dict, its compulsory bytes)


class _State:
    """Nodes by slot (None once merged away), readers and producer of every tensor: O(1) updates."""

    def __init__(self, graph: Graph, slots: list[Node | None], op_bytes: OpBytes | None = None) -> None:
        self.graph = graph
        self.nodes = slots
        self.op_bytes: OpBytes = {} if op_bytes is None else op_bytes
        self.readers: dict[str, list[int]] = {}
        for i, node in enumerate(slots):
            if node is not None:
                for name in dict.fromkeys(node.inputs):
                    self.readers.setdefault(name, []).append(i)

    def bytes_of(self, op: dict[str, Any] | None, node: str) -> float:
        """``_bytes`` of an op dict, once per dict (copied layers share theirs; ops are never mutated here)."""
        if op is None:
            return 0.0
        hit = self.op_bytes.get(id(op))
        if hit is not None and hit[0] is op:
            return hit[1]
        value = _bytes(op, node)
        self.op_bytes[id(op)] = (op, value)  # holding the dict keeps its id from being reused
        return value

    def readers_of(self, tensor: str) -> list[int]:
        return self.readers.get(tensor, [])

    def replace(self, i: int, j: int, node: Node) -> None:
        a, b = self.nodes[i], self.nodes[j]
        assert a is not None and b is not None
        for t in dict.fromkeys(a.inputs):
            self.readers[t] = sorted({j if k == i else k for k in self.readers.get(t, [])})
        for t in a.outputs:
            self.readers[t] = [k for k in self.readers.get(t, []) if k != j]
        self.nodes[i], self.nodes[j] = None, node


@dataclass
class FusedSlots:
    """Fusion at slot level: ``slots[i]`` is what node i became (None: merged into a later slot); ``entries``
    are the report's merges as (phase: 0 attention, 1 sweep; the slot whose pass started the merge; entry)."""

    slots: list[Node | None]
    entries: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)


Rule = Callable[[_State, int, int], "tuple[str, dict[str, Any]] | None"]


def fuse(graph: Graph, rules: tuple[str, ...] | None = None) -> FusionReport:
    """Apply the fusion rules in place (one linear sweep, merged nodes retried); report the merges.

    A graph built with a repeat plan (``build_llm``'s identical layers) fuses one window of layers per
    distinct context and copies the result to the other layers (``repeat.fuse_repeated``): the same nodes
    and report as the sweep over every node."""
    chosen = {name: rule for name, rule in RULES.items() if rules is None or name in rules}
    plan, graph.repeat = graph.repeat, None
    if plan is not None:
        from perfmodel.graph.lazy_graph import LazyGraph, fuse_lazy
        from perfmodel.graph.repeat import fuse_repeated

        op_bytes: OpBytes = {}  # shared by the windows: their layers share op dicts
        if isinstance(graph, LazyGraph) and graph.lazy:  # layers by reference: fused ones by reference too
            entries = fuse_lazy(graph, plan, lambda window: fuse_slots(window, chosen, op_bytes), tuple(chosen))
            if entries is not None:
                return FusionReport(entries)
        done = fuse_repeated(graph, plan, lambda window: fuse_slots(window, chosen, op_bytes), tuple(chosen))
        if done is not None:
            graph.nodes = done[0]
            return FusionReport(done[1])
    result = fuse_slots(graph, chosen)
    graph.nodes = [n for n in result.slots if n is not None]
    return FusionReport([entry for _, _, entry in result.entries])


def fuse_slots(graph: Graph, chosen: dict[str, Rule], op_bytes: OpBytes | None = None) -> FusedSlots:
    """The fusion of ``graph``'s nodes by slot, without changing the graph (``op_bytes``: a cache of op bytes
    by op dict, shared by calls on graphs whose nodes share op dicts)."""
    result = FusedSlots(list(graph.nodes))
    if "attention" in chosen:
        _fuse_attention(graph, result)
    state = _State(graph, result.slots, op_bytes)
    for i in range(len(result.slots)):
        current = i
        while current >= 0:
            current = _try(state, current, chosen, result.entries, i)
    return result


def _try(state: _State, i: int, rules: dict[str, Rule], entries: list[tuple[int, int, dict[str, Any]]],
         root: int) -> int:
    """Merge node ``i`` into its first reader if a rule applies; the merged slot, else -1."""
    producer = state.nodes[i]
    if producer is None or producer.op is None or len(producer.outputs) != 1:
        return -1
    readers = state.readers_of(producer.outputs[0])
    if not readers:
        return -1
    j = readers[0]
    consumer = state.nodes[j]
    if consumer is None or consumer.op is None:
        return -1
    for name, rule in rules.items():
        if name == "attention":
            continue
        result = rule(state, i, j)
        if result is not None:
            entries.append((1, root, _merge(state, i, j, name, result[0], result[1])))
            return j
    return -1


def _merge(state: _State, i: int, j: int, rule: str, label: str, op: dict[str, Any]) -> dict[str, Any]:
    a, b = state.nodes[i], state.nodes[j]
    assert a is not None and b is not None
    saved = state.bytes_of(a.op, a.name) + state.bytes_of(b.op, b.name) - state.bytes_of(op, f"{a.name}+{b.name}")
    inputs = list(dict.fromkeys([*a.inputs, *(x for x in b.inputs if x not in a.outputs)]))
    keep_a = [o for o in a.outputs if any(k != j for k in state.readers_of(o))]
    node = Node(name=_fused_name(a, b), op=op, inputs=inputs, outputs=[*keep_a, *b.outputs],
                layer=b.layer, source_op=f"{a.source_op}+{b.source_op}", stream=b.stream,
                params=a.params + b.params, weight_bytes=a.weight_bytes + b.weight_bytes, stage=b.stage,
                fused_from=[*(a.fused_from or [a.name]), *(b.fused_from or [b.name])],
                bytes_saved=a.bytes_saved + b.bytes_saved + saved)
    state.replace(i, j, node)
    return {"rule": rule, "node": node.name, "fused": label, "bytes_saved": saved}


def _fused_name(a: Node, b: Node) -> str:
    """'layers.3.o_proj+bias' for LLM-style names, '/blk/fc1/MatMul+Gelu' for importer paths."""
    if a.name.startswith(a.layer + ".") and (not b.layer or b.name.startswith(b.layer + ".")):
        return f"{b.layer or a.layer}.{_short(a)}+{_short(b)}"
    return f"{a.name}+{b.name.rsplit('/', 1)[-1]}"


def _short(node: Node) -> str:
    return node.name[len(node.layer) + 1:] if node.name.startswith(node.layer + ".") else node.name


def _pair(state: _State, i: int, j: int) -> tuple[Node, Node, dict[str, Any], dict[str, Any]]:
    a, b = state.nodes[i], state.nodes[j]
    assert a is not None and b is not None and a.op is not None and b.op is not None
    return a, b, a.op, b.op


def _only_reader(state: _State, a: Node, j: int) -> bool:
    return all(state.readers_of(o) == [j] for o in a.outputs)


def _numel(op: dict[str, Any]) -> int:
    return math.prod(op.get("shape") or [1])


def _elementwise_chain(state: _State, i: int, j: int) -> tuple[str, dict[str, Any]] | None:
    na, nb, a, b = _pair(state, i, j)
    if not (a["kind"] == b["kind"] == "elementwise" and _numel(a) == _numel(b)):
        return None
    if not _only_reader(state, na, j) or na.stream != "compute" or nb.stream != "compute":
        return None
    op = {**b, "inputs": int(a.get("inputs", 1)) + max(int(b.get("inputs", 1)) - 1, 0),
          "outputs": int(b.get("outputs", 1)),
          "flops_per_element": float(a.get("flops_per_element", 1.0)) + float(b.get("flops_per_element", 1.0)),
          "transcendentals_per_element": float(a.get("transcendentals_per_element", 0.0))
          + float(b.get("transcendentals_per_element", 0.0))}
    return "elementwise+elementwise", op


def _gemm_epilogue(state: _State, i: int, j: int) -> tuple[str, dict[str, Any]] | None:
    na, nb, a, b = _pair(state, i, j)
    if not (a["kind"] == "matmul" and b["kind"] == "elementwise"):
        return None
    if not _only_reader(state, na, j) or a.get("pass", "forward") != "forward":
        return None
    others = [x for x in dict.fromkeys(nb.inputs) if x not in na.outputs]
    n, tensors = int(a["n"]), state.graph.tensors
    small = [x for x in others if x in tensors and tensors[x].numel <= n]
    if len(others) != len(small) or len(small) > 1:
        return None  # a full-size second operand (residual) is not an epilogue this model can express
    return ("matmul+bias" if small else "matmul+activation"), {**a, "bias": bool(a.get("bias")) or bool(small)}


def _add_norm(state: _State, i: int, j: int) -> tuple[str, dict[str, Any]] | None:
    na, _, a, b = _pair(state, i, j)
    if not (a["kind"] == "elementwise" and b["kind"] in NORM_FLOPS and b.get("pass", "forward") == "forward"):
        return None
    if int(a.get("inputs", 1)) != 2 or _numel(a) != _numel(b) or int(a.get("outputs", 1)) != 1:
        return None
    later = [k for k in state.readers_of(na.outputs[0]) if k != j]
    if any(k < j for k in later):
        return None
    width = int(b["shape"][-1])
    op = {"kind": "elementwise", "shape": list(b["shape"]), "dtype": b["dtype"], "inputs": 2,
          "outputs": 2 if later else 1, "flops_per_element": 1.0 + NORM_FLOPS[b["kind"]],
          "transcendentals_per_element": 1.0 / width}
    return f"add+{b['kind']}", op


def _norm_quantize(state: _State, i: int, j: int) -> tuple[str, dict[str, Any]] | None:
    na, _, a, b = _pair(state, i, j)
    if not (a["kind"] in NORM_FLOPS and b["kind"] == "quantize") or not _only_reader(state, na, j):
        return None
    return f"{a['kind']}+quantize", {**b, "from_dtype": a["dtype"]}


def _dequant_gemm(state: _State, i: int, j: int) -> tuple[str, dict[str, Any]] | None:
    node_a, node_b, a, b = _pair(state, i, j)
    if not (a["kind"] == "dequantize" and b["kind"] == "matmul"):
        return None
    if not _only_reader(state, node_a, j) or node_b.inputs.index(node_a.outputs[0]) != 1:
        return None  # only a dequantized B (weight) operand
    op = {**b, "weight_dtype": a["from_dtype"]}
    if a.get("granularity") == "group":
        op["group_size"] = int(a.get("group_size", 128))
    return "dequantize+matmul", op


RULES: dict[str, Rule] = {"attention": lambda *_: None, "dequant_gemm": _dequant_gemm,
                          "norm_quantize": _norm_quantize, "add_norm": _add_norm,
                          "elementwise_chain": _elementwise_chain, "gemm_epilogue": _gemm_epilogue}


def _fuse_attention(graph: Graph, result: FusedSlots) -> None:
    """QK matmul → elementwise* → softmax → AV matmul, each feeding only the next, into one flash op."""
    consumers = graph.consumers()
    dropped: set[int] = set()
    for i in range(len(graph.nodes)):
        if i in dropped:
            continue
        chain = _attention_chain(graph, consumers, i)
        if chain is None:
            continue
        nodes = [graph.nodes[k] for k in chain]
        qk, av = nodes[0].op, nodes[-1].op
        assert qk is not None and av is not None
        op = {"kind": "attention", "batch": 1, "heads": int(qk.get("batch", 1)), "seq_q": int(qk["m"]),
              "seq_kv": int(qk["n"]), "head_dim": int(qk["k"]), "head_dim_v": int(av["n"]), "dtype": qk["dtype"]}
        saved = sum(_bytes(n.op, n.name) for n in nodes) - _bytes(op, nodes[0].name)
        inner = {x for n in nodes for x in n.outputs}
        last = nodes[-1]
        inputs = list(dict.fromkeys(x for n in nodes for x in n.inputs if x not in inner))
        fused = Node(name=_fused_name(nodes[0], Node(name="attention", op=None, layer="")), op=op, inputs=inputs,
                     outputs=list(last.outputs), layer=last.layer, stage=last.stage,
                     source_op="+".join(n.source_op for n in nodes), params=sum(n.params for n in nodes),
                     weight_bytes=sum(n.weight_bytes for n in nodes), fused_from=[n.name for n in nodes],
                     bytes_saved=saved)
        result.slots[chain[-1]] = fused
        dropped.update(chain[:-1])
        for k in chain[:-1]:
            result.slots[k] = None
        result.entries.append((0, i, {"rule": "attention", "node": fused.name,
                                      "fused": "matmul+" + "+".join(n.op["kind"] for n in nodes[1:] if n.op),
                                      "bytes_saved": saved}))


def _attention_chain(graph: Graph, consumers: dict[str, list[int]], i: int) -> list[int] | None:
    first = graph.nodes[i].op
    if not (first and first["kind"] == "matmul" and len(graph.nodes[i].outputs) == 1):
        return None
    chain = [i]
    seen_softmax = False
    while True:
        node = graph.nodes[chain[-1]]
        readers = consumers.get(node.outputs[0], []) if len(node.outputs) == 1 else []
        if len(readers) != 1:
            return None
        nxt = graph.nodes[readers[0]]
        kind = nxt.op["kind"] if nxt.op else None
        if kind == "softmax" and not seen_softmax:
            seen_softmax = True
        elif kind == "matmul" and seen_softmax:
            chain.append(readers[0])
            return chain if _attention_shapes(graph, chain) else None
        elif kind != "elementwise" or seen_softmax:  # only scale/mask ops may sit between QK^T and softmax
            return None
        chain.append(readers[0])


def _attention_shapes(graph: Graph, chain: list[int]) -> bool:
    qk, av = graph.nodes[chain[0]].op, graph.nodes[chain[-1]].op
    return bool(qk and av and int(qk.get("batch", 1)) == int(av.get("batch", 1)) and int(qk["m"]) == int(av["m"])
                and int(qk["n"]) == int(av["k"]) and qk["dtype"] == av["dtype"])
