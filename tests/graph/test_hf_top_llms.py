"""Widely downloaded open LLM checkpoints: parameters from their Hugging Face config.json (``hf_configs/``, each
citing its source) within 1 % of the published count, one test per model (issue 26).

Published totals: Qwen model cards' "Number of Parameters" (Qwen2.5-0.5B 0.49 B, 7B 7.61 B, 72B 72.7 B; Qwen3-0.6B
0.6 B, 8B 8.2 B, 30B-A3B 30.5 B total / 3.3 B activated); Hugging Face safetensors metadata for Llama 3.2 1B
(1,235,814,400) and 3B (3,212,749,824) and TinyLlama-1.1B (1,100,048,384); SmolLM2-1.7B model card (1.7 B, page
1.71 B); Mistral-Nemo-Base-2407 (12.2 B on its model page; "12B" in the card); Phi-4 (14.7 B on its model page;
"14B" in the card); Pythia-1B (Biderman et al. 2023, EleutherAI/pythia README: 1,011,781,632). The models already
covered elsewhere: Qwen2-57B-A14B, DeepSeek-V3, Gemma-7B, Llama-2-7B, Mistral-7B, Llama-3-8B, Phi-3-mini
(test_hf_configs.py); GPT-2, Llama-3-70B, Llama-3.1-405B, Mixtral-8x7B (bundled, test_llm_golden.py).
"""

from __future__ import annotations

import pytest
from hf_models import hf_config, hf_data

from perfmodel.graph import GraphError, LlmWorkload, build_llm, estimate
from perfmodel.graph.llm_config import LlmConfig

PUBLISHED = {
    "qwen2.5-0.5b-instruct": 0.49e9, "qwen2.5-7b-instruct": 7.61e9, "qwen2.5-72b-instruct": 72.7e9,
    "qwen3-0.6b": 0.6e9, "qwen3-8b": 8.2e9, "qwen3-30b-a3b": 30.5e9,
    "llama-3.2-1b": 1_235_814_400, "llama-3.2-3b": 3_212_749_824, "tinyllama-1.1b-chat": 1_100_048_384,
    "smollm2-1.7b": 1.71e9, "mistral-nemo-base-2407": 12.2e9, "phi-4": 14.7e9, "pythia-1b": 1_011_781_632,
}



@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameters_within_one_percent_of_published(name: str) -> None:
    graph = build_llm(hf_config(name), LlmWorkload(phase="decode", batch=1, kv_len=16))
    assert graph.params == pytest.approx(PUBLISHED[name], rel=0.01)


def test_tied_and_untied_embeddings_follow_the_config() -> None:
    """Llama 3.2 1B ties its LM head to the embedding (one 128,256 x 2,048 matrix); Qwen2.5-7B does not."""
    tied = build_llm(hf_config("llama-3.2-1b"), LlmWorkload(phase="decode", batch=1, kv_len=16))
    untied_cfg = hf_data("llama-3.2-1b") | {"tie_word_embeddings": False}
    untied = build_llm(LlmConfig.from_hf(untied_cfg, "untied"), LlmWorkload(phase="decode", batch=1, kv_len=16))
    assert untied.params - tied.params == 128256 * 2048


def test_qwen3_moe_activates_the_published_3_3b() -> None:
    """Qwen3-30B-A3B decoding one token runs 8 of 128 experts: 2 FLOPs per active parameter in the matrix engine
    (plus the embedding lookup) is the model card's 3.3 B activated."""
    cfg = hf_config("qwen3-30b-a3b")
    graph = build_llm(cfg, LlmWorkload(phase="decode", batch=1, kv_len=16))
    est = estimate(graph, "nvidia-h100-sxm5-80gb", space="compact", fusion=False, check_memory=False)
    matrix = float(est.batch.flops_by_engine["matrix"][est.index].sum())
    attention = 4.0 * cfg.layers * cfg.heads * cfg.head_dim * 16  # QK^T and PV over 16 cached keys
    assert (matrix - attention) / 2 + cfg.vocab * cfg.hidden == pytest.approx(3.3e9, rel=0.03)


@pytest.mark.parametrize("model_type", ["xglm", "baichuan", "t5", "mamba", "rwkv"])  # bloom, mpt, gpt_neo: built now
def test_popular_types_the_importer_does_not_build_are_refused_with_the_known_list(model_type: str) -> None:
    cfg = hf_data("qwen2.5-7b-instruct") | {"model_type": model_type}
    with pytest.raises(GraphError) as err:
        LlmConfig.from_hf(cfg, model_type)
    assert "known:" in str(err.value) and "llama" in str(err.value)
