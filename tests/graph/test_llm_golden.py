"""Golden checks of the LLM builder: parameter counts, FLOPs per token, parallelism, memory."""

from __future__ import annotations

import pytest

from perfmodel.graph import DoesNotFit, LlmWorkload, Parallelism, build_llm, bundled, estimate
from perfmodel.graph.llm_build import active_experts
from perfmodel.graph.llm_config import LlmConfig

H100 = "nvidia-h100-sxm5-80gb"

# published parameter counts: Meta model cards (8.03 B, 70.6 B), OpenAI GPT-2 small (124 M),
# Brown et al. 2020 (175 B), Mistral's Mixtral announcement (46.7 B total)
PUBLISHED = {"llama-3-8b": (8.03e9, 0.001), "llama-3-70b": (70.6e9, 0.001), "gpt2": (124e6, 0.005),
             "gpt3-175b": (175e9, 0.005), "mixtral-8x7b": (46.7e9, 0.001)}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_published(name: str) -> None:
    graph = build_llm(bundled(name), LlmWorkload(phase="decode"))
    expected, tolerance = PUBLISHED[name]
    print(f"{name}: {graph.params:,} parameters (published {expected:.4g})")
    assert graph.params == pytest.approx(expected, rel=tolerance)


def test_exact_llama_3_8b_count() -> None:
    assert build_llm(bundled("llama-3-8b"), LlmWorkload()).params == 8_030_261_248


def _matrix_flops(name: str, workload: LlmWorkload) -> tuple[float, LlmConfig, float]:
    cfg = bundled(name)
    graph = build_llm(cfg, workload)
    est = estimate(graph, H100, space="compact", fusion=False)
    embed = cfg.vocab * cfg.hidden
    non_embedding = graph.params - embed - (cfg.max_positions * cfg.hidden if cfg.learned_positions else 0)
    if cfg.tied_embeddings:
        non_embedding += embed  # the head reuses the table: it still multiplies
    return float(est.batch.flops_by_engine["matrix"][est.index].sum()), cfg, float(non_embedding)


@pytest.mark.parametrize("name", ["llama-3-8b", "gpt2"])
def test_decode_flops_per_token_is_two_per_parameter_plus_attention(name: str) -> None:
    kv = 4096
    flops, cfg, params = _matrix_flops(name, LlmWorkload(phase="decode", batch=1, kv_len=kv))
    attention = 4.0 * cfg.layers * cfg.heads * cfg.head_dim * kv  # Q·Kᵀ and P·V over every key
    expected = 2.0 * params + attention
    print(f"{name}: {flops:.4g} FLOPs/token vs 2N + attention = {expected:.4g}")
    assert flops == pytest.approx(expected, rel=0.01)


def test_prefill_flops_are_two_per_parameter_per_token_plus_causal_attention() -> None:
    s = 1024
    flops, cfg, params = _matrix_flops("llama-3-8b", LlmWorkload(phase="prefill", batch=1, prompt_tokens=s))
    head = 2.0 * cfg.hidden * cfg.vocab * (s - 1)  # only the last token's logits are computed
    attention = 4.0 * cfg.layers * cfg.heads * cfg.head_dim * s * (s + 1) / 2
    assert flops == pytest.approx(2.0 * params * s - head + attention, rel=0.01)


