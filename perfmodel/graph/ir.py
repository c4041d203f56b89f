"""A small graph of ops with tensor edges: what the importers build and the estimator costs.

A ``Node`` holds one op dict (``perfmodel.ops`` kinds, SI units) or, when the model does not
cover it, ``op=None`` with an ``unsupported`` reason and a ``fallback`` op dict that bounds it
(bytes over DRAM bandwidth, via a zero-FLOP ``elementwise``). Nothing is silently zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from perfmodel.dtypes import DType, parse_dtype

if TYPE_CHECKING:
    from perfmodel.graph.repeat import RepeatPlan

Stream = Literal["compute", "comm", "comm_overlap"]
GRAPH_FORMAT = "perfmodel-graph/1"


class GraphError(ValueError):
    """A graph that cannot be built or costed: names the node and the reason."""

    def __init__(self, node: str, reason: str) -> None:
        super().__init__(f"node {node!r}: {reason}")
        self.node = node
        self.reason = reason


@dataclass(frozen=True)
class Tensor:
    """A tensor edge: shape (elements per dim), dtype and layout."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    layout: str = "row_major"

    @property
    def numel(self) -> int:
        return math.prod(self.shape) if self.shape else 1

    @property
    def size_bytes(self) -> float:
        return self.numel * parse_dtype(self.dtype).bytes


@dataclass(slots=True)
class Node:
    """One op of the graph (per device), with where it sits (layer) and what it owns (params).

    Slotted: a large model's graph holds thousands (a 405B estimate makes ~3,000 with the fused copies): no
    instance dict to build, fill and free for each."""

    name: str
    op: dict[str, Any] | None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    layer: str = "model"
    source_op: str = ""  # the importer's op type (ONNX op_type, aten target, "llm")
    stream: Stream = "compute"
    params: int = 0  # parameters held by this node on one device
    weight_bytes: float = 0.0  # their storage bytes on one device
    stage: int = 0  # pipeline stage
    unsupported: str | None = None  # why the model does not cover it
    fallback: dict[str, Any] | None = None  # the op that bounds it (time from bytes / DRAM bandwidth)
    fused_from: list[str] = field(default_factory=list)
    bytes_saved: float = 0.0  # compulsory bytes the fusion removed

    @property
    def cost_op(self) -> dict[str, Any] | None:
        """The op dict that is costed: the op, else its fallback."""
        return self.op if self.op is not None else self.fallback


@dataclass
class Graph:
    """Nodes in execution order, tensors by name, and metadata (model, phase, parallelism).

    ``repeat`` (set by ``build_llm``, not serialised) says which node ranges are copies of one layer, so
    ``fuse`` can fuse one and copy; it is checked against the nodes before use and dropped by ``fuse``.
    """

    name: str
    nodes: list[Node] = field(default_factory=list)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    repeat: RepeatPlan | None = field(default=None, compare=False, repr=False)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def add_tensor(self, name: str, shape: tuple[int, ...] | list[int], dtype: str | DType,
                   layout: str = "row_major") -> str:
        self.tensors[name] = Tensor(name, tuple(int(d) for d in shape), parse_dtype(dtype).value, layout)
        return name

    def add(self, node: Node) -> Node:
        self.nodes.append(node)
        return node

    def consumers(self) -> dict[str, list[int]]:
        """Tensor name -> indices of the nodes that read it."""
        out: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            for name in dict.fromkeys(node.inputs):
                out.setdefault(name, []).append(i)
        return out

    def producers(self) -> dict[str, int]:
        return {name: i for i, node in enumerate(self.nodes) for name in node.outputs}

    @property
    def params(self) -> int:
        """Parameters on one device (sum over nodes)."""
        return sum(n.params for n in self.nodes)

    @property
    def weight_bytes(self) -> float:
        return sum(n.weight_bytes for n in self.nodes)

    def unsupported(self) -> list[Node]:
        return [n for n in self.nodes if n.op is None]

    # --- JSON ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"format": GRAPH_FORMAT, "name": self.name, "meta": self.meta,
                "tensors": [{**asdict(t), "shape": list(t.shape)} for t in self.tensors.values()],
                "nodes": [_node_json(n) for n in self.nodes]}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Graph:
        """Parse a graph JSON (``to_json``'s format); errors name the node and the field."""
        if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
            raise GraphError("<graph>", "expected an object with a 'nodes' list")
        graph = Graph(name=str(data.get("name", "graph")), meta=dict(data.get("meta") or {}))
        for raw in data.get("tensors") or []:
            try:
                graph.add_tensor(raw["name"], raw["shape"], raw["dtype"], raw.get("layout", "row_major"))
            except (KeyError, TypeError, ValueError) as exc:
                raise GraphError(str(raw.get("name", "?") if isinstance(raw, dict) else "?"),
                                 f"bad tensor: {exc}") from exc
        for index, raw in enumerate(data["nodes"]):
            graph.add(_node_from_json(raw, index))
        return graph


_NODE_FIELDS = ("name", "op", "inputs", "outputs", "layer", "source_op", "stream", "params",
                "weight_bytes", "stage", "unsupported", "fallback", "fused_from", "bytes_saved")


def _node_json(node: Node) -> dict[str, Any]:
    return {k: getattr(node, k) for k in _NODE_FIELDS}


def _node_from_json(raw: Any, index: int) -> Node:
    if not isinstance(raw, dict):
        raise GraphError(f"nodes[{index}]", "expected an object")
    name = str(raw.get("name") or f"nodes[{index}]")
    unknown = set(raw) - set(_NODE_FIELDS)
    if unknown:
        raise GraphError(name, f"unknown fields {sorted(unknown)}; fields: {', '.join(_NODE_FIELDS)}")
    op = raw.get("op")
    if op is not None and not isinstance(op, dict):
        raise GraphError(name, "'op' must be an op object with a 'kind' (see docs/ops.md) or null")
    if op is None and raw.get("fallback") is None:
        raise GraphError(name, "an op of null needs 'unsupported' (the reason) and a 'fallback' op")
    if raw.get("stream", "compute") not in ("compute", "comm", "comm_overlap"):
        raise GraphError(name, f"stream {raw.get('stream')!r}: expected compute, comm or comm_overlap")
    values = {k: raw[k] for k in _NODE_FIELDS if k in raw}
    values["name"] = name
    values.setdefault("op", None)
    try:
        return Node(**values)
    except TypeError as exc:
        raise GraphError(name, str(exc)) from exc
