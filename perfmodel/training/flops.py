"""FLOP conventions of published training throughputs.

- Megatron-LM (Narayanan et al. 2021, eq. 3): 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) per step for
  a GPT with full activation recomputation (it counts the recomputed forward).
- Model FLOPs (Korthikanti et al. 2022, §6: MFU): 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)), no recomputation.
- PaLM (Chowdhery et al. 2022, App. B): 6·N + 12·L·H·Q·T per token (N non-embedding parameters).
- PaLM with causal attention: 6·N + 6·L·H·Q·T per token (only the unmasked half of the scores), reported beside
  PaLM's where a source does not say which it used.
- 6·N per token (Kaplan et al. 2020's C = 6ND, no attention): Llama 3's total compute, 3.8e25 FLOPs for 405B
  parameters and 15.6T tokens, is this count.

Frameworks count attention non-causal: Megatron-LM's ``num_floating_point_operations`` (the s/h term of
12·B·s·l·h²·(…)) and torchtitan's ``get_num_flop_per_token`` (6N + 12·L·H·Q·T, "we follow the convention and do
not account for sparsity in causal attention").
"""

from __future__ import annotations

from perfmodel.graph.llm_config import LlmConfig


def active_layer_params(cfg: LlmConfig) -> float:
    """Parameters of one layer that a token passes through (attention, MLP or its top-k and shared experts),
    averaged over dense and MoE layers; norms and biases left out."""
    h = cfg.hidden
    if cfg.mla:
        qk = cfg.qk_nope_dim + cfg.qk_rope_dim
        q = h * cfg.q_lora_rank + cfg.q_lora_rank * cfg.heads * qk if cfg.q_lora_rank else h * cfg.heads * qk
        attn = q + h * (cfg.kv_lora_rank + cfg.qk_rope_dim) + cfg.kv_lora_rank * cfg.heads * (
            cfg.qk_nope_dim + cfg.v_head_dim) + cfg.heads * cfg.v_head_dim * h
    else:
        attn = h * (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim + cfg.heads * cfg.head_dim * h
    per_ffn = 3 if cfg.gated_mlp else 2
    dense = per_ffn * h * cfg.ffn
    if not cfg.moe:
        return float(attn + dense)
    moe = per_ffn * h * (cfg.top_k * cfg.moe_ffn + cfg.shared_intermediate) + h * cfg.experts
    moe_layers = cfg.moe_layer_count
    return float(attn + ((cfg.layers - moe_layers) * dense + moe_layers * moe) / cfg.layers)


def megatron_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. 2021 eq. 3 (counts full recomputation)."""
    return 96.0 * batch * seq * layers * hidden ** 2 * (1.0 + seq / (6.0 * hidden) + vocab / (16.0 * layers * hidden))


def model_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Korthikanti et al. 2022 model FLOPs (MFU's numerator)."""
    return 72.0 * batch * seq * layers * hidden ** 2 * (1.0 + seq / (6.0 * hidden) + vocab / (12.0 * layers * hidden))


def six_n_flops(cfg: LlmConfig, batch: int, seq: int) -> float:
    """6·N per token (no attention term), N the non-embedding parameters a token passes through."""
    return 6.0 * active_layer_params(cfg) * cfg.layers * batch * seq


def causal_attention_flops(cfg: LlmConfig, batch: int, seq: int) -> float:
    """The useful (causal) attention FLOPs of a step, forward and backward: 6·L·H·Q·T per token."""
    return 6.0 * cfg.layers * cfg.heads * cfg.head_dim * seq * batch * seq


def palm_flops(cfg: LlmConfig, batch: int, seq: int, causal: bool = False) -> float:
    """PaLM's convention: (6·N + 12·L·H·Q·T) per token; ``causal``: 6·L·H·Q·T for the attention."""
    n = active_layer_params(cfg) * cfg.layers
    attention = (6.0 if causal else 12.0) * cfg.layers * cfg.heads * cfg.head_dim * seq
    return batch * seq * (6.0 * n + attention)
