"""A graph whose copied layers stay one recorded layer referenced per index until its nodes are read.

``build_llm`` builds one layer of each kind and refers to it once per further layer (``Copied``: the recorded
``LayerCopy``, the layer's rendered names and its pipeline stage) instead of building the layer's nodes again;
``fuse`` fuses one window per distinct layer context and refers to the fused layer the same way. What an estimate
reads per node (the op to cost, stream, stage, parameters, weight and output bytes) comes from the recorded
layer's columns (``node_column``, ``memory_rows``): Python lists joined in C, no ``Node`` per copy. Reading
``graph.nodes`` (a report, an edit) builds every node once, equal to the layer-by-layer build; from then on the
graph is a plain one (and a repeat plan checks its nodes as before).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any

from perfmodel.dtypes import parse_dtype
from perfmodel.graph.ir import Graph, Node
from perfmodel.graph.repeat import (
    LayerBlock,
    LayerCopy,
    RepeatPlan,
    _gap_key,
    _split,
    kept_window,
    window_place,
)

if TYPE_CHECKING:
    from perfmodel.graph.fusion import FusedSlots


class Copied:
    """Layer nodes by reference: ``copy``'s recorded nodes at layer ``index`` and pipeline ``stage``, with
    ``input_name`` as the layer's input; their names rendered once, when first read (``names``)."""

    __slots__ = ("_names", "copy", "index", "input_name", "stage")

    def __init__(self, copy: LayerCopy, index: int, stage: int, input_name: str = "",
                 names: list[str] | None = None) -> None:
        self.copy, self.index, self.stage, self.input_name, self._names = copy, index, stage, input_name, names

    @property
    def names(self) -> list[str]:
        """``copy.names(index, input_name)``: the layer's names (each node's name, layer, inputs, ...)."""
        if self._names is None:
            self._names = self.copy.names(self.index, self.input_name)
        return self._names

    def __len__(self) -> int:
        return len(self.copy.rows)

    def nodes(self) -> list[Node]:
        return self.copy.nodes_at(self.names, self.stage)

    def column(self, field: str) -> list[Any]:
        if field in ("name", "layer"):  # the rendered names: each node's name, then its layer
            return list(map(self.names.__getitem__, self.copy.name_positions(field == "layer")))
        values = self.copy.column(field)
        moved = self.stage - self.copy.stage
        return [s + moved for s in values] if field == "stage" and moved else values


Segment = list[Node] | Copied


