"""More Hugging Face LLM families (issue 26): BLOOM, MPT, GPT-J, GPTBigCode (StarCoder / SantaCoder), Phi-3.5-MoE
and OLMo 1 — each normalised from its ``config.json`` into an :class:`LlmConfig` (sizes are element counts).

- BLOOM (``BloomForCausalLM``): ALiBi (no position table), a LayerNorm after the word embeddings, biased
  q/k/v, dense and 4h GELU MLP, tied head.
- MPT (``MPTForCausalLM``): ALiBi, ``no_bias`` drops every linear and LayerNorm bias, ``expansion_ratio`` x
  ``d_model`` GELU MLP, tied head; ``attn_config.kv_n_heads`` for grouped-query variants.
- GPT-J (``GPTJForCausalLM``): attention and MLP in parallel under one LayerNorm, rotary on ``rotary_dim`` of each
  head, q/k/v/out without bias, biased MLP and LM head, untied.
- GPTBigCode (``GPTBigCodeForCausalLM``): GPT-2's block with multi-query attention (``multi_query``), learned
  positions, biases everywhere, tied head.
- Phi-3.5-MoE (``PhimoeForCausalLM``): GQA with biased q/k/v/o, LayerNorms with bias, top-2 of 16 SwiGLU experts
  without bias, a biased LM head (``lm_head_bias``), untied.
- OLMo 1 (``OlmoForCausalLM``): Llama's layer with non-parametric LayerNorms (no weights, no bias).
- GPT-Neo (``GPTNeoForCausalLM``): GPT-2's block with q/k/v without bias, learned positions, tied head, and
  ``attention_types`` alternating global and local layers (local: the last ``window_size`` keys).

Absent fields take the defaults of the family's ``transformers`` config class.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from perfmodel.graph.ir import GraphError
from perfmodel.graph.llm_config import LlmConfig, _activation, _llama, _need, _opt

MORE_TYPES = ("bloom", "mpt", "gptj", "gpt_bigcode", "phimoe", "olmo", "gpt_neo")
MLP_EXPANSION = 4  # BLOOM, GPT-J and GPTBigCode MLPs: 4 x hidden when n_inner is absent


def build_more(data: dict[str, Any], name: str, model_type: str) -> LlmConfig:
    """The config of one of ``MORE_TYPES``."""
    builders = {"bloom": _bloom, "mpt": _mpt, "gptj": _gptj, "gpt_bigcode": _bigcode, "phimoe": _phimoe,
                "olmo": _olmo, "gpt_neo": _gpt_neo}
    if model_type not in builders:
        raise GraphError("config", f"model_type {model_type!r} has no builder here; known: {', '.join(MORE_TYPES)}")
    return builders[model_type](data, name)


def _source(data: dict[str, Any]) -> str:
    return str(data.get("_source", ""))


def _bloom(data: dict[str, Any], name: str) -> LlmConfig:
    """BLOOM: ALiBi, embedding LayerNorm, biased multi-head attention and 4h GELU MLP, tied head."""
    hidden = _need(data, "hidden_size", "n_embed")
    heads = _need(data, "n_head", "num_attention_heads")
    return LlmConfig(
        name=name, family="gpt2", hidden=hidden, layers=_need(data, "n_layer", "num_hidden_layers"), heads=heads,
        kv_heads=heads, head_dim=hidden // heads, ffn=_opt(data, "n_inner", MLP_EXPANSION * hidden),
        vocab=_need(data, "vocab_size"), max_positions=_opt(data, "seq_length", 2048), norm="layernorm",
        gated_mlp=False, activation="gelu", qkv_bias=True, out_bias=True, mlp_bias=True,
        tied_embeddings=bool(data.get("tie_word_embeddings", True)), embed_norm=True, rotary_dim=0,
        notes=("bloom: ALiBi position biases (no rotary, no position table)",), source=_source(data),
    )


def _mpt(data: dict[str, Any], name: str) -> LlmConfig:
    """MPT: ALiBi (or a learned position table without it), no biases under ``no_bias``, tied head."""
    hidden, heads = _need(data, "d_model"), _need(data, "n_heads")
    raw = data.get("attn_config")
    attn: dict[str, Any] = raw if isinstance(raw, dict) else {}
    alibi = bool(attn.get("alibi", False))
    bias = not bool(data.get("no_bias", False))
    ratio = float(data.get("expansion_ratio", 4))
    if ratio <= 0:
        raise GraphError("config", f"expansion_ratio: expected > 0, got {ratio}")
    learned = not alibi and bool(data.get("learned_pos_emb", True))
    return LlmConfig(
        name=name, family="gpt2", hidden=hidden, layers=_need(data, "n_layers"), heads=heads,
        kv_heads=_opt(attn, "kv_n_heads", heads), head_dim=hidden // heads, ffn=int(ratio * hidden),
        vocab=_need(data, "vocab_size"), max_positions=_opt(data, "max_seq_len", 2048), norm="layernorm",
        norm_bias=bias, gated_mlp=False, activation="gelu", qkv_bias=bias, out_bias=bias, mlp_bias=bias,
        tied_embeddings=bool(data.get("tie_word_embeddings", True)), learned_positions=learned, rotary_dim=0,
        notes=("mpt: ALiBi position biases (no rotary, no position table)",) if alibi else (), source=_source(data),
    )


def _gptj(data: dict[str, Any], name: str) -> LlmConfig:
    """GPT-J: parallel attention and MLP under one LayerNorm, partial rotary, biased MLP and LM head."""
    hidden, heads = _need(data, "n_embd", "hidden_size"), _need(data, "n_head", "num_attention_heads")
    head_dim = hidden // heads
    rotary = _opt(data, "rotary_dim", head_dim)
    if not 0 < rotary <= head_dim:
        raise GraphError("config", f"rotary_dim: {rotary} must be in 1..{head_dim} (head_dim)")
    return LlmConfig(
        name=name, family="gpt_neox", hidden=hidden, layers=_need(data, "n_layer", "num_hidden_layers"),
        heads=heads, kv_heads=heads, head_dim=head_dim, ffn=_opt(data, "n_inner", MLP_EXPANSION * hidden),
        vocab=_need(data, "vocab_size"), max_positions=_opt(data, "n_positions", 2048), norm="layernorm",
        gated_mlp=False, activation=_activation(data, "gelu_new"), qkv_bias=False, out_bias=False, mlp_bias=True,
        head_bias=True, tied_embeddings=bool(data.get("tie_word_embeddings", False)), parallel_residual=True,
        shared_parallel_norm=True, rotary_dim=rotary, source=_source(data),
    )


def _bigcode(data: dict[str, Any], name: str) -> LlmConfig:
    """GPTBigCode: GPT-2's block with one shared K/V head under ``multi_query``, learned positions, tied head."""
    hidden, heads = _need(data, "n_embd", "hidden_size"), _need(data, "n_head", "num_attention_heads")
    return LlmConfig(
        name=name, family="gpt2", hidden=hidden, layers=_need(data, "n_layer", "num_hidden_layers"), heads=heads,
        kv_heads=1 if data.get("multi_query", True) else heads, head_dim=hidden // heads,
        ffn=_opt(data, "n_inner", MLP_EXPANSION * hidden), vocab=_need(data, "vocab_size"),
        max_positions=_opt(data, "n_positions", 1024), norm="layernorm", gated_mlp=False,
        activation=_activation(data, "gelu_pytorch_tanh"), qkv_bias=True, out_bias=True, mlp_bias=True,
        tied_embeddings=bool(data.get("tie_word_embeddings", True)), learned_positions=True, source=_source(data),
    )


