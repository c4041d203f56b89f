"""FLOP conventions of published training throughputs.

- Megatron-LM (Narayanan et al. 2021, eq. 3): 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) per step for
  a GPT with full activation recomputation (it counts the recomputed forward).
- Model FLOPs (Korthikanti et al. 2022, §6: MFU): 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)), no recomputation.
- PaLM (Chowdhery et al. 2022, App. B): 6·N + 12·L·H·Q·T per token, N the parameters that multiply: the layers'
  and the LM head's matrix (``matmul_params``). PaLM's own figures fix it: 238.3K tokens/s on 6,144 TPU v4 chips of
  275 TFLOP/s (L = 118, H = 48, Q = 256, T = 2,048) give its published 46.2 % MFU with N = 540.35B, its tied
  256K x 18,432 embedding / LM head matrix included (46.23 %), and 45.8 % with the layers' 535.6B alone. For an
  untied model the LM head is the matrix that multiplies and the input embedding is a lookup: torchtitan's
  ``get_num_flop_per_token`` counts 6·(N − the token embedding) + 12·L·H·Q·T, the output projection included.
- PaLM with causal attention: 6·N + 6·L·H·Q·T per token (only the unmasked half of the scores), reported beside
  PaLM's where a source does not say which it used.
- 6·N per token (Kaplan et al. 2020's C = 6ND, no attention; N as PaLM's): Llama 3's total compute, 3.8e25 FLOPs
  for 405B parameters and 15.6T tokens, is this count.

Frameworks counted attention non-causal in 2024: Megatron-LM's ``num_floating_point_operations`` (the s/h term
of 12·B·s·l·h²·(…); NVIDIA/Megatron-LM issue #831, May 2024, asks to halve it for causal masks), torchtitan's
``get_num_flop_per_token`` (6N + 12·L·H·Q·T, "we follow the convention and do not account for sparsity in causal
attention"; pytorch/torchtitan PR #280, April 2024: "a factor of 12 ... even when causal attention is enabled"),
and NVIDIA's own H100 table of July 2024 (NeMo 24.07 performance summary: its tokens/s and TFLOP/s per GPU give
PaLM's count to 0.01 % for Llama 3 8B and 70B). Counts moved to causal later: MaxText in July 2025
(AI-Hypercomputer/maxtext PR #1988), Megatron-Bridge's tables by 25.11 (its 26.02 Llama 3.1 405B and Llama 3 70B
H100 rows give the causal count to 0.1 %); ``tests/training/test_training_published.py`` checks both tables.
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


def lm_head_params(cfg: LlmConfig) -> float:
    """The LM head's matrix, vocab x hidden (tied: the embedding matrix, which multiplies here)."""
    return float(cfg.vocab * cfg.hidden)


def matmul_params(cfg: LlmConfig) -> float:
    """PaLM's N: the parameters a token's matmuls pass through, the layers' (``active_layer_params``) and the LM
    head's; the input embedding (a lookup) left out unless tied to the head."""
    return active_layer_params(cfg) * cfg.layers + lm_head_params(cfg)


def megatron_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al. 2021 eq. 3 (counts full recomputation)."""
    return 96.0 * batch * seq * layers * hidden ** 2 * (1.0 + seq / (6.0 * hidden) + vocab / (16.0 * layers * hidden))


def model_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Korthikanti et al. 2022 model FLOPs (MFU's numerator)."""
    return 72.0 * batch * seq * layers * hidden ** 2 * (1.0 + seq / (6.0 * hidden) + vocab / (12.0 * layers * hidden))


def six_n_flops(cfg: LlmConfig, batch: int, seq: int) -> float:
    """6·N per token (no attention term), N the parameters a token's matmuls pass through (``matmul_params``)."""
    return 6.0 * matmul_params(cfg) * batch * seq


def causal_attention_flops(cfg: LlmConfig, batch: int, seq: int) -> float:
    """The useful (causal) attention FLOPs of a step, forward and backward: 6·L·H·Q·T per token."""
    return 6.0 * cfg.layers * cfg.heads * cfg.head_dim * seq * batch * seq


def palm_flops(cfg: LlmConfig, batch: int, seq: int, causal: bool = False) -> float:
    """PaLM's convention: (6·N + 12·L·H·Q·T) per token; ``causal``: 6·L·H·Q·T for the attention."""
    n = matmul_params(cfg)
    attention = (6.0 if causal else 12.0) * cfg.layers * cfg.heads * cfg.head_dim * seq
    return batch * seq * (6.0 * n + attention)
