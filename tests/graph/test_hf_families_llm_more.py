"""BLOOM, MPT, GPT-J, GPTBigCode (StarCoder), Phi-3.5-MoE and OLMo 1 from their Hugging Face config.json
(``hf_configs/``, each citing its source; builders in ``llm_families_more``): parameters against the published
counts and each family's distinctive layer (issue 26).

Published totals: BLOOM-560m 559,214,592 (Hugging Face safetensors metadata, "559M params"); MPT-7B "6.7B"
(mosaicml/mpt-7b model card); GPT-J-6B 6,053,381,344 (EleutherAI/gpt-j-6b model card, n_parameters); StarCoder
"15.5B" (bigcode/starcoder model card; Li et al. 2023, arXiv:2305.06161); Phi-3.5-MoE "41.9B" total and "6.6B
active" (microsoft/Phi-3.5-MoE-instruct model card); OLMo-7B "6.89B" (allenai/OLMo-7B-hf safetensors metadata).
Each is also checked against the sum of its ``...ForCausalLM`` module listing, written out below by hand.
"""

from __future__ import annotations

import pytest
from hf_models import hf_config, hf_data, hf_graph

from perfmodel.graph import GraphError
from perfmodel.graph.llm_config import KNOWN_TYPES, LlmConfig

PUBLISHED = {"bloom-560m": 559_214_592, "mpt-7b": 6.7e9, "gpt-j-6b": 6_053_381_344, "starcoder": 15.5e9,
             "phi-3.5-moe-instruct": 41.9e9, "olmo-7b-hf": 6.89e9}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameters_within_one_percent_of_published(name: str) -> None:
    assert hf_graph(name).params == pytest.approx(PUBLISHED[name], rel=0.01)


def test_the_families_are_known() -> None:
    assert {"bloom", "mpt", "gptj", "gpt_bigcode", "phimoe", "olmo"} <= set(KNOWN_TYPES)


def _nodes(name: str) -> dict[str, int]:
    return {n.name: n.params for n in hf_graph(name).nodes}


def test_bloom_module_listing_and_embedding_norm() -> None:
    """BloomForCausalLM(560m): word_embeddings (250880, 1024) + its LayerNorm; 24 x [2 LayerNorms, biased qkv
    1024->3072, dense, 4h MLP]; ln_f; tied head; ALiBi, so no position table and no rotary."""
    h, v = 1024, 250880
    layer = 4 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * 4 * h + 4 * h) + (4 * h * h + h)
    assert hf_graph("bloom-560m").params == v * h + 2 * h + 24 * layer + 2 * h == 559_214_592
    nodes = _nodes("bloom-560m")
    assert nodes["embed.embedding_norm"] == 2 * h and "embed.positions" not in nodes
    assert "layers.0.rotary" not in nodes and nodes["head.lm_head"] == 0


def test_mpt_has_no_biases_and_no_position_table() -> None:
    h, v = 4096, 50432
    layer = 2 * h + 4 * h * h + 2 * h * 4 * h  # bias-free LayerNorms and linears (no_bias)
    assert hf_graph("mpt-7b").params == v * h + 32 * layer + h
    nodes = _nodes("mpt-7b")
    assert nodes["layers.0.qkv_proj"] == 3 * h * h and "embed.positions" not in nodes


def test_mpt_without_alibi_learns_positions() -> None:
    data = hf_data("mpt-7b")
    data["attn_config"]["alibi"] = False
    with_table = LlmConfig.from_hf(data)
    assert with_table.learned_positions and not hf_config("mpt-7b").learned_positions


def test_gptj_parallel_block_partial_rotary_and_biased_head() -> None:
    h, v, f = 4096, 50400, 16384
    layer = 2 * h + 4 * h * h + (h * f + f) + (f * h + h)  # one LayerNorm; q/k/v/out bias-free; biased MLP
    graph = hf_graph("gpt-j-6b")
    assert graph.params == v * h + 28 * layer + 2 * h + (h * v + v)
    nodes = {n.name: n for n in graph.nodes}
    assert "layers.0.post_attention_norm" not in nodes and "layers.0.parallel_residual_add" in nodes
    rotary = nodes["layers.0.rotary"].op
    assert rotary is not None and rotary["shape"][1] == (16 + 16) * 64  # rotary_dim 64 of head_dim 256


def test_starcoder_multi_query_and_learned_positions() -> None:
    h, f, v, pos = 6144, 24576, 49152, 8192
    kv = 2 * 128  # one key and one value head of 128
    layer = 4 * h + (h * (h + kv) + h + kv) + (h * h + h) + (h * f + f) + (f * h + h)
    assert hf_graph("starcoder").params == v * h + pos * h + 40 * layer + 2 * h
    assert hf_config("starcoder").kv_heads == 1


def test_phimoe_totals_and_active_parameters() -> None:
    h, v, f, experts, kv = 4096, 32064, 6400, 16, 1024
    attention = (h * (h + 2 * kv) + h + 2 * kv) + (h * h + h)
    layer = 4 * h + attention + h * experts + experts * 3 * h * f
    total = v * h + 32 * layer + 2 * h + (h * v + v)
    assert hf_graph("phi-3.5-moe-instruct").params == total
    active = total - 32 * (experts - 2) * 3 * h * f  # top-2 of 16 experts per token
    assert active == pytest.approx(6.6e9, rel=0.01)
    assert _nodes("phi-3.5-moe-instruct")["head.lm_head"] == h * v + v


def test_olmo_norms_hold_no_weights() -> None:
    h, v, f = 4096, 50304, 11008
    assert hf_graph("olmo-7b-hf").params == 2 * v * h + 32 * (4 * h * h + 3 * h * f)
    nodes = _nodes("olmo-7b-hf")
    assert nodes["layers.0.input_norm"] == 0 and nodes["head.final_norm"] == 0


def test_bad_sizes_name_the_field() -> None:
    data = hf_data("gpt-j-6b")
    data["rotary_dim"] = 512
    with pytest.raises(GraphError, match="rotary_dim"):
        LlmConfig.from_hf(data)
    data = hf_data("mpt-7b")
    del data["d_model"]
    with pytest.raises(GraphError, match="d_model"):
        LlmConfig.from_hf(data)
