"""Phi-2, StarCoder2, Granite and OLMo 2 from their Hugging Face config.json (``hf_configs/``, each citing its source):
parameters against the published counts and each family's distinctive layer (issue 26).

Published totals: Phi-2 2,779,683,840 (Hugging Face safetensors metadata, "2.78B params"; the card's "2.7 billion"
is rounded); StarCoder2-15B 15,957,889,024 (Hugging Face safetensors metadata, "16B params"); Granite-3.3-8B
8,170,864,640 (Hugging Face safetensors metadata, "8.17B params"); OLMo-2-1124-7B "7.3B" (Hugging Face model page;
OLMo 2 paper, Team OLMo 2024). Each is also the sum of the module listing of
its ``...ForCausalLM`` (test below), so the import is exact, not just within 1 %.
"""

from __future__ import annotations

from typing import Any

import pytest
from hf_models import hf_config, hf_data, hf_graph

from perfmodel.graph import GraphError, LlmWorkload, build_llm, estimate
from perfmodel.graph.llm_config import KNOWN_TYPES, LlmConfig

PUBLISHED = {"phi-2": 2_779_683_840, "starcoder2-15b": 15_957_889_024, "granite-3.3-8b-instruct": 8_170_864_640,
             "olmo-2-1124-7b-instruct": 7.3e9}




@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameters_within_one_percent_of_published(name: str) -> None:
    assert hf_graph(name).params == pytest.approx(PUBLISHED[name], rel=0.01)


def test_the_families_are_known() -> None:
    new = {"phi", "starcoder2", "granite", "olmo2", "qwen2_vl", "qwen2_5_vl", "llama4", "llama4_text", "mistral3",
           "cohere"}
    assert new <= set(KNOWN_TYPES)


def test_phi2_matches_its_module_listing() -> None:
    """PhiForCausalLM(phi-2): Embedding(51200, 2560); 32 x [q/k/v/dense 2560->2560, fc1 2560->10240, fc2
    10240->2560, all biased; one input_layernorm(2560)]; final_layernorm; lm_head 2560->51200 with a bias."""
    h, f, v = 2560, 10240, 51200
    layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 2 * h
    graph = hf_graph("phi-2")
    assert graph.params == v * h + 32 * layer + 2 * h + h * v + v
    nodes = {n.name: n for n in graph.nodes}
    assert "layers.0.post_attention_norm" not in nodes  # attention and MLP share one LayerNorm (parallel block)
    assert "layers.0.parallel_residual_add" in nodes and "layers.0.gelu" in nodes
    rotary = nodes["layers.0.rotary"].op
    assert rotary is not None and rotary["shape"][1] == (32 + 32) * 32  # 0.4 x 80 rotated dims per head
    assert nodes["head.lm_head"].params == h * v + v


def test_starcoder2_matches_its_module_listing() -> None:
    """Starcoder2ForCausalLM(15b): GQA 48 query / 4 KV heads of 128, biased q/k/v/o, c_fc 6144->24576 and
    c_proj back (biased), two LayerNorms with bias per layer, untied head; a 4,096-key sliding window."""
    h, f, kv, v = 6144, 24576, 4 * 128, 49152
    layer = (h * (h + 2 * kv) + h + 2 * kv) + (h * h + h) + (h * f + f) + (f * h + h) + 4 * h
    cfg = hf_config("starcoder2-15b")
    assert hf_graph("starcoder2-15b").params == 2 * v * h + 40 * layer + 2 * h
    assert cfg.sliding_window == 4096 and cfg.norm == "layernorm" and not cfg.gated_mlp
    prefill = hf_graph("starcoder2-15b", phase="prefill", prompt_tokens=8192)
    assert any(n.name == "layers.0.attention_window_band" for n in prefill.nodes)


def test_granite_multipliers_change_no_parameter() -> None:
    """Granite is Llama-shaped; its embedding / attention / residual / logit multipliers scale activations."""
    base = hf_data("granite-3.3-8b-instruct")
    unscaled = {k: v for k, v in base.items() if not k.endswith(("multiplier", "scaling"))}
    params = [build_llm(LlmConfig.from_hf(d, "g"), LlmWorkload(phase="decode", batch=1, kv_len=16)).params
              for d in (base, unscaled)]
    assert params[0] == params[1] == PUBLISHED["granite-3.3-8b-instruct"]


