"""Gemma 2 / Gemma 3, gpt-oss, Falcon and OPT from their Hugging Face config.json (``hf_configs/``, each citing
its source): parameters against the published totals, gpt-oss active parameters and mxfp4 expert bytes, the
local/global attention layers, Falcon's shared LayerNorm and OPT's position table (issue 26).

Published totals: Gemma-2-2B 2,614,341,888 and Gemma-2-9B 9,241,705,984 (Hugging Face safetensors metadata);
Gemma-3-1B 999,885,952 (keras-hub gemma3 presets, ``params``); gpt-oss-120b 116.83 B total / 5.13 B active and
gpt-oss-20b 20.91 B / 3.61 B (OpenAI gpt-oss model card, table 1: unembedding counted active, embedding not);
OPT-125m and OPT-6.7B (Zhang et al. 2022, table 1: 125 M, 6.7 B). Falcon-7B's card says "7B" (rounded); the
module listing of FalconForCausalLM (kimborgen/falcon-llm README, a copy of the HF model) is summed instead.
"""

from __future__ import annotations

import pytest
from hf_models import hf_config, hf_data, hf_graph

from perfmodel.graph import LlmWorkload, build_llm, estimate
from perfmodel.graph.llm_config import KNOWN_TYPES, LlmConfig

PUBLISHED = {"gemma-2-2b": 2_614_341_888, "gemma-2-9b": 9_241_705_984, "gemma-3-1b-it": 999_885_952,
             "gpt-oss-20b": 20.91e9, "gpt-oss-120b": 116.83e9, "opt-125m": 125e6, "opt-6.7b": 6.7e9}
ACTIVE = {"gpt-oss-20b": 3.61e9, "gpt-oss-120b": 5.13e9}




@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameters_within_one_percent_of_published(name: str) -> None:
    assert hf_graph(name).params == pytest.approx(PUBLISHED[name], rel=0.01)


def test_the_new_families_are_known() -> None:
    assert {"gemma2", "gemma3_text", "gemma3", "gpt_oss", "falcon", "opt"} <= set(KNOWN_TYPES)


def test_falcon_7b_matches_the_sum_of_its_module_listing() -> None:
    """FalconForCausalLM(falcon-7b): Embedding(65024, 4544); 32 x [query_key_value 4544->4672, dense
    4544->4544, dense_h_to_4h 4544->18176, dense_4h_to_h 18176->4544, no biases; input_layernorm(4544)];
    ln_f(4544); lm_head 4544->65024 tied to the embedding."""
    layer = 4544 * 4672 + 4544 * 4544 + 2 * 4544 * 18176 + 2 * 4544
    listing = 65024 * 4544 + 32 * layer + 2 * 4544
    graph = hf_graph("falcon-7b")
    assert graph.params == listing
    assert graph.params == pytest.approx(7e9, rel=0.012)  # the card's rounded "7B"
    # the Hub's exact (safetensors) count, 7,217,189,760 (a public fine-tuning table's 'model_size' for
    # tiiuae/falcon-7b; the same table lists Mistral-7B 7,241,732,096 and Phi-3-mini 3,821,079,552, the safetensors
    # figures test_hf_most_downloaded cites): the checkpoint stores the tied lm_head a second time (vLLM PR #3590)
    assert graph.params + 65024 * 4544 == 7_217_189_760
    names = {n.name for n in graph.nodes if n.layer == "layers.0"}
    assert "layers.0.input_norm" in names and "layers.0.post_attention_norm" not in names  # one shared LN
    qkv = next(n for n in graph.nodes if n.name == "layers.0.qkv_proj")
    assert qkv.op is not None and qkv.op["n"] == 4672  # 71 query heads + one K and one V head (multi-query)


def test_falcon_40b_new_decoder_architecture_groups_kv_and_normalises_each_branch() -> None:
    """The pre-transformers 'RefinedWeb' config (n_head 128, n_head_kv 8, n_layer 60): query_key_value
    8192 -> (128 + 2 x 8) x 64, ln_attn and ln_mlp per layer, tied head. The card's "40B" is rounded."""
    layer = 8192 * 9216 + 8192 * 8192 + 2 * 8192 * 32768 + 2 * 2 * 8192
    graph = hf_graph("falcon-40b-instruct")
    assert graph.params == 65024 * 8192 + 60 * layer + 2 * 8192
    names = {n.name: n for n in graph.nodes if n.layer == "layers.0"}
    assert "layers.0.post_attention_norm" in names  # the second (MLP-branch) LayerNorm
    qkv = names["layers.0.qkv_proj"].op
    assert qkv is not None and qkv["n"] == 9216


@pytest.mark.parametrize("name", sorted(ACTIVE))
def test_gpt_oss_active_parameters_match_the_model_card(name: str) -> None:
    """Per token: everything but the input embedding, and top_k of the experts' weights."""
    cfg = hf_config(name)
    graph = hf_graph(name)
    experts = sum(n.params for n in graph.nodes if ".experts_" in n.name)
    embedding = sum(n.params for n in graph.nodes if n.name == "embed.embedding")
    active = graph.params - embedding - experts + experts * cfg.top_k / cfg.experts
    assert active == pytest.approx(ACTIVE[name], rel=0.01)