def test_tensor_parallel_inserts_two_allreduces_per_layer_of_the_activation_size() -> None:
    cfg = bundled("llama-3-70b")
    graph = build_llm(cfg, LlmWorkload(phase="decode", batch=4), Parallelism(tp=8))
    reduces = [n.op for n in graph.nodes if n.op and n.op["kind"] == "allreduce"]
    assert len(reduces) == 2 * cfg.layers + 1  # and one after the vocab-parallel embedding
    assert all(op["bytes"] == 4 * cfg.hidden * 2 and op["devices"] == 8 for op in reduces)
    qkv = next(n.op for n in graph.nodes if n.name == "layers.0.qkv_proj")
    assert qkv is not None and qkv["n"] == (64 // 8 + 2 * 8 // 8) * 128


def test_seventy_b_does_not_fit_one_h100_but_fits_eight() -> None:
    cfg = bundled("llama-3-70b")
    with pytest.raises(DoesNotFit, match=r"needs .* per device \(weights .* has 80 GB"):
        estimate(build_llm(cfg, LlmWorkload()), H100)
    est = estimate(build_llm(cfg, LlmWorkload(), Parallelism(tp=8)), H100)
    assert est.memory.weights_bytes == pytest.approx(70_553_706_496 * 2 / 8, rel=0.001)  # norms replicated


def test_int4_weights_quarter_the_weight_bytes_and_speed_up_decode() -> None:
    cfg = bundled("llama-3-8b")
    bf16 = estimate(build_llm(cfg, LlmWorkload(batch=1)), H100)
    int4 = estimate(build_llm(cfg, LlmWorkload(batch=1, weight_dtype="int4")), H100)
    assert int4.memory.weights_bytes < 0.3 * bf16.memory.weights_bytes
    assert int4.step_time_s < 0.6 * bf16.step_time_s


def test_decode_bottleneck_is_hbm_bound_weight_reads() -> None:
    est = estimate(build_llm(bundled("llama-3-8b"), LlmWorkload(batch=1, kv_len=1024)), H100)
    shares = est.to_json(detail=False)["bottleneck"]["shares"]
    assert shares[0]["category"] == "HBM3-bound weight reads" and shares[0]["share"] > 0.5


def test_kv_cache_bytes_follow_the_config() -> None:
    cfg = bundled("llama-3-8b")
    est = estimate(build_llm(cfg, LlmWorkload(batch=4, kv_len=8192)), H100)
    assert est.memory.kv_cache_bytes == pytest.approx(4 * 8192 * cfg.layers * 2 * 8 * 128 * 2)


def test_mixtral_decode_reads_only_routed_experts_and_ep_uses_alltoall() -> None:
    cfg = bundled("mixtral-8x7b")
    graph = build_llm(cfg, LlmWorkload(batch=1))
    experts = next(n.op for n in graph.nodes if n.name == "layers.0.experts_gate_up")
    assert experts is not None and experts["batch"] == 2 and experts["m"] == 1
    assert active_experts(8, 2, 64) == pytest.approx(8.0, rel=1e-3)
    ep = build_llm(cfg, LlmWorkload(batch=64), Parallelism(tp=8, ep=8))
    assert sum(1 for n in ep.nodes if n.op and n.op["kind"] == "alltoall") == 2 * cfg.layers
    estimate(ep, H100)


def test_deepseek_mla_caches_the_latent() -> None:
    cfg = LlmConfig.from_hf({"model_type": "deepseek_v3", "hidden_size": 1024, "num_hidden_layers": 4,
                             "num_attention_heads": 8, "intermediate_size": 2048, "vocab_size": 1000,
                             "kv_lora_rank": 128, "q_lora_rank": 256, "qk_nope_head_dim": 64,
                             "qk_rope_head_dim": 32, "v_head_dim": 64, "n_routed_experts": 8,
                             "num_experts_per_tok": 2, "moe_intermediate_size": 512, "n_shared_experts": 1,
                             "first_k_dense_replace": 1})
    est = estimate(build_llm(cfg, LlmWorkload(batch=2, kv_len=1000)), H100)
    assert est.memory.kv_cache_bytes == pytest.approx(2 * 1000 * 4 * (128 + 32) * 2)
    attention = next(n.op for n in est.graph.nodes if n.op and n.op["kind"] == "attention")
    assert attention["kv_heads"] == 1 and attention["head_dim"] == 160
    estimate(build_llm(cfg, LlmWorkload(phase="prefill", batch=1, prompt_tokens=128)), H100)


def test_pipeline_step_and_bubble() -> None:
    cfg = bundled("llama-3-8b")
    est = estimate(build_llm(cfg, LlmWorkload(phase="prefill", batch=8, prompt_tokens=512),
                             Parallelism(pp=4, microbatches=4)), H100)
    stages = est.timeline.stage_times_s
    assert len(stages) == 4
    assert est.step_time_s == pytest.approx(sum(stages) + 3 * max(stages))
    assert 0.2 < est.timeline.bubble_fraction < 0.6  # (pp-1)/(m+pp-1) = 3/7 when balanced
    sends = [n for n in est.graph.nodes if n.name.endswith(".send")]
    assert len(sends) == 3


def test_training_overlaps_the_gradient_allreduce() -> None:
    cfg = bundled("gpt2")
    est = estimate(build_llm(cfg, LlmWorkload(phase="train", batch=8, prompt_tokens=1024),
                             Parallelism(dp=8)), H100)
    assert est.timeline.hidden_comm_s > 0
    assert est.memory.optimizer_bytes == pytest.approx(12 * est.graph.params)
    assert est.memory.gradients_bytes == pytest.approx(2 * est.graph.params)
    serial = sum(est.node_time_s)
    assert est.step_time_s < serial  # the overlapped all-reduces are not all on the critical path