def test_olmo2_matches_its_module_listing_norms_after_and_full_width_qk_norms() -> None:
    """Olmo2ForCausalLM(7B) as listed with its config: 32 x [q/k/v/o 4096->4096, q_norm(4096), k_norm(4096),
    gate/up 4096->11008, down back, post_attention_layernorm, post_feedforward_layernorm]; norm; untied head."""
    h, f, v = 4096, 11008, 100352
    layer = 4 * h * h + 2 * h + 3 * h * f + 2 * h
    graph = hf_graph("olmo-2-1124-7b-instruct")
    assert graph.params == 2 * v * h + 32 * layer + h
    names = [n.name.split(".", 2)[2] for n in graph.nodes if n.layer == "layers.0"]
    assert "input_norm" not in names and "post_attention_norm" not in names  # no pre-norms
    assert names.index("attention_output_norm") < names.index("attention_residual_add")
    assert names.index("mlp_output_norm") < names.index("mlp_residual_add")
    params = {n.name.split(".", 2)[2]: n.params for n in graph.nodes if n.layer == "layers.0"}
    assert params["q_norm"] == params["k_norm"] == h  # the whole projection width, not one head's


@pytest.mark.parametrize("name", [*sorted(PUBLISHED), "qwen2.5-vl-7b-instruct", "llama-4-scout-17b-16e", "aya-23-8b"])
def test_each_family_estimates_a_prefill_step(name: str) -> None:
    times = [estimate(hf_graph(name, phase="prefill", prompt_tokens=s), "nvidia-h100-sxm5-80gb", space="compact",
                      check_memory=False).step_time_s for s in (256, 1024)]
    assert 0 < times[0] < times[1]


def _qwen2_vl_7b() -> dict[str, Any]:
    """Qwen2-VL-7B-Instruct: the same Qwen2-7B text model as Qwen2.5-VL-7B (its real config here) with Qwen2-VL's
    sparse vision_config (``in_chans``, ``model_type``, ``spatial_patch_size``: the rest are class defaults)."""
    data: dict[str, Any] = hf_data("qwen2.5-vl-7b-instruct")
    return data | {"model_type": "qwen2_vl", "vision_config": {"in_chans": 3, "model_type": "qwen2_vl",
                                                               "spatial_patch_size": 14}}


@pytest.mark.parametrize(("data", "published"), [
    (hf_data("qwen2.5-vl-7b-instruct"), 8_292_166_656),
    (_qwen2_vl_7b(), 8_291_375_616)], ids=["qwen2.5-vl-7b", "qwen2-vl-7b"])
def test_qwen_vl_builds_its_qwen2_text_model_and_notes_the_vision_tower(data: dict[str, Any], published: int) -> None:
    """Top-level text fields beside vision_config: the Qwen2-7B text model (7,615,616,512, biased q/k/v) is built;
    vision tower + patch merger are counted in notes: totals = the HF safetensors counts (Qwen2.5-VL-7B: RMSNorm,
    SwiGLU 3,420; Qwen2-VL-7B: LayerNorm, GELU 4 x 1,280)."""
    cfg = LlmConfig.from_hf(data, "vl")
    graph = build_llm(cfg, LlmWorkload(phase="decode", batch=1, kv_len=16))
    assert graph.params == 7_615_616_512 and cfg.qkv_bias
    assert graph.params + cfg.extra_params == published
    assert any("vision tower" in n for n in cfg.notes)


def test_qwen_vl_nested_text_config_builds_the_same_model() -> None:
    """Newer transformers save Qwen2.5-VL with a nested text_config (model_type qwen2_5_vl_text)."""
    flat = hf_data("qwen2.5-vl-7b-instruct")
    text = {k: v for k, v in flat.items() if k not in ("vision_config", "model_type")} | {
        "model_type": "qwen2_5_vl_text"}
    nested = LlmConfig.from_hf({"model_type": "qwen2_5_vl", "text_config": text,
                                "vision_config": flat["vision_config"]}, "nested")
    assert nested.extra_params == LlmConfig.from_hf(flat, "flat").extra_params
    assert build_llm(nested, LlmWorkload(phase="decode", batch=1, kv_len=16)).params == 7_615_616_512