def _phimoe(data: dict[str, Any], name: str) -> LlmConfig:
    """Phi-3.5-MoE: Llama's MoE layer with LayerNorms (bias), biased attention and a biased LM head."""
    cfg = _llama({"num_local_experts": 16, "num_experts_per_tok": 2, **data}, name, "phimoe")
    bias = bool(data.get("attention_bias", False))
    return replace(cfg, norm="layernorm", qkv_bias=bias, out_bias=bias, head_bias=bool(data.get("lm_head_bias", False)))


def _olmo(data: dict[str, Any], name: str) -> LlmConfig:
    """OLMo 1: Llama's layer with LayerNorms that carry no weights (``elementwise_affine=False``)."""
    cfg = _llama(data, name, "olmo")
    return replace(cfg, norm="layernorm", norm_affine=False,
                   notes=(*cfg.notes, f"olmo: q/k/v clipped at clip_qkv {data.get('clip_qkv')} (no cost difference)"))


def _neo_layers(data: dict[str, Any], layers: int) -> list[str]:
    """Each layer's attention kind from ``attention_types`` ([[["global", "local"], repeats], ...])."""
    spec = data.get("attention_types", [[["global", "local"], layers // 2]])
    kinds: list[str] = []
    try:
        for pattern, repeats in spec:
            kinds += list(pattern) * int(repeats)
    except (TypeError, ValueError) as exc:
        raise GraphError("config", f"attention_types: expected [[[kinds], repeats], ...], got {spec!r}") from exc
    if len(kinds) != layers or set(kinds) - {"global", "local"}:
        raise GraphError("config", f"attention_types: {spec!r} gives {len(kinds)} layers of {sorted(set(kinds))}, "
                                   f"expected {layers} of global / local")
    return kinds


def _gpt_neo(data: dict[str, Any], name: str) -> LlmConfig:
    """GPT-Neo: GPT-2's block, q/k/v without bias, learned positions, tied head; local layers attend to the last
    ``window_size`` keys. All-global is full attention; global / local alternating is built with every second
    layer global (GPT-Neo starts with the global one: the same count of each, the layer order swapped)."""
    hidden, layers = _need(data, "hidden_size"), _need(data, "num_layers")
    heads = _need(data, "num_heads")
    kinds = _neo_layers(data, layers)
    alternating = kinds == ["global", "local"] * (layers // 2)
    if "local" in kinds and not alternating:
        raise GraphError("config", f"attention_types: only all-global or alternating global/local layers are "
                                   f"modelled, got {kinds}")
    window = _opt(data, "window_size", 256) if alternating else 0
    notes = ("gpt_neo: local layers are the odd ones here, the even ones in GPT-Neo (same count, same cost)",)
    return LlmConfig(
        name=name, family="gpt2", hidden=hidden, layers=layers, heads=heads, kv_heads=heads,
        head_dim=hidden // heads, ffn=_opt(data, "intermediate_size", MLP_EXPANSION * hidden),
        vocab=_need(data, "vocab_size"), max_positions=_opt(data, "max_position_embeddings", 2048),
        norm="layernorm", gated_mlp=False, activation=_activation(data, "gelu_new"),
        qkv_bias=False, out_bias=True, mlp_bias=True, tied_embeddings=bool(data.get("tie_word_embeddings", True)),
        learned_positions=True, sliding_window=window, global_every=2 if window else 0,
        notes=notes if window else (), source=_source(data),
    )
