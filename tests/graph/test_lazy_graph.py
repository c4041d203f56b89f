"""Copied layers held by reference (``lazy_graph.LazyGraph``): fused, compiled, costed, scheduled and sized without
building their nodes, with the same answers as the layer-by-layer build; reading the nodes gives that build's."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from perfmodel.graph import LlmWorkload, Parallelism, build_llm, bundled, bundled_names, estimate, fuse
from perfmodel.graph.estimate import clear_kept, compile_graph
from perfmodel.graph.ir import Node
from perfmodel.graph.lazy_graph import Copied, LazyGraph, node_column
from perfmodel.graph.llm_build import Phase
from perfmodel.graph.memory import memory
from perfmodel.graph.repeat import LayerCopy
from perfmodel.graph.schedule import schedule
from perfmodel.roofline import resolve_hardware

H100 = "nvidia-h100-sxm5-80gb"
PARALLEL = {"tp2": Parallelism(tp=2), "tp2pp4": Parallelism(tp=2, pp=4, devices_per_node=8),
            "dp2pp2": Parallelism(tp=2, dp=2, pp=2, microbatches=2)}


def _pair(name: str, phase: Phase, par: Parallelism) -> tuple[LazyGraph, LazyGraph]:
    w = LlmWorkload(phase=phase, batch=4, prompt_tokens=256, kv_len=512)
    copied, built = build_llm(bundled(name), w, par), build_llm(bundled(name), w, par, copy_layers=False)
    assert isinstance(copied, LazyGraph) and isinstance(built, LazyGraph)
    return copied, built


@pytest.mark.parametrize("name", bundled_names())
@pytest.mark.parametrize("phase", ["prefill", "decode", "train"])
@pytest.mark.parametrize("par", list(PARALLEL))
def test_fused_by_reference_like_every_layer(name: str, phase: Phase, par: str) -> None:
    copied, built = _pair(name, phase, PARALLEL[par])
    assert copied.lazy and not built.lazy
    assert len(copied) == len(built.nodes) and copied.params == built.params
    assert copied.weight_bytes == built.weight_bytes
    assert [n.name for n in copied.slice(5, 40)] == [n.name for n in built.nodes[5:40]]
    report_copied, report_built = fuse(copied), fuse(built)
    assert copied.lazy and any(isinstance(s, Copied) for s in copied.segments)  # fused layers by reference too
    assert report_copied.fusions == report_built.fusions
    for field in ("cost_op", "stream", "stage", "params", "weight_bytes", "bytes_saved"):
        assert node_column(copied, field) == node_column(built, field), field
    hw = resolve_hardware(H100)
    assert memory(copied, hw) == memory(built, hw)  # the same floats: summed in graph order
    a, b = compile_graph(copied), compile_graph(built)
    assert a.ops == b.ops and np.array_equal(a.index, b.index)
    times = np.linspace(1e-6, 2e-6, len(a.index))
    ta, tb = schedule(copied, times, 2), schedule(built, times, 2)
    assert np.array_equal(ta.start_s, tb.start_s) and np.array_equal(ta.end_s, tb.end_s)
    assert (ta.stage_times_s, ta.exposed_comm_s, ta.hidden_comm_s) == (tb.stage_times_s, tb.exposed_comm_s,
                                                                      tb.hidden_comm_s)
    assert copied.nodes == built.nodes and not copied.lazy  # reading the nodes builds them: the same nodes
    assert list(copied.tensors.items()) == list(built.tensors.items())


@pytest.mark.parametrize(("name", "phase", "par"), [
    ("llama-3.1-405b", "decode", Parallelism(tp=8, pp=2, devices_per_node=8)),
    ("mixtral-8x7b", "prefill", PARALLEL["tp2pp4"]), ("gpt2", "train", PARALLEL["dp2pp2"])])
def test_estimate_builds_no_node_and_equals_every_layer(name: str, phase: Phase, par: Parallelism) -> None:
    """A whole estimate (full search) and its report of a graph holding its layers by reference: no node of a
    copied layer is built (training with dp > 1 schedules its overlapped stream node by node), and the report equals
    the layer-by-layer build's, cold or warm."""
    w = LlmWorkload(phase=phase, batch=8, prompt_tokens=512, kv_len=4096)
    answers = []
    for copy_layers, cold in ((False, True), (True, True), (True, False)):
        if cold:
            clear_kept()
        graph = build_llm(bundled(name), w, par, copy_layers=copy_layers)
        est = estimate(graph, H100, space="full", check_memory=False)
        assert isinstance(graph, LazyGraph) and graph.lazy == (copy_layers and phase != "train")
        answers.append(json.dumps(est.to_json(), sort_keys=True))
        assert graph.lazy == (copy_layers and phase != "train")  # the report reads columns, builds no node
        assert est.diagnostics() == []
    assert answers[0] == answers[1] == answers[2]