def test_llama4_scout_total_and_active_parameters() -> None:
    """Llama-4-Scout-17B-16E (real config): 48 MoE layers of 16 experts (8,192) + a shared expert, top-1; text
    107,769,861,120 + vision encoder, adapter and projector 871,932,416 = 108,641,793,536 (HF safetensors; the
    card's "109B"). Active per token: all but 15 of 16 experts' weights = 17.17 B (the card's rounded "17B")."""
    cfg = hf_config("llama-4-scout-17b-16e")
    graph = hf_graph("llama-4-scout-17b-16e")
    assert graph.params + cfg.extra_params == 108_641_793_536
    assert graph.params + cfg.extra_params == pytest.approx(109e9, rel=0.01)
    experts = sum(n.params for n in graph.nodes if ".experts_" in n.name)
    active = graph.params - experts + experts * cfg.top_k / cfg.experts
    assert active == 17_172_894_720 and active == pytest.approx(17e9, rel=0.015)
    assert cfg.moe_every == 1 and cfg.global_every == 4 and cfg.sliding_window == 8192
    assert any(n.name == "layers.0.shared_down_proj" for n in graph.nodes)


def test_llama4_interleaved_moe_layers_alternate_with_dense_ones() -> None:
    """Maverick's layout (``interleave_moe_layer_step`` 2, ``moe_layers`` the odd layers) on Scout's fields: even
    layers run the dense 16,384-wide MLP, odd layers the routed + shared experts."""
    data = hf_data("llama-4-scout-17b-16e")
    data["text_config"] |= {"interleave_moe_layer_step": 2, "moe_layers": list(range(1, 48, 2))}
    cfg = LlmConfig.from_hf(data, "interleaved")
    graph = build_llm(cfg, LlmWorkload(phase="decode", batch=1, kv_len=16))
    routed = {int(n.layer.split(".")[1]) for n in graph.nodes if n.name.endswith(".router")}
    assert routed == set(range(1, 48, 2)) and cfg.moe_every == 2
    dense = next(n for n in graph.nodes if n.name == "layers.0.down_proj")
    assert dense.op is not None and dense.op["k"] == 16384
    bad = hf_data("llama-4-scout-17b-16e")
    bad["text_config"]["moe_layers"] = [0, 5, 7]
    with pytest.raises(GraphError, match="moe_layers"):
        LlmConfig.from_hf(bad, "bad")


def test_mistral3_builds_its_mistral_text_model_and_notes_pixtral() -> None:
    """Mistral-Small-3.1-24B (real config): Mistral text model 23,572,403,200 (head_dim 128 < hidden / heads) +
    Pixtral encoder 403,305,472 + projector (RMSNorm, 2x2 patch merger, 2-layer MLP) 35,652,608 = 24,011,361,280
    (HF safetensors; the card's "24B")."""
    cfg = hf_config("mistral-small-3.1-24b-instruct-2503")
    graph = hf_graph("mistral-small-3.1-24b-instruct-2503")
    assert graph.params == 23_572_403_200 and cfg.head_dim == 128
    assert graph.params + cfg.extra_params == 24_011_361_280
    assert graph.params + cfg.extra_params == pytest.approx(24e9, rel=0.01)
    assert any("pixtral" in n for n in cfg.notes)


def test_cohere_parallel_block_with_bias_free_layernorms() -> None:
    """Aya-23-8B (real config): one bias-free LayerNorm feeds attention and the SwiGLU MLP in parallel, tied head:
    8,028,033,024 (HF safetensors; the card's "8B")."""
    graph = hf_graph("aya-23-8b")
    h, f, v = 4096, 14336, 256000
    assert graph.params == v * h + 32 * (h * (h + 2 * 1024) + h * h + 3 * h * f + h) + h == 8_028_033_024
    assert graph.params == pytest.approx(8e9, rel=0.01)
    names = [n.name.split(".", 2)[2] for n in graph.nodes if n.layer == "layers.0"]
    assert "parallel_residual_add" in names and "post_attention_norm" not in names


def test_cohere_qk_norms_are_per_head_and_bias_free() -> None:
    """Command R+ style ``use_qk_norm``: a LayerNorm weight per query head and per key head (no bias)."""
    data = hf_data("aya-23-8b") | {"use_qk_norm": True}
    graph = build_llm(LlmConfig.from_hf(data, "qk"), LlmWorkload(phase="decode", batch=1, kv_len=16))
    params = {n.name.split(".", 2)[2]: n.params for n in graph.nodes if n.layer == "layers.0"}
    assert params["q_norm"] == 32 * 128 and params["k_norm"] == 8 * 128
