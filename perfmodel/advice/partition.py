"""Partition advice: which ops of a graph fall back from the device to the host, and what the boundaries cost.

A device whose spec declares ``supported_ops`` (op kinds such as ``conv2d`` or importer op types such as
ONNX ``Gelu``, case-insensitive; absent = all) runs the compute nodes it supports; the others run on the
fallback device (the host CPU). Every tensor that crosses between the two is a ``hostcopy`` over the
device's host link (bytes / link bandwidth + per-copy overhead; ``d2h`` towards the host, ``h2d`` back),
copied once per direction however many nodes read it (graph inputs and weights are taken to be where
their readers run); every return from the host to the device
re-launches the device's work after a host synchronisation (one kernel overhead per crossing). The step
is the serial sum: device ops + fallback ops + copies + launches (the host waits for its inputs, the
device for the host's results), set beside the time of the whole graph on the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.graph.estimate import compile_graph, predict_compiled
from perfmodel.graph.ir import Graph, GraphError, Node
from perfmodel.hardware import Hardware
from perfmodel.machine import tables
from perfmodel.ops import make_op
from perfmodel.roofline import HardwareLike, predict_many, resolve_hardware

DEVICE, HOST = "device", "fallback"


def supports(hw: Hardware, node: Node) -> bool:
    """Whether ``hw``'s declared op support covers ``node`` (its op kind or its importer op type)."""
    if hw.supported_ops is None or node.stream != "compute":
        return True
    declared = {name.lower() for name in hw.supported_ops}
    kind = str((node.op or {}).get("kind", "")).lower()
    return (bool(kind) and kind in declared) or node.source_op.lower() in declared


@dataclass
class PartitionReport:
    """Placement per node, the fallback ops, the boundary copies and the totals (s, bytes)."""

    device_id: str
    fallback_id: str
    placement: list[str]
    fallback_ops: list[dict[str, Any]]
    boundaries: list[dict[str, Any]]
    totals: dict[str, float]
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device_id, "fallback": self.fallback_id, "fallback_ops": self.fallback_ops,
                "boundaries": self.boundaries, "totals": self.totals, "notes": self.notes,
                "placement": {p: self.placement.count(p) for p in (DEVICE, HOST)}}


def partition(graph: Graph, device: HardwareLike, fallback: HardwareLike) -> PartitionReport:
    """Place ``graph``'s nodes on ``device`` or ``fallback`` by the device's declared op support and cost it."""
    hw, host = resolve_hardware(device), resolve_hardware(fallback)
    compiled = compile_graph(graph)
    on_device = predict_compiled(compiled, hw).time_s[compiled.index]
    placement = _place_views(graph, [DEVICE if supports(hw, node) or _free(node) else HOST for node in graph.nodes])
    host_rows = sorted({int(compiled.index[i]) for i, p in enumerate(placement) if p == HOST})
    host_time = np.zeros(len(compiled.ops))
    for row in host_rows:
        try:
            host_time[row] = float(predict_many(host, [compiled.ops[row]], space="compact").time_s[0])
        except ValueError as exc:
            node = graph.nodes[int(np.nonzero(compiled.index == row)[0][0])]
            raise GraphError(node.name, f"cannot run on the fallback {host.id}: {exc}") from exc
    fallback_ops: list[dict[str, Any]] = [
        {"node": node.name, "kind": (node.op or {}).get("kind"), "source_op": node.source_op, "layer": node.layer,
         "reason": f"{_name(node)} is not among {hw.id}'s supported_ops",
         "fallback_time_s": float(host_time[compiled.index[i]]), "device_time_s": float(on_device[i])}
        for i, node in enumerate(graph.nodes) if placement[i] == HOST and not _free(node)]
    boundaries, notes = _boundaries(graph, placement, hw)
    t = tables(hw)
    crossings = sum(1 for b in boundaries if b["direction"] == "h2d")
    device_s = float(sum(on_device[i] for i, p in enumerate(placement) if p == DEVICE))
    fallback_s = float(sum(f["fallback_time_s"] for f in fallback_ops))
    transfer_s = float(sum(b["time_s"] for b in boundaries))
    launch_s = crossings * t.kernel_overhead_s
    totals = {"device_s": device_s, "fallback_s": fallback_s, "transfer_s": transfer_s, "launch_s": launch_s,
              "step_s": device_s + fallback_s + transfer_s + launch_s, "all_on_device_s": float(on_device.sum()),
              "transfer_bytes": float(sum(b["bytes"] for b in boundaries)), "crossings": float(len(boundaries))}
    return PartitionReport(hw.id, host.id, placement, fallback_ops, boundaries, totals, notes)


def _free(node: Node) -> bool:
    """A node with no kernel: a view, or a constant folded at load (an ONNX Constant / ConstantOfShape weight)."""
    return (node.op or {}).get("kind") == "reshape"


def _place_views(graph: Graph, placement: list[str]) -> list[str]:
    """Kernel-free nodes run nowhere, so they never make a crossing: a view of a computed tensor sits with its
    producer; a constant (a weight made at load, and views of it) sits with the first op that reads it, as a
    weight is resident where its op runs."""
    producers, consumers = graph.producers(), graph.consumers()
    constant: set[int] = set()
    for i, node in enumerate(graph.nodes):
        if not _free(node):
            continue
        sources = [producers[n] for n in node.inputs if n in producers]
        if all(j in constant for j in sources):
            constant.add(i)
        else:
            placement[i] = placement[sources[0]]
    for i in sorted(constant, reverse=True):
        users = [j for out in graph.nodes[i].outputs for j in consumers.get(out, [])]
        if users:
            placement[i] = placement[min(users)]
    return placement


def _name(node: Node) -> str:
    kind = (node.op or {}).get("kind")
    return f"{node.source_op} ({kind})" if kind and node.source_op and node.source_op != "llm" else str(
        kind or node.source_op)


def _boundaries(graph: Graph, placement: list[str], hw: Hardware) -> tuple[list[dict[str, Any]], list[str]]:
    """One host copy per tensor and direction where a producer and a consumer sit on different sides."""
    producers = graph.producers()
    seen: set[tuple[str, str]] = set()
    rows: list[tuple[str, str, str, str, float]] = []
    unsized: list[str] = []
    for i, node in enumerate(graph.nodes):
        for name in dict.fromkeys(node.inputs):
            j = producers.get(name)
            if j is None or placement[j] == placement[i] or (name, placement[i]) in seen:
                continue
            seen.add((name, placement[i]))
            tensor = graph.tensors.get(name)
            if tensor is None:
                unsized.append(name)
                continue
            direction = "d2h" if placement[i] == HOST else "h2d"
            rows.append((name, graph.nodes[j].name, node.name, direction, tensor.size_bytes))
    notes = [f"{len(unsized)} crossing tensors have no recorded shape and are not costed: {', '.join(unsized[:5])}"
             ] if unsized else []
    if not rows:
        return [], notes
    copies = [make_op({"kind": "hostcopy", "size_bytes": max(size, 1.0), "direction": d})
              for _, _, _, d, size in rows]
    times = predict_many(hw, copies, space="compact").time_s
    return [{"tensor": name, "from_node": src, "to_node": dst, "direction": d, "bytes": size,
             "time_s": float(time_s)} for (name, src, dst, d, size), time_s in zip(rows, times, strict=True)], notes
