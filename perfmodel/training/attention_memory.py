"""The flash attention backward's working buffers per device, bytes (docs/model.md, 'Training memory: the
attention backward's working buffers and all-gather context parallelism').

They live while one layer's attention backward runs, on top of the activations the stage holds:

- dQ accumulated in fp32 across the key blocks and softmax_d (fp32, one per query row and head): both
  FlashAttention-2 (``csrc/flash_attn/flash_api.cpp``, ``mha_bwd``: ``dq_accum``, ``softmax_d``) and
  FlashAttention-3 (``hopper/flash_api.cpp``) allocate them, s_q · heads · (head_dim + 1) · 4 bytes;
- with grouped-query attention (kv heads < heads): FlashAttention-2 writes dK and dV expanded to the query heads
  in bf16 (``dk_expanded``, ``dv_expanded``: s_kv · heads · head_dim each) and sums them over the groups afterwards
  (``at::sum_out``); FlashAttention-3 accumulates them in fp32 at the kv heads (``dk_accum``, ``dv_accum``);
- all-gather context parallelism (Llama 3, arXiv:2407.21783, §3.3.2: "we first all-gather the key (K) and value
  (V) tensors, and then compute attention output for the local query (Q) tensor chunk") holds K and V of the whole
  sequence, and in the backward their gradients for the whole sequence until the reduce-scatter (bf16), and the
  kernel's s_kv is the whole sequence (the last chunk's causal prefix): the O(S) buffers the paper names.

With tp-way tensor parallelism a device runs heads/tp query heads and max(kv heads/tp, 1) kv heads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from perfmodel.graph.llm_config import LlmConfig

if TYPE_CHECKING:
    from perfmodel.hardware import Hardware

BF16_BYTES = 2.0
FP32_BYTES = 4.0
# the search counts these buffers (issue 29, fifteenth pass); ``benchmarks/training_throughput.py
# --no-attention-buffers`` sets it off to reprint the figures from before
COUNTED = {"on": True}


def buffer_kernel(hardware: Hardware, attention_kernel: str) -> str:
    """Whose buffers a run's attention backward allocates: FlashAttention-3's (``fa3``) where the device's own
    kernel runs (``native``) and its matrix engines issue asynchronous MMAs (wgmma on Hopper; tcgen05, ``cta``,
    taken to keep FA3's layout), else FlashAttention-2's (``fa2``: mma.sync devices, and ``attention_kernel``
    ``fa2``; ROCm's composable-kernel port allocates the same expanded dK/dV)."""
    asynchronous = any(e.mma_scope in ("warpgroup", "cta") for e in hardware.engines)
    return "fa3" if attention_kernel == "native" and asynchronous else "fa2"


def attention_backward_bytes(
    cfg: LlmConfig, micro_batch: Any, seq_len: int, tp: Any, cp: Any, allgather: bool, kernel: str
) -> Any:
    """Bytes one device's attention backward allocates for one layer and micro-batch of ``micro_batch`` sequences
    of ``seq_len`` tokens (``cp`` ranks share a sequence; ``allgather``: they all-gather K/V, else a ring passes
    s/cp-token blocks); ``kernel``: ``fa2`` (FlashAttention-2's buffers) or ``fa3`` (FlashAttention-3's;
    ``buffer_kernel`` says which a run allocates)."""
    tp = np.asarray(tp, dtype=float)
    cp = np.asarray(cp, dtype=float)
    b = np.asarray(micro_batch, dtype=float)
    heads = np.maximum(np.floor(cfg.heads / tp), 1.0)
    if cfg.mla:  # K and V decompressed per query head: no grouping; Q·K over the nope and rope parts
        kv, d_qk, d_v = heads, float(cfg.qk_nope_dim + cfg.qk_rope_dim), float(cfg.v_head_dim)
    else:
        kv = np.maximum(np.floor(max(cfg.kv_heads, 1) / tp), 1.0)
        d_qk = d_v = float(cfg.head_dim)
    s_q = b * seq_len / cp
    gathered = allgather & (cp > 1)
    s_kv = np.where(gathered, b * seq_len, s_q)
    dq = s_q * heads * (d_qk + 1.0) * FP32_BYTES
    grouped = kv < heads
    if kernel == "fa2":
        dkv = np.where(grouped, s_kv * heads * (d_qk + d_v) * BF16_BYTES, 0.0)
    else:
        dkv = np.where(grouped, s_kv * kv * (d_qk + d_v) * FP32_BYTES, 0.0)
    # the gathered K and V and their whole-sequence gradients before the reduce-scatter
    kv_whole = np.where(gathered, 2.0 * s_kv * kv * (d_qk + d_v) * BF16_BYTES, 0.0)
    return dq + dkv + kv_whole
