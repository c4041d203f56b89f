"""GPT-Neo from its Hugging Face config.json (``hf_configs/gpt-neo-125m.json``, MIT): parameters, the alternating
global / local attention, and a malformed ``attention_types`` named (issue 26).

Published: "125M" (EleutherAI/gpt-neo-125m model card); ``transformers`` 4.46.3's ``GPTNeoForCausalLM`` built from
this config (random weights) lists 125,198,592 parameters: embeddings 50,257 x 768 (tied to the LM head) and 2,048
x 768 positions; 12 x [LayerNorm, q/k/v 768 -> 768 without bias, out_proj 768 -> 768 with bias, LayerNorm,
c_fc 768 -> 3,072 and c_proj 3,072 -> 768 with biases]; the final LayerNorm.
"""

from __future__ import annotations

import pytest
from hf_models import hf_config, hf_data

from perfmodel.graph import GraphError, LlmWorkload, build_llm, estimate
from perfmodel.graph.llm_config import KNOWN_TYPES, LlmConfig

A100 = "nvidia-a100-sxm4-80gb"


def test_gpt_neo_125m_parameters_equal_the_module_listing() -> None:
    graph = build_llm(hf_config("gpt-neo-125m"), LlmWorkload(phase="decode", batch=1, kv_len=16))
    assert "gpt_neo" in KNOWN_TYPES
    assert graph.params == 125_198_592
    assert graph.params == pytest.approx(125e6, rel=0.01)


def test_local_layers_attend_to_the_window_and_cost_less() -> None:
    cfg = hf_config("gpt-neo-125m")
    assert [cfg.window_of(i) for i in range(cfg.layers)].count(256) == 6  # six local, six global layers
    graph = build_llm(cfg, LlmWorkload(phase="prefill", batch=1, prompt_tokens=2048))
    est = estimate(graph, A100, fusion=False, check_memory=False)
    times = dict(zip((n.name for n in est.graph.nodes), est.node_time_s, strict=True))
    local, full = times["layers.0.attention"], times["layers.1.attention"]  # window 256 vs all 2,048 keys
    assert local < full / 2
    dense = LlmConfig.from_hf(hf_data("gpt-neo-125m") | {"attention_types": [[["global"], 12]]}, "all-global")
    assert dense.sliding_window == 0 and dense.notes == ()


@pytest.mark.parametrize("types", [[[["global", "local"], 5]], [[["global", "sparse"], 6]], "global",
                                   [[["local", "local", "global"], 4]]])
def test_malformed_attention_types_are_named(types: object) -> None:
    with pytest.raises(GraphError, match="attention_types"):
        LlmConfig.from_hf(hf_data("gpt-neo-125m") | {"attention_types": types}, "bad")
