"""Training FLOPs, activation memory and the probe layers follow which layers are MoE (``LlmConfig.moe_layer``):
leading dense layers (DeepSeek's ``first_k_dense_replace``) and MoE on every ``moe_every``-th layer (Llama 4
Maverick's ``interleave_moe_layer_step`` 2), not "every layer past the dense ones"."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hf_models import hf_data

from perfmodel.graph import LlmWorkload, build_llm
from perfmodel.graph.llm_config import LlmConfig
from perfmodel.training.costs import probe_config
from perfmodel.training.flops import active_layer_params


def _maverick_layout() -> LlmConfig:
    data = hf_data("llama-4-scout-17b-16e")
    data["text_config"] |= {"interleave_moe_layer_step": 2, "moe_layers": list(range(1, 48, 2))}
    return LlmConfig.from_hf(data, "interleaved")


def _graph_active_layer_params(cfg: LlmConfig) -> float:
    """Per-layer parameters a token passes through, counted on the built graph's layer nodes (matrices only:
    norms and biases left out, as ``active_layer_params`` does; routed experts at top_k / experts)."""
    graph = build_llm(cfg, LlmWorkload(phase="decode", batch=1, kv_len=16))
    total = 0.0
    for node in graph.nodes:
        if not node.layer.startswith("layers.") or node.op is None or node.op.get("kind") != "matmul":
            continue
        share = cfg.top_k / cfg.experts if ".experts_" in node.name else 1.0
        total += node.params * share
    return total / cfg.layers


def test_interleaved_moe_counts_half_the_layers_as_moe() -> None:
    cfg = _maverick_layout()
    assert cfg.moe_layer_count == 24
    every = replace(cfg, moe_every=1)
    assert every.moe_layer_count == 48
    # the dense MLP (16,384 wide) on the even layers is smaller per token than top-1 + shared expert (2 x 8,192)
    # plus the router: averaging the two kinds sits between the all-MoE figure and the dense one
    interleaved, all_moe = active_layer_params(cfg), active_layer_params(every)
    assert interleaved != all_moe
    assert interleaved == pytest.approx(_graph_active_layer_params(cfg), rel=0.01)
    assert all_moe == pytest.approx(_graph_active_layer_params(every), rel=0.01)


def test_probe_layers_are_one_dense_and_one_moe_with_their_shares() -> None:
    cut, shares = probe_config(_maverick_layout())
    assert cut.layers == 2 and [cut.moe_layer(layer) for layer in range(2)] == [False, True]
    assert shares == [0.5, 0.5]
    deepseek_like = replace(_maverick_layout(), moe_every=1, dense_layers=3)
    cut, shares = probe_config(deepseek_like)
    assert cut.layers == 4 and shares == pytest.approx([3 / 48, 0.0, 0.0, 45 / 48])