class LazyGraph(Graph):
    """A ``Graph`` held as segments: lists of nodes and ``Copied`` layers; ``nodes`` builds them on first read."""

    _segments: list[Segment]
    _closed: int

    @property
    def nodes(self) -> list[Node]:
        segments = self._segments
        if len(segments) != 1 or not isinstance(segments[0], list):
            self.set_segments([[n for segment in segments
                                for n in (segment if isinstance(segment, list) else segment.nodes())]])
        flat = self._segments[0]
        assert isinstance(flat, list)
        plan = self.repeat
        if plan is not None and plan.segments is not None:  # the plan checks these nodes from now, as for any graph
            plan.nodes, plan.ops, plan.segments = list(flat), [n.op for n in flat], None
        return flat

    @nodes.setter
    def nodes(self, value: list[Node]) -> None:
        self.set_segments([value])

    def set_segments(self, segments: list[Segment]) -> None:
        """Replace the segments; only the last may grow afterwards (``add``)."""
        self._segments = segments
        self._closed = sum(map(len, segments[:-1]))  # nodes before the last segment
        self.columns: dict[str, list[Any]] = {}  # ``node_column``'s answers while the segments stay as they are

    @property
    def lazy(self) -> bool:
        """Whether some layers are still references (no nodes built for them)."""
        return any(isinstance(s, Copied) for s in self._segments)

    @property
    def segments(self) -> list[Segment]:
        return self._segments

    def __len__(self) -> int:
        segments = self._segments
        return self._closed + len(segments[-1]) if segments else 0

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def add(self, node: Node) -> Node:
        last = self._segments[-1] if self._segments else None
        if isinstance(last, list) and self.repeat is None:
            last.append(node)
            self.columns.clear()
        else:
            self.nodes.append(node)
        return node

    def add_copied(self, copied: Copied) -> None:
        self._closed += len(self._segments[-1]) + len(copied)
        self._segments += [copied, []]
        self.columns.clear()

    def built(self) -> list[Node]:
        """The nodes that are not references, in order."""
        return [n for segment in self._segments if isinstance(segment, list) for n in segment]

    def tail(self, count: int) -> list[Node]:
        """The last ``count`` nodes, built ones (the builder's latest layer, its last node)."""
        last = self._segments[-1]
        if not isinstance(last, list) or len(last) < count:
            return self.nodes[len(self) - count:]
        return last[len(last) - count:]

    def slice(self, lo: int, hi: int, ends: list[int] | None = None) -> list[Node]:
        """Nodes ``lo:hi``, building only the referenced layers in that range (built nodes are themselves);
        ``ends``: where each segment ends (``segment_ends()``), for many slices of an unchanged graph."""
        segments = self._segments
        ends = self.segment_ends() if ends is None else ends
        out: list[Node] = []
        k = bisect.bisect_right(ends, lo)
        while k < len(segments) and lo < hi:
            start = ends[k - 1] if k else 0
            segment = segments[k]
            nodes = segment if isinstance(segment, list) else segment.nodes()
            out.extend(nodes[lo - start:hi - start])
            lo = ends[k]
            k += 1
        return out

    def segment_ends(self) -> list[int]:
        return list(itertools.accumulate(map(len, self._segments)))

    @property
    def params(self) -> int:
        return sum(node_column(self, "params"))

    @property
    def weight_bytes(self) -> float:
        return float(sum(node_column(self, "weight_bytes")))


def node_column(graph: Graph, field: str) -> list[Any]:
    """``getattr(node, field)`` of every node in order (``cost_op``: the op, else its fallback), from the recorded
    layers' columns while ``graph`` holds references (then kept until its segments change: read-only lists; the
    nodes of such a graph are only reached by building them, which ends that state)."""
    if isinstance(graph, LazyGraph) and graph.lazy:
        kept = graph.columns.get(field)
        if kept is not None:
            return kept
        out: list[Any] = []
        for segment in graph.segments:
            if isinstance(segment, Copied):
                out += segment.column(field)
            elif field == "cost_op":
                out += [n.op if n.op is not None else n.fallback for n in segment]
            else:
                out += [getattr(n, field) for n in segment]
        graph.columns[field] = out
        return out
    if field == "cost_op":
        return [n.op if n.op is not None else n.fallback for n in graph.nodes]
    return [getattr(n, field) for n in graph.nodes]


def memory_rows(graph: Graph) -> tuple[list[int], list[list[float]], list[tuple[int, float] | None]]:
    """Per node: its stage, its output tensors' bytes (those in ``graph.tensors``) and, for a KV-cache write with
    an output, (row width, bytes per element) of its first output."""
    stages = node_column(graph, "stage")
    tensors = graph.tensors
    element = {d: parse_dtype(d).bytes for d in {t.dtype for t in tensors.values()}}

    def rows(nodes: list[Node]) -> tuple[list[list[float]], list[tuple[int, float] | None]]:
        sizes: list[list[float]] = []
        kv: list[tuple[int, float] | None] = []
        for n in nodes:
            outs = [tensors[o] for o in n.outputs if o in tensors]
            sizes.append([t.numel * element[t.dtype] for t in outs])
            if n.name.endswith("kv_cache_write") and n.outputs:
                t = tensors[n.outputs[0]]
                kv.append((t.shape[-1], element[t.dtype]))
            else:
                kv.append(None)
        return sizes, kv

    if not (isinstance(graph, LazyGraph) and graph.lazy):
        return (stages, *rows(graph.nodes))
    sizes: list[list[float]] = []
    kvs: list[tuple[int, float] | None] = []
    for segment in graph.segments:
        if isinstance(segment, Copied):
            sizes += segment.copy.output_bytes
            kvs += segment.copy.kv_rows
        else:
            s, k = rows(segment)
            sizes += s
            kvs += k
    return stages, sizes, kvs