def test_reading_or_adding_nodes_after_the_build_fuses_them_node_by_node() -> None:
    """Nodes read (then edited) or a node added after the build: the plan checks them as for a plain graph, and the
    fusion is the layer-by-layer one."""
    copied, built = _pair("llama-3-8b", "decode", PARALLEL["tp2"])
    extra = Node("tail.extra", {"kind": "elementwise", "shape": [4, 4096], "dtype": "bf16"}, ["head.final_norm:0"],
                 ["tail.extra:0"], "tail")
    for graph in (copied, built):
        graph.add(Node(**{k: getattr(extra, k) for k in ("name", "op", "inputs", "outputs", "layer")}))
    assert not copied.lazy and copied.repeat is not None and not copied.repeat.matches(copied)
    assert fuse(copied).fusions == fuse(built).fusions
    assert copied.nodes == built.nodes


def test_slices_build_only_their_range() -> None:
    copied, built = _pair("llama-3-70b", "prefill", PARALLEL["tp2pp4"])
    rng = random.Random(0)
    ends = copied.segment_ends()
    for _ in range(200):
        lo = rng.randrange(len(built.nodes) + 1)
        hi = rng.randrange(lo, len(built.nodes) + 1)
        assert copied.slice(lo, hi, ends) == built.nodes[lo:hi]
    assert copied.lazy  # slices do not build the whole graph


def _template(name: str, base: int, low: int, input_name: str | None) -> str:
    """The name-by-name template (the former ``repeat._template``): layer numbers -> fields, the input -> {x}."""
    if name == input_name:
        return "{x}"
    parts = re.split(r"layers\.(\d+)(?!\d)", name.replace("{", "{{").replace("}", "}}"))
    return "".join(p if k % 2 == 0 else f"layers.{{{int(p) - base - low}}}" for k, p in enumerate(parts))


@pytest.mark.parametrize("name", ["llama-3.1-405b", "mixtral-8x7b", "gpt2"])
@pytest.mark.parametrize("fused", [False, True])
def test_one_pass_templates_equal_name_by_name(name: str, fused: bool) -> None:
    """``LayerCopy`` finds and replaces the layer numbers of all its names in one pass: the same templates as name
    by name, for a built layer (with its input's name) and a fused one (merged names, ``fused_from``)."""
    _, built = _pair(name, "prefill", PARALLEL["tp2pp4"])
    if fused:
        fuse(built)
    nodes = [n for n in built.nodes if n.layer == "layers.5"]
    inputs = [x for n in nodes for x in n.inputs if x not in {o for m in nodes for o in m.outputs}]
    input_name = inputs[0] if not fused else None
    copy = LayerCopy(nodes, built.tensors, 5, nodes[0].stage, input_name, "layers.5.out:0", ["layers.5.extra"])
    names = ["layers.5.out:0", "layers.5.extra"]
    for n in nodes:
        names += [n.name, n.layer, *n.inputs, *n.outputs, *n.fused_from]
    unique = list(dict.fromkeys(names))
    assert copy._templates == [_template(x, 5, copy.low, input_name) for x in unique]
    assert any("{" in t for t in copy._templates) and (fused or "{x}" in copy._templates)
    fields = range(7 + copy.low, 7 + copy.high + 1)
    assert copy.names(7, "in") == [_template(x, 5, copy.low, input_name).format(*fields, x="in") for x in names]


def test_pickled_copied_and_exported_like_every_layer() -> None:
    """A graph holding references pickles and deep-copies (still by reference) and exports the same graph JSON."""
    import copy as copying
    import pickle

    copied, built = _pair("mixtral-8x7b", "decode", PARALLEL["tp2pp4"])
    fuse(copied)
    fuse(built)
    for other in (pickle.loads(pickle.dumps(copied)), copying.deepcopy(copied)):
        assert isinstance(other, LazyGraph) and other.lazy
        assert node_column(other, "cost_op") == node_column(built, "cost_op")
        assert other.to_json() == built.to_json()
    assert copied.to_json() == built.to_json()
