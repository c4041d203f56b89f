"""Real Hugging Face config.json files (``hf_configs/``, each citing its source and licence): parameter
counts against the published figures, shared experts, quantization_config, nested multimodal configs,
tied embeddings and unknown model types (issue 26)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfmodel.graph import GraphError, LlmWorkload, build_llm, estimate
from perfmodel.graph.llm_config import KNOWN_TYPES, LlmConfig

CONFIGS = Path(__file__).parent / "hf_configs"
H100 = "nvidia-h100-sxm5-80gb"


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIGS / f"{name}.json").read_text())
    return data


def _build(name: str, **workload: Any) -> tuple[LlmConfig, Any]:
    cfg = LlmConfig.from_hf(_load(name), name)
    return cfg, build_llm(cfg, LlmWorkload(**{"phase": "decode", "batch": 1, "kv_len": 16, **workload}))


# published totals: Qwen2-57B-A14B model card / safetensors index (57.4 B); DeepSeek-V3 README_WEIGHTS (671 B main
# model, MTP excluded); Gemma-7B and PaliGemma-3B (keras-hub presets: 2,923,335,408); Llama-2-7B, Mistral-7B and
# Llama-3-8B model cards (6,738,415,616; 7,241,732,096; 8,030,261,248); Phi-3-mini (3,821,079,552: 3.8 B);
# DeepSeek-V2-Lite model card and paper (15.7 B total, 2.4 B activated per token)
PUBLISHED = {"qwen2-57b-a14b": 57.4e9, "deepseek-v3": 671e9, "deepseek-v2-lite": 15.7e9, "gemma-7b": 8_537_680_896,
             "llama-2-7b-gptq": 6_738_415_616, "mistral-7b-v0.1-awq": 7_241_732_096,
             "llama-3-8b-bnb-4bit": 8_030_261_248, "phi-3-mini-4k-instruct": 3_821_079_552}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameters_within_one_percent_of_published(name: str) -> None:
    _, graph = _build(name)
    assert graph.params == pytest.approx(PUBLISHED[name], rel=0.01)


def test_qwen2_moe_shared_expert_counts_and_runs() -> None:
    cfg, graph = _build("qwen2-57b-a14b")
    assert cfg.shared_intermediate == 20480 and cfg.shared_gate
    shared = [n for n in graph.nodes if n.name == "layers.0.shared_gate_up_proj"]
    assert shared and shared[0].op is not None and shared[0].op["n"] == 2 * 20480
    # active parameters per token (decode, batch 1: 8 of 64 experts) from the matrix FLOPs: published 14 B
    est = estimate(graph, H100, space="compact", fusion=False, check_memory=False)
    matrix = float(est.batch.flops_by_engine["matrix"][est.index].sum())
    embed = cfg.vocab * cfg.hidden
    assert matrix / 2 + embed == pytest.approx(14.2e9, rel=0.03)


def test_deepseek_v2_lite_mla_without_query_lora_and_shared_experts() -> None:
    """MLA with a full q_proj (q_lora_rank null), 2 shared + top-6 of 64 routed experts, the first layer dense:
    15,706,484,224 parameters (15.7 B published); a batch-1 decode's matrix FLOPs / 2 give the active weights
    without the embedding, 2.46 B against the published 2.4 B (the absorbed MLA products count as FLOPs)."""
    _, graph = _build("deepseek-v2-lite")
    assert graph.params == 15_706_484_224
    names = {n.name for n in graph.nodes}
    assert "layers.1.q_proj" in names and "layers.1.q_a_proj" not in names
    assert "layers.0.gate_up_proj" in names and "layers.1.shared_gate_up_proj" in names
    est = estimate(graph, H100, space="compact", fusion=False, check_memory=False)
    matrix = float(est.batch.flops_by_engine["matrix"][est.index].sum())
    assert matrix / 2 == pytest.approx(2.4e9, rel=0.03)


def test_fp8_quantization_config_halves_deepseek_v3_weights_and_runs_fp8_gemms() -> None:
    cfg, graph = _build("deepseek-v3")
    weight_bytes = sum(n.weight_bytes for n in graph.nodes)
    embed_and_head = 2 * cfg.vocab * cfg.hidden
    # 1 byte per linear weight + one fp32 scale per 128x128 block; embeddings, head (and norms) stay bf16
    assert weight_bytes == pytest.approx(graph.params + embed_and_head, rel=0.005)
    assert weight_bytes < 0.51 * 2 * graph.params  # was 1,342 GB (2 bytes each)
    up = next(n for n in graph.nodes if n.name == "layers.5.experts_gate_up")
    assert up.op is not None and up.op["dtype"] == "fp8_e4m3" and up.op["out_dtype"] == "bf16"
    head = next(n for n in graph.nodes if n.name == "head.lm_head")
    assert head.op is not None and head.op["dtype"] == "bf16"
    assert graph.meta["quantization"] == "fp8"
    # an explicit workload choice wins over the checkpoint's
    _, bf16 = _build("deepseek-v3", weight_dtype="bf16")
    assert sum(n.weight_bytes for n in bf16.nodes) == pytest.approx(2 * bf16.params, rel=0.001)


@pytest.mark.parametrize(("name", "scale_bytes_per_weight"), [
    ("llama-2-7b-gptq", 2.5 / 128), ("mistral-7b-v0.1-awq", 2.5 / 128), ("llama-3-8b-bnb-4bit", 1.0 / 64)])
def test_int4_quantization_configs_store_half_a_byte_plus_group_scales(name: str,
                                                                     scale_bytes_per_weight: float) -> None:
    cfg, graph = _build(name)
    gemm = next(n for n in graph.nodes if n.name == "layers.0.gate_up_proj")
    assert gemm.op is not None and gemm.op["weight_dtype"] == "int4" and gemm.op["dtype"] == "bf16"
    assert gemm.weight_bytes == pytest.approx(gemm.params * (0.5 + scale_bytes_per_weight))
    unquantized = 2 * cfg.vocab * cfg.hidden  # embedding and LM head at 2 bytes
    linear = graph.params - unquantized
    expected = unquantized * 2 + linear * (0.5 + scale_bytes_per_weight)
    assert sum(n.weight_bytes for n in graph.nodes) == pytest.approx(expected, rel=0.002)


def test_nested_multimodal_config_builds_the_text_model_and_notes_the_vision_tower() -> None:
    cfg, graph = _build("paligemma-3b-pt-224")
    assert (cfg.hidden, cfg.layers, cfg.kv_heads, cfg.head_dim, cfg.vocab) == (2048, 18, 1, 256, 257216)
    assert cfg.tied_embeddings  # Gemma ties by default
    assert any("vision tower" in note for note in cfg.notes)
    assert graph.params + cfg.extra_params == pytest.approx(2_923_335_408, rel=0.001)


def test_gemma_ties_its_embeddings_by_default() -> None:
    data = _load("gemma-7b")
    assert "tie_word_embeddings" not in data
    cfg, graph = _build("gemma-7b")
    assert cfg.tied_embeddings and graph.params == 8_537_680_896  # was 9,324,112,896 (x1.09) untied
    cfg_untied = LlmConfig.from_hf({**data, "tie_word_embeddings": False})
    assert not cfg_untied.tied_embeddings


def test_unknown_model_type_is_refused_with_the_known_list() -> None:
    data = {**_load("gemma-7b"), "model_type": "falcon_mamba"}
    with pytest.raises(GraphError, match=r"falcon_mamba.*not supported.*llama.*deepseek_v3") as err:
        LlmConfig.from_hf(data)
    assert all(t in str(err.value) for t in KNOWN_TYPES)
    assert LlmConfig.from_hf({**data, "model_type": "llama"}).family == "llama"  # the explicit way


@pytest.mark.parametrize(("patch", "field"), [
    ({"num_key_value_heads": 5}, "num_key_value_heads"),
    ({"num_experts_per_tok": 65}, "num_experts_per_tok"),
    ({"hidden_size": -1}, "hidden_size"),
    ({"quantization_config": {"quant_method": "gptq", "bits": 3}}, "bits"),
    ({"quantization_config": {"quant_method": "hqq"}}, "quant_method"),
])
def test_impossible_sizes_name_the_field(patch: dict[str, Any], field: str) -> None:
    with pytest.raises(GraphError, match=field):
        LlmConfig.from_hf({**_load("qwen2-57b-a14b"), **patch})


def test_sliding_window_bounds_the_keys_each_query_reads() -> None:
    cfg, decode = _build("mistral-7b-v0.1-awq", kv_len=32768)
    assert cfg.sliding_window == 4096
    attn = next(n for n in decode.nodes if n.name == "layers.0.attention")
    assert attn.op is not None and attn.op["seq_kv"] == 4096
    prefill = build_llm(cfg, LlmWorkload(phase="prefill", batch=1, prompt_tokens=8192))
    head = next(n for n in prefill.nodes if n.name == "layers.0.attention")
    band = next(n for n in prefill.nodes if n.name == "layers.0.attention_window_band")
    assert head.op is not None and (head.op["seq_q"], head.op["seq_kv"], head.op["causal"]) == (4096, 4096, True)
    assert band.op is not None and (band.op["seq_q"], band.op["seq_kv"], band.op["causal"]) == (4096, 4096, False)
    # Qwen2 configs carry a sliding_window but switch it off
    assert LlmConfig.from_hf(_load("qwen2-57b-a14b")).sliding_window == 0


def test_windowed_prefill_costs_less_attention_than_full() -> None:
    data = _load("mistral-7b-v0.1-awq")
    work = LlmWorkload(phase="prefill", batch=1, prompt_tokens=16384)

    def attention_flops(config: dict[str, Any]) -> float:
        graph = build_llm(LlmConfig.from_hf(config), work)
        est = estimate(graph, H100, space="compact", fusion=False, check_memory=False)
        rows = [i for i, n in enumerate(est.graph.nodes) if "attention" in n.name and n.op
                and n.op["kind"] == "attention"]
        return float(est.batch.flops_by_engine["matrix"][est.index[rows]].sum())

    full, windowed = attention_flops({**data, "sliding_window": None}), attention_flops(data)
    # scores: S^2/2 causal vs W^2/2 + (S - W) W: 134.2 M vs 58.7 M per head and layer
    s, w = 16384, 4096
    assert windowed / full == pytest.approx((w * w / 2 + (s - w) * w) / (s * s / 2), rel=0.01)


@pytest.mark.parametrize(("patch", "message"), [
    ({"num_hidden_layers": 10**12}, "num_hidden_layers: 1000000000000 is more than the 10,000 layers"),
    ({"num_key_value_heads": 0}, "num_key_value_heads: expected a positive integer, got 0"),  # was ZeroDivisionError
    ({"head_dim": [128]}, "head_dim: expected a number, got [128]"),  # was TypeError
    ({"rope_theta": 1e4, "max_position_embeddings": "long"}, "max_position_embeddings: expected a number"),
])
def test_impossible_or_mistyped_fields_are_named_not_crashes(patch: dict[str, Any], message: str) -> None:
    """Found by mutating the real configs here (25 mutations each of 49 files): six crash kinds, one of them a
    10^12-layer build that never returned; each is now a GraphError (a 422 over REST) naming the field."""
    with pytest.raises(GraphError, match=message.replace("[", r"\[").replace("]", r"\]")):
        LlmConfig.from_hf(_load("gemma-7b") | patch, "bad")
    with pytest.raises(GraphError, match=r"malformed config\.json: TypeError"):
        LlmConfig.from_hf(_load("mpt-7b") | {"expansion_ratio": None}, "bad")