# fused layers kept across calls: (the plan's signature and the rules, the window's place) -> the fused layer
_WINDOWS: OrderedDict[tuple[Hashable, Hashable], tuple[LayerCopy, list[tuple[int, dict[str, Any]]]]] = OrderedDict()
_LOCK = threading.Lock()


def fuse_lazy(graph: LazyGraph, plan: RepeatPlan, fuse_window: Callable[[Graph], FusedSlots],
              cache_key: Hashable | None = None) -> list[dict[str, Any]] | None:
    """``repeat.fuse_repeated`` on a graph that still holds its layers by reference: each distinct layer context's
    window is fused once (from its three layers' nodes) and its fused layer recorded; the graph's segments become
    references to those (the nodes between layers kept as they are). The report entries; None when the plan does
    not apply (the caller fuses every node)."""
    blocks = plan.blocks
    if len(blocks) < 3 or plan.segments is not graph.segments or plan.length != len(graph):
        return None
    keep = None if cache_key is None or plan.signature is None else (plan.signature, cache_key)
    ends = graph.segment_ends()
    gap_nodes = [graph.slice(a.end, b.start, ends) for a, b in itertools.pairwise(blocks)]
    gaps = list(map(_gap_key, gap_nodes))
    last = len(blocks) - 1
    done: dict[Any, tuple[LayerCopy, list[tuple[int, dict[str, Any]]]]] = {}
    segments: list[Segment] = []
    attention: list[dict[str, Any]] = []
    sweep: list[dict[str, Any]] = []
    for k, block in enumerate(blocks):
        fused = kept_window(_WINDOWS, _LOCK, done, keep, window_place(blocks, gaps, k),
                            functools.partial(_fuse_layer, graph, blocks, k, fuse_window, ends))
        if fused is None:
            return None  # a node between layers changed: not a plain copy
        copy, entries = fused
        segments.append(Copied(copy, block.index, block.stage))  # its names rendered when a report reads them
        if entries:
            names = copy.extra_names(block.index)
            _split([(phase, {**e, "node": name}) for (phase, e), name in zip(entries, names, strict=True)],
                   attention, sweep)
        if k < last and gap_nodes[k]:
            segments.append(gap_nodes[k])
    graph.set_segments([*segments, []])  # ``add`` appends to the trailing list
    return attention + sweep


def _fuse_layer(graph: LazyGraph, blocks: list[LayerBlock], k: int, fuse_window: Callable[[Graph], FusedSlots],
                ends: list[int]) -> tuple[LayerCopy, list[tuple[int, dict[str, Any]]]] | None:
    """Fuse block ``k`` with its neighbours; the block's nodes after fusion recorded as a layer (the first block
    also holds the nodes before layer 0, the last those after the last layer) and its report entries. None when
    a node between layers changed."""
    last, block, size = len(blocks) - 1, blocks[k], ends[-1]
    lo = 0 if k == 0 else blocks[k - 1].start
    hi = size if k == last else blocks[k + 1].end
    nodes = graph.slice(lo, hi, ends)
    window = fuse_window(Graph(graph.name, nodes, graph.tensors, graph.meta))
    if any(window.slots[i - lo] is not nodes[i - lo] for a, b in itertools.pairwise(blocks[max(k - 1, 0):k + 2])
           for i in range(a.end, b.start)):
        return None
    start = 0 if k == 0 else block.start
    end = size if k == last else block.end
    entries = [(phase, e) for phase, root, e in window.entries if start <= root + lo < end]
    kept = [n for n in window.slots[start - lo:end - lo] if n is not None]
    return LayerCopy(kept, graph.tensors, block.index, block.stage, extra=[e["node"] for _, e in entries]), entries


def clear_windows() -> None:
    with _LOCK:
        _WINDOWS.clear()
