"""Bytes per device in training, vectorised over layouts (numpy arrays or scalars).

Model states follow the ZeRO paper (Rajbhandari et al. 2020, §5): with Ψ parameters on a
device, mixed-precision Adam holds 2Ψ (bf16 weights) + 2Ψ (bf16 gradients) + KΨ (fp32 master
weights and two moments, K = 12); stage 1 shards the KΨ over the Nd data-parallel ranks, stage
2 also the gradients, stage 3 (FSDP) also the weights: 2Ψ + 2Ψ + KΨ/Nd, 2Ψ + (2+K)Ψ/Nd,
(2+2+K)Ψ/Nd. Stage 2's gradient shard needs a reduce-scatter per micro-batch; the step model
reduces once per step, so with gradient accumulation (m > 1) stage 2 holds stage 1's full
gradient. Context-parallel ranks hold the same weights, so Nd = dp · cp (Megatron's
data-and-context group).

Activations follow Korthikanti et al. 2022 (§4), generalised from GPT's layer to any config:
per token of a micro-batch a layer keeps its LayerNorm and GEMM inputs (replicated over tp
unless sequence parallelism shards them), the Q, K, V, attention output and MLP inputs (sharded
over tp) and, without flash attention, the softmax output, its dropout mask and output
(5·a·s bytes per token). For GPT (4h MLP, dropout) that is sbh(34 + 5as/h) per layer; with tp
and sequence parallelism sbh(34 + 5as/h)/t; selective recomputation drops the 5as/h term;
full recomputation keeps 2sbh per layer (its input) plus one layer recomputed at a time. A stage holds
the chunk forwards of Megatron's (interleaved) 1F1B order at its peak, chunk by chunk
(``held_layer_microbatches``), which is Korthikanti's L·(1 + (p−1)/(p·v)) on the first stage when m ≥ 2p.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.graph.llm_config import LlmConfig
from perfmodel.training.layout import ADAM_STATE_BYTES_PER_PARAM

ACT_BYTES = 2.0  # bf16 activations
MASK_BYTES = 1.0  # a dropout mask element
LSE_BYTES = 4.0  # flash attention's fp32 log-sum-exp per query row and head
NONE, SELECTIVE, FULL = 0, 1, 2  # recomputation codes in the arrays


@dataclass(frozen=True)
class ActivationShape:
    """Bytes per token of one layer (averaged over dense and MoE layers), split by how they shard.

    ``replicated``: LayerNorm inputs, the QKV and MLP GEMM inputs, dropout masks (÷ tp only with
    sequence parallelism); ``sharded``: Q, K, V, attention output, MLP activations (÷ tp);
    ``scores_per_key``: bytes per (token, key) of the stored softmax (÷ tp; 0 with flash attention);
    ``flash_per_token``: flash attention's log-sum-exp (÷ tp); ``layer_input``: what full
    recomputation keeps (÷ tp with sequence parallelism)."""

    replicated: float
    sharded: float
    scores_per_key: float
    flash_per_token: float
    layer_input: float
    hidden: int
    vocab: int

    @staticmethod
    def of(cfg: LlmConfig, dropout: bool, flash: bool) -> ActivationShape:
        h = cfg.hidden
        if cfg.mla:
            qk = cfg.qk_nope_dim + cfg.qk_rope_dim
            q_w, k_w, v_w, o_w = cfg.heads * qk, cfg.heads * qk, cfg.heads * cfg.v_head_dim, cfg.heads * cfg.v_head_dim
            latent = cfg.kv_lora_rank + cfg.qk_rope_dim + cfg.q_lora_rank
        else:
            q_w, k_w = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
            v_w, o_w, latent = k_w, q_w, 0
        per_ffn = 3.0 if cfg.gated_mlp else 2.0  # gated: gate and up outputs, their product; else fc1 out, act out
        dense_mlp = per_ffn * cfg.ffn
        if cfg.moe:
            moe_mlp = per_ffn * (cfg.top_k * cfg.moe_ffn + cfg.shared_intermediate)
            moe_layers = cfg.moe_layer_count
            mlp = ((cfg.layers - moe_layers) * dense_mlp + moe_layers * moe_mlp) / cfg.layers
        else:
            mlp = dense_mlp
        masks = 2.0 * MASK_BYTES * h if dropout else 0.0  # attention-output and MLP-output dropout
        replicated = ACT_BYTES * (4.0 * h + latent) + masks  # two LayerNorm inputs, QKV and fc1 inputs
        sharded = ACT_BYTES * (q_w + k_w + v_w + o_w + mlp)
        scores = 0.0 if flash else cfg.heads * (ACT_BYTES + ((MASK_BYTES + ACT_BYTES) if dropout else 0.0))
        flash_lse = LSE_BYTES * cfg.heads if flash else 0.0
        return ActivationShape(replicated, sharded, scores, flash_lse, ACT_BYTES * h, h, cfg.vocab)


def layer_activation_bytes(shape: ActivationShape, tokens: Any, keys: Any, tp: Any, sequence_parallel: bool,
                           recompute: Any) -> Any:
    """Bytes one layer keeps for the backward per micro-batch: ``tokens`` local tokens (micro-batch ·
    sequence / cp), each query attending to ``keys`` keys; ``recompute`` codes NONE/SELECTIVE/FULL."""
    tp = np.asarray(tp, dtype=float)
    rep_div = tp if sequence_parallel else 1.0
    base = shape.replicated / rep_div + shape.sharded / tp + shape.flash_per_token / tp
    scores = shape.scores_per_key * np.asarray(keys, dtype=float) / tp
    rc = np.asarray(recompute)
    per_token = np.where(rc == FULL, shape.layer_input / rep_div, np.where(rc == SELECTIVE, base, base + scores))
    return np.asarray(tokens, dtype=float) * per_token


def layer_working_bytes(shape: ActivationShape, tokens: Any, keys: Any, tp: Any, sequence_parallel: bool,
                        recompute: Any) -> Any:
    """Full recomputation rebuilds one layer's activations at a time in the backward: that layer's
    bytes (with its scores unless flash) are live on top of the stored layer inputs."""
    full = layer_activation_bytes(shape, tokens, keys, tp, sequence_parallel, NONE)
    return np.where(np.asarray(recompute) == FULL, full, 0.0)


def output_layer_bytes(shape: ActivationShape, tokens: Any, tp: Any) -> Any:
    """The last stage's final LayerNorm, logits and fp32 cross-entropy: 4·s·b·h/t·(1 + V/h) bytes
    (Korthikanti et al. 2022, §4.3)."""
    return 4.0 * np.asarray(tokens, dtype=float) * (shape.hidden + shape.vocab) / np.asarray(tp, dtype=float)


def peak_forwards(pp: Any, microbatches: Any, virtual_stages: Any, last: bool) -> Any:
    """Chunk forwards a stage holds at its peak under (interleaved) 1F1B, as Megatron schedules them: the
    first stage warms up with pp − 1 forwards (v = 1) or 2(pp − 1) + (v − 1)·pp (v > 1), the last with 0 or
    (v − 1)·pp, then holds one more; never more than the m·v forwards of a step (interleaved with m = pp:
    every forward is warm-up)."""
    pp = np.asarray(pp, dtype=float)
    v = np.asarray(virtual_stages, dtype=float)
    m = np.asarray(microbatches, dtype=float)
    if last:
        warmup = np.where(v > 1, (v - 1.0) * pp, 0.0)
    else:
        warmup = np.where(v > 1, 2.0 * (pp - 1.0) + (v - 1.0) * pp, pp - 1.0)
    every = (v > 1) & (m <= pp)
    return np.where(every, m * v, np.minimum(warmup + 1.0, m * v))


def held_layer_microbatches(pp: Any, microbatches: Any, virtual_stages: Any, layers_per_chunk: Any, last: bool,
                            end_in_split: Any) -> tuple[Any, Any]:
    """(layer × micro-batch activation sets, micro-batches of the end chunk) a stage holds at its peak
    (``end_in_split``: bool or a bool array over layouts).

    Forward k runs chunk (k // pp) mod v (Megatron's interleaved order), so of P peak forwards chunk c holds
    min(pp, P − c·pp) in the first round and chunk 0 the rest. The end chunk (the first stage's chunk 0, the last
    stage's chunk v − 1) holds one layer fewer when ``end_in_split``: the embedding / the loss takes a layer's
    slot (Megatron-Core's ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``;
    Llama 3 §3.3.2). On the last stage that lowers the peak only without a second round (v = 1 or m = pp): with
    one, the next round's first forward (chunk 0, whole) comes before the backward it pairs with frees a layer.
    With m ≥ 2pp on the first stage this is Korthikanti et al. 2022 §4.2.3's L·(1 + (p − 1)/(p·v)); with fewer
    micro-batches it is less."""
    pp = np.asarray(pp, dtype=float)
    v = np.asarray(virtual_stages, dtype=float)
    m = np.asarray(microbatches, dtype=float)
    peak = peak_forwards(pp, microbatches, virtual_stages, last)
    if last:
        end = np.minimum(np.maximum(peak - (v - 1.0) * pp, 0.0), pp)
        lowers = np.asarray(end_in_split) & ((v <= 1) | (m <= pp))
    else:
        end = np.minimum(pp, peak) + np.maximum(peak - v * pp, 0.0)
        lowers = np.asarray(end_in_split)
    sets = np.asarray(layers_per_chunk, dtype=float) * peak - np.where(lowers, end, 0.0)
    return sets, end


def model_state_bytes(params: Any, zero: Any, shards: Any, weight_bytes: float = 2.0, grad_bytes: float = 2.0,
                      optimizer_bytes: float = ADAM_STATE_BYTES_PER_PARAM, offload: bool = False,
                      microbatches: Any = 1.0) -> tuple[Any, Any, Any]:
    """(weights, gradients, optimizer state) bytes per device for ``params`` parameters on it before
    ZeRO, sharded over ``shards`` data-parallel ranks by stage ``zero`` (0–3); ``offload``: the
    optimizer state lives in host memory.

    ZeRO-2 reduces the gradients once per step (``step.step_times``): with ``microbatches`` > 1 each
    device accumulates its full gradient until then (Megatron's distributed optimizer; Llama 3 §3.3.2:
    fp32 accumulation over the micro-batches, then one fp32 reduce-scatter), so only a one-micro-batch
    step keeps the 1/Nd gradient shard. ZeRO-3 reduce-scatters every micro-batch and keeps the shard."""
    p = np.asarray(params, dtype=float)
    z = np.asarray(zero)
    nd = np.asarray(shards, dtype=float)
    weights = weight_bytes * p / np.where(z >= 3, nd, 1.0)
    sharded_grads = (z >= 3) | ((z == 2) & (np.asarray(microbatches, dtype=float) <= 1.0))
    grads = grad_bytes * p / np.where(sharded_grads, nd, 1.0)
    opt = 0.0 * p if offload else optimizer_bytes * p / np.where(z >= 1, nd, 1.0)
    return weights, grads, opt
