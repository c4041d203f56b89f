"""Repeated layers: build one layer and copy it, fuse one window of layers and copy the result.

An LLM's layers are the same nodes under other names (``layers.3.o_proj`` vs ``layers.4.o_proj``) and
possibly another pipeline stage. ``LayerCopy`` records a built layer with its names relative to its
index and renders it for another index; ``RepeatPlan`` lists the layer node ranges of a graph so that
``fuse_repeated`` fuses one window (the layer and its two neighbours) per distinct context and copies
it to every layer in that context. Each copy shares the op dicts of its template (ops are not mutated).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from perfmodel.dtypes import parse_dtype
from perfmodel.graph.ir import Graph, Node, Tensor

if TYPE_CHECKING:
    from perfmodel.graph.fusion import FusedSlots

_LAYER = re.compile(r"layers\.(\d+)(?!\d)")
_SEP = "\x1f"  # joins a layer's names into one format string (rendered with one call)
_new = object.__new__


class LayerCopy:
    """Nodes (and their output tensors) recorded at layer ``base``, rendered at another layer index.

    Every name of the nodes goes into one format string, so a copy costs one ``str.format`` and one
    ``split`` plus a dict per node (about 5x cheaper than building the layer's ops again)."""

    def __init__(self, nodes: Sequence[Node], tensors: dict[str, Tensor], base: int, stage: int,
                 input_name: str | None = None, output_name: str = "", extra: Sequence[str] = ()) -> None:
        self.stage = stage
        names = [output_name, *extra]  # rendered too, returned by ``render``
        self.extra = len(names)
        # per node: its other fields (positional, as ``Node`` takes them) and where its names start/end
        self.rows: list[tuple[tuple[Any, ...], int, int, int, int]] = []
        self.tensor_rows: list[tuple[int, tuple[int, ...], str, str]] = []  # name position, shape, dtype, layout
        for node in nodes:
            if type(node) is not Node:
                raise ValueError(f"node {node.name!r}: a {type(node).__name__}'s fields beyond Node's cannot be copied")
            at = len(names)
            names += [node.name, node.layer, *node.inputs]
            outputs = len(names)
            for x in node.outputs:
                if x in tensors:
                    t = tensors[x]
                    self.tensor_rows.append((len(names), t.shape, t.dtype, t.layout))
                names.append(x)
            from_at = len(names)
            names += node.fused_from
            self.rows.append(((node.op, node.source_op, node.stream, node.params, node.weight_bytes, node.stage,
                               node.unsupported, node.fallback, node.bytes_saved), at, outputs, from_at, len(names)))
        # each distinct name is formatted once (a tensor is one node's output and others' input); ``positions``
        # spreads them back over the nodes' fields, the copies sharing the strings
        unique = {x: k for k, x in enumerate(dict.fromkeys(names))}
        self.positions = [unique[x] for x in names]
        # the names' layer numbers found and replaced in one pass over them all (``_template`` name by name)
        joined = _SEP.join(x for x in unique if x != input_name)
        offsets = [int(p) - base for p in _LAYER.findall(joined)] or [0]
        self.low, self.high = min(offsets), max(offsets)
        shift = base + self.low
        rendered = iter(_LAYER.sub(lambda m: f"layers.{{{int(m.group(1)) - shift}}}",
                                   joined.replace("{", "{{").replace("}", "}}")).split(_SEP))
        self._templates = ["{x}" if x == input_name else next(rendered) for x in unique]
        self.format = _SEP.join(self._templates)
        self._extra_format: str | None = None
        self._output_format: str | None = None
        self._columns: dict[str, list[Any]] = {}
        # what ``memory`` reads of each node: its output tensors' bytes, and a KV-cache write's (row width, bytes
        # per element of its first output); from ``tensors`` as recorded (copies have the same shapes)
        dtypes = {tensors[x].dtype for n in nodes for x in n.outputs if x in tensors}
        element = {d: parse_dtype(d).bytes for d in dtypes}
        self.output_bytes = [[math.prod(tensors[x].shape) * element[tensors[x].dtype]
                              for x in node.outputs if x in tensors] for node in nodes]
        self.kv_rows = [(tensors[node.outputs[0]].shape[-1], element[tensors[node.outputs[0]].dtype])
                        if node.name.endswith("kv_cache_write") and node.outputs and node.outputs[0] in tensors
                        else None for node in nodes]

    def extra_names(self, index: int) -> list[str]:
        """The extra names given when recording, at layer ``index`` (without rendering the others)."""
        if self._extra_format is None:
            self._extra_format = _SEP.join(self._templates[self.positions[k]] for k in range(1, self.extra))
        if self.extra <= 1:
            return []
        return self._extra_format.format(*range(index + self.low, index + self.high + 1), x="").split(_SEP)

    def output_names(self, index: int, input_name: str, tensors: dict[str, Tensor]) -> str:
        """At layer ``index``: the recorded output tensors into ``tensors`` (as ``render``), and the output's name;
        only those names are rendered (a layer held by reference renders the rest when they are read)."""
        if self._output_format is None:
            self._output_format = _SEP.join(self._templates[self.positions[at]]
                                            for at in [0, *(row[0] for row in self.tensor_rows)])
        output, *names = self._output_format.format(*range(index + self.low, index + self.high + 1),
                                                    x=input_name).split(_SEP)
        for name, (_, shape, dtype, layout) in zip(names, self.tensor_rows, strict=True):
            tensor = _new(Tensor)  # a frozen dataclass: its fields set in its own dict, no __setattr__
            fields = tensor.__dict__
            fields["name"], fields["shape"], fields["dtype"], fields["layout"] = name, shape, dtype, layout
            tensors[name] = tensor
        return output

    def names(self, index: int, input_name: str) -> list[str]:
        rendered = self.format.format(*range(index + self.low, index + self.high + 1), x=input_name).split(_SEP)
        return list(map(rendered.__getitem__, self.positions))

    def render(self, index: int, stage: int, input_name: str = "",
               tensors: dict[str, Tensor] | None = None) -> tuple[list[Node], list[str]]:
        """The nodes at layer ``index`` and pipeline ``stage`` (their output tensors go into ``tensors``), and
        the names there of the output and the extra names given when recording."""
        names = self.names(index, input_name)
        if tensors is not None:
            self.add_tensors(names, tensors)
        return self.nodes_at(names, stage), names[:self.extra]

    def nodes_at(self, names: list[str], stage: int) -> list[Node]:
        """The nodes under ``names`` (``names()``' rendering) at pipeline ``stage``."""
        shift = stage - self.stage
        # ``Node(...)`` positionally keeps the instance's values inline (about half the cost of a dict per copy)
        return [Node(names[at], op, names[at + 2:outputs], names[outputs:from_at], names[at + 1], source, stream,
                     params, wbytes, node_stage + shift, unsupported, fallback, names[from_at:end], saved)
                for (op, source, stream, params, wbytes, node_stage, unsupported, fallback, saved), at, outputs,
                from_at, end in self.rows]

    def add_tensors(self, names: list[str], tensors: dict[str, Tensor]) -> None:
        """The recorded output tensors under ``names`` into ``tensors``."""
        for at, shape, dtype, layout in self.tensor_rows:
            tensor = _new(Tensor)  # a frozen dataclass: its fields set in its own dict, no __setattr__
            fields = tensor.__dict__
            fields["name"], fields["shape"], fields["dtype"], fields["layout"] = names[at], shape, dtype, layout
            tensors[names[at]] = tensor

    def name_positions(self, layer: bool = False) -> list[int]:
        """Where each node's name (``layer``: its layer's name) sits in ``names()``."""
        key = "@layer" if layer else "@name"
        found = self._columns.get(key)
        if found is None:
            found = self._columns[key] = [at + layer for _, at, *_ in self.rows]
        return found

    def column(self, field: str) -> list[Any]:
        """One field of every recorded node, in order (``stage`` as recorded; ``cost_op``: the op, else its
        fallback), kept: the copies of a layer read them without building nodes."""
        found = self._columns.get(field)
        if found is None:
            if field == "cost_op":
                found = [row[0] if row[0] is not None else row[7] for row, *_ in self.rows]
            else:
                k = _ROW_FIELDS.index(field)
                found = [row[k] for row, *_ in self.rows]
            self._columns[field] = found
        return found


_ROW_FIELDS = ("op", "source_op", "stream", "params", "weight_bytes", "stage", "unsupported", "fallback", "bytes_saved")


@dataclass(frozen=True)
class LayerBlock:
    """Graph nodes ``start:end`` are layer ``index``; blocks with one ``key`` are copies of each other."""

    start: int
    end: int
    index: int
    key: str
    stage: int


@dataclass
class RepeatPlan:
    """The layer blocks of a graph, with the nodes and ops they were recorded on (checked before use), and what
    the graph was built from (``signature``, hashable; None: unknown) when that alone decides its nodes.

    A graph holding its layers by reference (``lazy_graph.LazyGraph``) is recorded by its ``segments`` list and
    ``length`` instead; reading its nodes records them here (and drops ``segments``)."""

    blocks: list[LayerBlock]
    nodes: list[Node]
    ops: list[dict[str, Any] | None]
    signature: Hashable | None = None
    segments: list[Any] | None = None
    length: int = 0

    @staticmethod
    def capture(graph: Graph, blocks: list[LayerBlock], signature: Hashable | None = None) -> RepeatPlan:
        from perfmodel.graph.lazy_graph import LazyGraph

        if isinstance(graph, LazyGraph) and graph.lazy:
            return RepeatPlan(blocks, [], [], signature, graph.segments, len(graph))
        return RepeatPlan(blocks, list(graph.nodes), [n.op for n in graph.nodes], signature)

    def matches(self, graph: Graph) -> bool:
        """Whether ``graph`` still holds the very nodes and ops the plan was recorded on."""
        nodes = graph.nodes  # first: a graph holding references records its nodes here when they are built
        return len(nodes) == len(self.nodes) and all(
            a is b and a.op is op for a, b, op in zip(nodes, self.nodes, self.ops, strict=True))


Entries = list[tuple[int, int, dict[str, Any]]]


# fused windows kept across calls: (the plan's signature and the rules, the window's place) -> what fusing it gave
T = TypeVar("T")
WINDOWS_KEPT = 256
_WINDOWS: OrderedDict[tuple[Hashable, Hashable], tuple[list[int], LayerCopy, list[tuple[int, dict[str, Any]]]]] = \
    OrderedDict()
_LOCK = threading.Lock()


def fuse_repeated(graph: Graph, plan: RepeatPlan, fuse_window: Callable[[Graph], FusedSlots],
                  cache_key: Hashable | None = None) -> tuple[list[Node], list[dict[str, Any]]] | None:
    """The fused nodes and report entries of ``graph``, fusing one window per distinct layer context (and the
    first and the last layer's windows, which hold the nodes before and after the layers); None when the plan
    does not apply (the caller fuses every node).

    ``cache_key`` (hashable: what decides ``fuse_window``, e.g. its rules) with a plan ``signature``: each window's
    result is kept across calls under (signature, cache_key) and its place, and a graph built again from the same
    signature copies it instead of fusing the window again (the nodes are those of the same build)."""
    blocks = plan.blocks
    if len(blocks) < 3 or not plan.matches(graph):
        return None
    keep = None if cache_key is None or plan.signature is None else (plan.signature, cache_key)
    nodes = graph.nodes
    gaps = [_gap_key(nodes[a.end:b.start]) for a, b in itertools.pairwise(blocks)]
    last = len(blocks) - 1
    done: dict[Any, tuple[list[int], LayerCopy, list[tuple[int, dict[str, Any]]]]] = {}
    parts: list[list[Node]] = []
    attention: list[dict[str, Any]] = []
    sweep: list[dict[str, Any]] = []
    for k, block in enumerate(blocks):
        fused = kept_window(_WINDOWS, _LOCK, done, keep, window_place(blocks, gaps, k),
                            functools.partial(_fuse_block, graph, blocks, k, fuse_window))
        if fused is None:
            return None  # a node between layers changed: not a plain copy
        rows, copy, entries = fused
        start = 0 if k == 0 else block.start  # the first window also holds the nodes before layer 0
        fresh, names = copy.render(block.index, block.stage)
        parts.append([nodes[start + i] if r == -1 else fresh[r] for i, r in enumerate(rows) if r != -2])
        _split([(phase, {**e, "node": name}) for (phase, e), name in zip(entries, names[1:], strict=True)],
               attention, sweep)
        if k < last:
            parts.append(nodes[block.end:blocks[k + 1].start])
    return [n for part in parts for n in part], attention + sweep


def window_place(blocks: list[LayerBlock], gaps: list[str], k: int) -> Hashable:
    """Block ``k``'s context: what decides its fused window (its neighbours' keys and the gaps between them; the
    first and the last block are each their own)."""
    last = len(blocks) - 1
    return "first" if k == 0 else "last" if k == last else (
        blocks[k - 1].key, gaps[k - 1], blocks[k].key, gaps[k], blocks[k + 1].key)


def kept_window(store: OrderedDict[tuple[Hashable, Hashable], T], lock: threading.Lock, done: dict[Any, T],
                keep: Hashable | None, place: Hashable, fuse: Callable[[], T | None]) -> T | None:
    """The fused window of ``place``: already fused in this call (``done``), kept across calls in ``store`` (guarded
    by ``lock``) under ``keep`` (None: not kept), else ``fuse()`` (None: not a plain copy), recorded in both
    (``store`` bounded to ``WINDOWS_KEPT``, oldest dropped)."""
    fused = done.get(place)
    if fused is None and keep is not None:
        with lock:
            fused = store.get((keep, place))
    if fused is None:
        fused = fuse()
        if fused is None:
            return None
        if keep is not None:
            with lock:
                store[(keep, place)] = fused
                while len(store) > WINDOWS_KEPT:
                    store.popitem(last=False)
    done[place] = fused
    return fused


def _fuse_block(graph: Graph, blocks: list[LayerBlock], k: int, fuse_window: Callable[[Graph], FusedSlots]
                ) -> tuple[list[int], LayerCopy, list[tuple[int, dict[str, Any]]]] | None:
    """Fuse block ``k`` with its neighbours: per node of the block, -1 kept as is, -2 merged away, else its row in
    the copy of the new nodes; the copy; the block's report entries. None when a node between layers changed."""
    nodes, last, block = graph.nodes, len(blocks) - 1, blocks[k]
    lo = 0 if k == 0 else blocks[k - 1].start
    hi = len(nodes) if k == last else blocks[k + 1].end
    window = fuse_window(Graph(graph.name, nodes[lo:hi], graph.tensors, graph.meta))
    if any(window.slots[i - lo] is not nodes[i] for a, b in itertools.pairwise(blocks[max(k - 1, 0):k + 2])
           for i in range(a.end, b.start)):
        return None
    start = 0 if k == 0 else block.start
    end = len(nodes) if k == last else block.end
    entries = [(phase, e) for phase, root, e in window.entries if start <= root + lo < end]
    slots = window.slots[start - lo:end - lo]
    changed = [n for i, n in enumerate(slots) if n is not None and n is not nodes[start + i]]
    rows, row = [], 0
    for i, n in enumerate(slots):
        rows.append(-2 if n is None else -1 if n is nodes[start + i] else row)
        row += n is not None and n is not nodes[start + i]
    return rows, LayerCopy(changed, {}, block.index, block.stage, extra=[e["node"] for _, e in entries]), entries


def clear_windows() -> None:
    """Forget the fused windows kept across calls."""
    from perfmodel.graph import lazy_graph

    with _LOCK:
        _WINDOWS.clear()
    lazy_graph.clear_windows()


def _split(entries: list[tuple[int, dict[str, Any]]], attention: list[dict[str, Any]],
           sweep: list[dict[str, Any]]) -> None:
    for phase, entry in entries:
        (attention if phase == 0 else sweep).append(entry)


def _gap_key(gap: Sequence[Node]) -> str:
    """What the nodes between two layers are, for fusion (their ops, streams and edge counts)."""
    if not gap:
        return ""
    return json.dumps([[n.op, n.stream, len(n.inputs), len(n.outputs)] for n in gap], sort_keys=True, default=str)
