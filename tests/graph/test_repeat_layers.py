"""Copied layers (build one, copy it; fuse one window, copy it) give the layer-by-layer graph and estimate."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest

from perfmodel.graph import Graph, LlmWorkload, Parallelism, build_llm, bundled, bundled_names, estimate, fuse
from perfmodel.graph.llm_build import Phase

PARALLEL = {"tp2": Parallelism(tp=2), "tp2pp4": Parallelism(tp=2, pp=4, devices_per_node=8),
            "dp2pp2": Parallelism(tp=2, dp=2, pp=2, microbatches=2)}


def _pair(name: str, phase: Phase, par: Parallelism, attention: Literal["flash", "unfused"] = "flash",
          ) -> tuple[Graph, Graph]:
    w = LlmWorkload(phase=phase, batch=4, prompt_tokens=256, kv_len=512, attention=attention)
    return build_llm(bundled(name), w, par), build_llm(bundled(name), w, par, copy_layers=False)


@pytest.mark.parametrize("name", bundled_names())
@pytest.mark.parametrize("phase", ["prefill", "decode", "train"])
@pytest.mark.parametrize("par", list(PARALLEL))
def test_copied_layers_build_and_fuse_like_every_layer(name: str, phase: Phase, par: str) -> None:
    copied, built = _pair(name, phase, PARALLEL[par])
    assert copied.repeat is not None and built.repeat is None
    assert copied.nodes == built.nodes
    assert list(copied.tensors.items()) == list(built.tensors.items())
    report_copied, report_built = fuse(copied), fuse(built)
    assert copied.nodes == built.nodes
    assert report_copied.fusions == report_built.fusions
    assert report_copied.fusions or phase == "train"  # training GEMMs keep their epilogues apart
    assert copied.repeat is None


@pytest.mark.parametrize("name", ["llama-3-70b", "mixtral-8x7b", "gpt2"])
def test_estimates_equal_and_unfused_attention(name: str) -> None:
    for attention in ("flash", "unfused"):
        assert attention in ("flash", "unfused")
        copied, built = _pair(name, "prefill", PARALLEL["tp2pp4"], attention)
        a = estimate(copied, "nvidia-h100-sxm5-80gb", space="compact", check_memory=False)
        b = estimate(built, "nvidia-h100-sxm5-80gb", space="compact", check_memory=False)
        assert json.dumps(a.to_json(), sort_keys=True) == json.dumps(b.to_json(), sort_keys=True)


def test_edited_graph_is_fused_node_by_node() -> None:
    copied, built = _pair("llama-3-8b", "decode", PARALLEL["tp2"])
    for graph in (copied, built):  # the same edit on both: a layer's norm becomes an elementwise op
        node = next(n for n in graph.nodes if n.name == "layers.5.input_norm")
        assert node.op is not None
        node.op = {"kind": "elementwise", "shape": node.op["shape"], "dtype": node.op["dtype"]}
    assert copied.repeat is not None and not copied.repeat.matches(copied)
    report_copied, report_built = fuse(copied), fuse(built)
    assert copied.nodes == built.nodes
    assert report_copied.fusions == report_built.fusions
    fused = {f["node"] for f in report_copied.fusions}  # the edited layer lost its add+norm, its neighbours kept it
    assert "layers.5.mlp_residual_add+input_norm" not in fused and "layers.6.mlp_residual_add+input_norm" in fused


@pytest.mark.parametrize("name", ["llama-3.1-405b", "mixtral-8x7b", "gpt2"])
@pytest.mark.parametrize("lazy", [True, False])
def test_fused_windows_kept_across_builds_give_the_same_graph(name: str, lazy: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A second build from the same config, workload and parallelism copies the kept fused windows (first, last,
    each context): the same nodes and report as fusing it again, and as the layer-by-layer build. ``lazy``: the
    graph still holds its copied layers by reference (fused by ``lazy_graph.fuse_lazy``); else its nodes were
    read first (built, then fused by ``repeat.fuse_repeated``)."""
    from perfmodel.graph import fusion, lazy_graph, repeat

    repeat.clear_windows()
    kept = lazy_graph._WINDOWS if lazy else repeat._WINDOWS
    windows: list[int] = []
    real = fusion.fuse_slots

    def counting(*args: Any) -> Any:
        windows.append(1)
        return real(*args)

    monkeypatch.setattr(fusion, "fuse_slots", counting)
    fused = []
    for _ in range(2):
        copied, built = _pair(name, "decode", PARALLEL["tp2pp4"])
        assert isinstance(copied, lazy_graph.LazyGraph) and copied.lazy
        if not lazy:
            assert copied.nodes and not copied.lazy
        fused.append((fuse(copied).fusions, copied.nodes))
        assert kept
    assert len(windows) == len(kept) >= 3  # fused in the first build only
    monkeypatch.undo()
    report_built = fuse(built)
    for fusions, nodes in fused:
        assert nodes == built.nodes
        assert fusions == report_built.fusions
    # the rules are part of the key: a build fused with fewer rules fuses its windows again
    copied, built = _pair(name, "decode", PARALLEL["tp2pp4"])
    assert fuse(copied, ("add_norm",)).fusions == fuse(built, ("add_norm",)).fusions
    assert copied.nodes == built.nodes
    repeat.clear_windows()