def test_gpt_oss_mxfp4_quantizes_the_experts_only() -> None:
    """4-bit values + one e8m0 byte per 32 (4.25 bits) on the experts; attention and router stay bf16: the
    checkpoint is 12.8 GiB (model card)."""
    graph = hf_graph("gpt-oss-20b")
    for node in graph.nodes:
        if ".experts_gate_up" in node.name or ".experts_down" in node.name:
            assert node.weight_bytes == pytest.approx(node.params * (0.5 + 1 / 32))
        elif node.name.endswith(("qkv_proj", "o_proj", "router")):
            assert node.weight_bytes == pytest.approx(node.params * 2)
    total = sum(n.weight_bytes for n in graph.nodes)
    assert total == pytest.approx(12.8 * 2**30, rel=0.02)


@pytest.mark.parametrize(("name", "global_layers"), [("gemma-3-1b-it", {5, 11, 17, 23}),
                                                     ("gemma-2-2b", set(range(1, 26, 2))),
                                                     ("gpt-oss-20b", set(range(1, 24, 2)))])
def test_sliding_and_global_layers_alternate(name: str, global_layers: set[int]) -> None:
    """A prompt longer than the window: local layers run the band, global layers full causal attention."""
    cfg = hf_config(name)
    graph = hf_graph(name, phase="prefill", prompt_tokens=cfg.sliding_window * 2 + 64)
    banded = {int(n.layer.split(".")[1]) for n in graph.nodes if n.name.endswith("attention_window_band")}
    assert banded == set(range(cfg.layers)) - global_layers


def test_gemma_layers_hold_four_norms_and_gemma3_its_qk_norms() -> None:
    g3 = {n.name.split(".", 2)[2]: n.params for n in hf_graph("gemma-3-1b-it").nodes if n.layer == "layers.0"}
    assert {"input_norm", "attention_output_norm", "post_attention_norm", "mlp_output_norm"} <= set(g3)
    assert g3["q_norm"] == g3["k_norm"] == 256
    g2 = {n.name.split(".", 2)[2] for n in hf_graph("gemma-2-2b").nodes if n.layer == "layers.0"}
    assert "mlp_output_norm" in g2 and "q_norm" not in g2 and "gelu_mul" in g2


def test_opt_positions_offset_and_embedding_projection() -> None:
    """OPT's learned position table has 2,048 + 2 rows; OPT-350m embeds at 512 and projects in and out."""
    pos = next(n for n in hf_graph("opt-125m").nodes if n.name == "embed.positions")
    assert pos.params == 2050 * 768
    nodes = {n.name: n for n in hf_graph("opt-350m").nodes}
    assert nodes["embed.project_in"].params == nodes["head.project_out"].params == 512 * 1024
    assert nodes["embed.embedding"].params == 50272 * 512
    assert "layers.0.relu" in nodes


@pytest.mark.parametrize(("name", "published"), [("gemma-3-4b-it", 4_300_079_472), ("gemma-3-12b-it", 12_187_325_040)])
def test_gemma3_multimodal_sparse_text_config_takes_the_class_defaults(name: str, published: int) -> None:
    """Gemma 3 4B/12B nest a sparse text_config (heads, KV heads, head_dim, vocab 262,208 from Gemma3TextConfig);
    text built + SigLIP tower and projector noted = the HF safetensors totals (the 1,152-weight soft-embedding
    norm is not counted)."""
    cfg = hf_config(name)
    total = hf_graph(name).params + cfg.extra_params
    assert total == pytest.approx(published, rel=0.01)
    assert cfg.vocab == 262208 and cfg.head_dim == 256 and cfg.global_every == 6 and cfg.sliding_window == 1024


def test_gemma3_multimodal_builds_its_text_config() -> None:
    data = {"model_type": "gemma3", "text_config": hf_data("gemma-3-1b-it")
            | {"model_type": None}, "vision_config": {"hidden_size": 8, "intermediate_size": 16,
                                                      "num_hidden_layers": 1, "patch_size": 14}}
    cfg = LlmConfig.from_hf(data, "gemma3")
    assert cfg.qk_norm and cfg.global_every == 6 and cfg.extra_params > 0


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gemma-3-1b-it", "falcon-7b", "opt-125m"])
def test_each_family_estimates_a_prefill_step(name: str) -> None:
    """The graphs run through the estimator; a longer prompt costs more (no op falls out)."""
    times = [estimate(hf_graph(name, phase="prefill", prompt_tokens=s), "nvidia-h100-sxm5-80gb", space="compact",
                      check_memory=False).step_time_s for s in (256, 1024)]
    assert 0 < times[0] < times[1]


def test_mxfp4_note_says_experts_only() -> None:
    assert any("mxfp4" in n and "experts only" in n for n in hf_config("gpt-oss-20b").notes)


@pytest.mark.parametrize("name", ["gemma-3-1b-it", "gpt-oss-20b"])
def test_copied_local_and_global_layers_equal_the_full_build(name: str) -> None:
    """One layer of each kind (local / global) built and copied gives the graph every layer built gives."""
    cfg, w = hf_config(name), LlmWorkload(phase="prefill", batch=2, prompt_tokens=1024)
    copied, full = build_llm(cfg, w), build_llm(cfg, w, copy_layers=False)
    assert [(n.name, n.op, n.params) for n in copied.nodes] == [(n.name, n.op, n.params) for n in full.nodes]
