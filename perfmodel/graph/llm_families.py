"""Hugging Face LLM families whose layers differ from Llama's in more than field names: Gemma 2 / Gemma 3
(sandwich norms, GeGLU, local:global sliding windows, Gemma 3 q/k norms), gpt-oss (MoE with biases, attention
sinks, alternating windows, mxfp4 experts), Falcon (parallel attention/MLP, multi-query or grouped KV) and OPT
(learned positions offset by 2, ReLU, biases, optional embedding projection), Phi-1/1.5/2 (parallel attention and
MLP under one LayerNorm, partial rotary, biases, a biased LM head), StarCoder2 (GQA, LayerNorm, biased GELU MLP) and
OLMo 2 (Llama's layer with the norms moved onto the attention / MLP outputs and q/k norms over the full width) and
Llama 4 (MoE with a shared expert on interleaved layers, chunked attention with a global NoPE layer every 4th) and
Cohere / Command-R (parallel block under one bias-free LayerNorm, optional per-head q/k LayerNorms, tied head).

Each builder normalises one family's ``config.json`` into an :class:`LlmConfig`; defaults are those of the
family's ``transformers`` config class where a field is absent.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from perfmodel.graph.ir import GraphError
from perfmodel.graph.llm_config import LlmConfig, _activation, _llama, _need, _opt
from perfmodel.graph.llm_families_more import MORE_TYPES, build_more

OPT_POSITION_OFFSET = 2  # OPTLearnedPositionalEmbedding keeps 2 extra rows (padding offset)
# transformers' Gemma2Config / Gemma3TextConfig defaults: Gemma 3's nested text_config lists only what differs
_GEMMA_DEFAULTS: dict[str, dict[str, int]] = {
    "gemma2": {"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
               "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 4096},
    "gemma3_text": {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 4096},
}


def build_family(data: dict[str, Any], name: str, model_type: str) -> LlmConfig:
    """The config of one of ``llm_config.FAMILY_TYPES``."""
    if model_type in ("gemma2", "gemma3_text"):
        return _gemma(data, name, model_type)
    if model_type == "gpt_oss":
        return _gpt_oss(data, name)
    if model_type in ("falcon", "refinedweb", "refinedwebmodel"):  # the last two: Falcon's pre-HF config names
        return _falcon(data, name, new_arch_default=model_type == "refinedweb")
    if model_type == "opt":
        return _opt_model(data, name)
    if model_type == "phi":
        return _phi(data, name)
    if model_type == "starcoder2":
        return _starcoder2(data, name)
    if model_type == "llama4_text":
        return _llama4(data, name)
    if model_type == "cohere":
        return _cohere(data, name)
    if model_type == "olmo2":
        return replace(_llama(data, name, model_type), post_norms_only=True, qk_norm_full=True)
    if model_type in MORE_TYPES:
        return build_more(data, name, model_type)
    raise GraphError("config", f"model_type {model_type!r} has no family builder")


def _global_every(data: dict[str, Any], default: int) -> int:
    """Period of the global (full-attention) layers: from ``layer_types`` when given (it must repeat with one
    global layer per period, ending the period), else ``sliding_window_pattern`` or the family default."""
    types = data.get("layer_types")
    if isinstance(types, list) and types:
        full = [i for i, t in enumerate(types) if t == "full_attention"]
        if not full:
            return 0
        period = full[0] + 1
        if full != list(range(period - 1, len(types), period)):
            raise GraphError("config", f"layer_types: {types!r} is not a periodic local/global pattern")
        return period
    return _opt(data, "sliding_window_pattern", default)


def _gemma(data: dict[str, Any], name: str, model_type: str) -> LlmConfig:
    """Gemma 2 (local/global 1:1) and Gemma 3 text (5 local : 1 global, q/k norms); embeddings tied."""
    data = {**_GEMMA_DEFAULTS[model_type], **{k: v for k, v in data.items() if v is not None}}
    hidden, heads = _need(data, "hidden_size"), _need(data, "num_attention_heads")
    head_dim = _opt(data, "head_dim", 256)
    gemma3 = model_type == "gemma3_text"
    return LlmConfig(
        name=name, family="llama", hidden=hidden, layers=_need(data, "num_hidden_layers"), heads=heads,
        kv_heads=_opt(data, "num_key_value_heads", heads), head_dim=head_dim,
        ffn=_need(data, "intermediate_size"), vocab=_need(data, "vocab_size"),
        max_positions=_opt(data, "max_position_embeddings", 8192),
        qkv_bias=bool(data.get("attention_bias", False)), out_bias=bool(data.get("attention_bias", False)),
        tied_embeddings=bool(data.get("tie_word_embeddings", True)), rotary_dim=head_dim,
        sliding_window=_opt(data, "sliding_window", 4096), global_every=_global_every(data, 6 if gemma3 else 2),
        activation=_activation(data, "gelu_pytorch_tanh"), sandwich_norms=True, qk_norm=gemma3,
        notes=(f"{model_type}: attention scaled by query_pre_attn_scalar "
               f"{data.get('query_pre_attn_scalar', head_dim)} (no cost difference)",),
        source=str(data.get("_source", "")),
    )


def _gpt_oss(data: dict[str, Any], name: str) -> LlmConfig:
    """gpt-oss: GQA with biases and per-head sinks, banded/dense layers alternating, a biased top-k MoE."""
    hidden, heads = _need(data, "hidden_size"), _need(data, "num_attention_heads")
    experts = _need(data, "num_local_experts", "num_experts")
    ffn = _need(data, "intermediate_size")
    return LlmConfig(
        name=name, family="llama", hidden=hidden, layers=_need(data, "num_hidden_layers"), heads=heads,
        kv_heads=_opt(data, "num_key_value_heads", heads), head_dim=_opt(data, "head_dim", 64), ffn=ffn,
        vocab=_need(data, "vocab_size"), max_positions=_opt(data, "max_position_embeddings", 131072),
        qkv_bias=bool(data.get("attention_bias", True)), out_bias=bool(data.get("attention_bias", True)),
        tied_embeddings=bool(data.get("tie_word_embeddings", False)), rotary_dim=_opt(data, "head_dim", 64),
        sliding_window=_opt(data, "sliding_window", 128), global_every=_global_every(data, 2),
        experts=experts, top_k=_need(data, "num_experts_per_tok", "experts_per_token"), moe_ffn=ffn,
        attention_sinks=True, moe_bias=True, source=str(data.get("_source", "")),
    )


def _falcon(data: dict[str, Any], name: str, new_arch_default: bool = False) -> LlmConfig:
    """Falcon: parallel attention and MLP; multi-query (7B) or ``num_kv_heads`` groups with one LayerNorm per
    branch (``new_decoder_architecture``: 40B/180B); biases when ``bias``; rotary unless ALiBi."""
    hidden, heads = _need(data, "hidden_size", "n_embed"), _need(data, "num_attention_heads", "n_head")
    new_arch = bool(data.get("new_decoder_architecture", new_arch_default))
    multi_query_kv = 1 if data.get("multi_query", True) else heads
    kv = _opt(data, "num_kv_heads", _opt(data, "n_head_kv", heads)) if new_arch else multi_query_kv
    bias = bool(data.get("bias", False))
    parallel = bool(data.get("parallel_attn", True)) or new_arch
    two_norms = new_arch and _opt(data, "num_ln_in_parallel_attn", 2) == 2
    head_dim = hidden // heads
    return LlmConfig(
        name=name, family="gpt_neox", hidden=hidden, layers=_need(data, "num_hidden_layers", "n_layer"),
        heads=heads, kv_heads=kv, head_dim=head_dim, ffn=_opt(data, "ffn_hidden_size", 4 * hidden),
        vocab=_need(data, "vocab_size"), max_positions=_opt(data, "max_position_embeddings", 2048),
        norm="layernorm", gated_mlp=False, activation="gelu", qkv_bias=bias, out_bias=bias, mlp_bias=bias,
        tied_embeddings=bool(data.get("tie_word_embeddings", True)), parallel_residual=parallel,
        shared_parallel_norm=parallel and not two_norms, rotary_dim=0 if data.get("alibi") else head_dim,
        notes=("falcon: ALiBi position biases (no rotary)",) if data.get("alibi") else (),
        source=str(data.get("_source", "")),
    )


def _opt_model(data: dict[str, Any], name: str) -> LlmConfig:
    """OPT: LayerNorm, multi-head attention and ReLU MLP with biases, learned positions (+2 rows), tied head;
    ``word_embed_proj_dim`` below ``hidden_size`` adds the project_in / project_out matrices."""
    hidden, heads = _need(data, "hidden_size"), _need(data, "num_attention_heads")
    proj = _opt(data, "word_embed_proj_dim", hidden)
    bias = bool(data.get("enable_bias", True))
    return LlmConfig(
        name=name, family="gpt2", hidden=hidden, layers=_need(data, "num_hidden_layers"), heads=heads,
        kv_heads=heads, head_dim=hidden // heads, ffn=_need(data, "ffn_dim"), vocab=_need(data, "vocab_size"),
        max_positions=_opt(data, "max_position_embeddings", 2048), norm="layernorm", gated_mlp=False,
        activation=_activation(data, "relu"), qkv_bias=bias, out_bias=bias, mlp_bias=bias,
        tied_embeddings=bool(data.get("tie_word_embeddings", True)), learned_positions=True,
        position_offset=OPT_POSITION_OFFSET, embed_proj_dim=proj if proj != hidden else 0,
        source=str(data.get("_source", "")),
    )


def _phi(data: dict[str, Any], name: str) -> LlmConfig:
    """Phi-1/1.5/2 (``PhiForCausalLM``): one LayerNorm feeds attention and MLP in parallel; q/k/v, dense, fc1,
    fc2 and the LM head have biases; rotary on ``partial_rotary_factor`` of each head; optional q/k LayerNorms."""
    hidden, heads = _need(data, "hidden_size"), _need(data, "num_attention_heads")
    head_dim = hidden // heads
    rotary = int(head_dim * float(data.get("partial_rotary_factor", 0.5)))
    return LlmConfig(
        name=name, family="gpt_neox", hidden=hidden, layers=_need(data, "num_hidden_layers"), heads=heads,
        kv_heads=_opt(data, "num_key_value_heads", heads), head_dim=head_dim, ffn=_need(data, "intermediate_size"),
        vocab=_need(data, "vocab_size"), max_positions=_opt(data, "max_position_embeddings", 2048),
        norm="layernorm", gated_mlp=False, activation=_activation(data, "gelu_new"), qkv_bias=True, out_bias=True,
        mlp_bias=True, head_bias=True, tied_embeddings=bool(data.get("tie_word_embeddings", False)),
        parallel_residual=True, shared_parallel_norm=True, rotary_dim=rotary,
        qk_norm=bool(data.get("qk_layernorm", False)), source=str(data.get("_source", "")),
    )


def _starcoder2(data: dict[str, Any], name: str) -> LlmConfig:
    """StarCoder2: pre-LayerNorm blocks, grouped KV heads, a GELU MLP (c_fc, c_proj); every linear biased when
    ``use_bias``; RoPE; a sliding window when ``sliding_window`` is set."""
    hidden, heads = _need(data, "hidden_size"), _need(data, "num_attention_heads")
    head_dim = hidden // heads
    bias = bool(data.get("use_bias", True))
    return LlmConfig(
        name=name, family="gpt2", hidden=hidden, layers=_need(data, "num_hidden_layers"), heads=heads,
        kv_heads=_opt(data, "num_key_value_heads", 2), head_dim=head_dim, ffn=_need(data, "intermediate_size"),
        vocab=_need(data, "vocab_size"), max_positions=_opt(data, "max_position_embeddings", 4096),
        norm="layernorm", gated_mlp=False, activation=_activation(data, "gelu_pytorch_tanh"), qkv_bias=bias,
        out_bias=bias, mlp_bias=bias, tied_embeddings=bool(data.get("tie_word_embeddings", True)),
        rotary_dim=head_dim, sliding_window=_opt(data, "sliding_window", 0), source=str(data.get("_source", "")),
    )


def qwen_vl_vision_params(v: dict[str, Any], text_hidden: int, qwen25: bool) -> int:
    """Parameters of a Qwen2-VL / Qwen2.5-VL vision tower and its patch merger (not built, counted in notes).

    Conv3d patch embedding (no bias; ``temporal_patch_size`` x ``patch_size``^2 per channel), ``depth`` blocks of
    biased qkv / proj attention and two norms, then the merger: a norm and a 2-layer biased MLP from
    ``spatial_merge_size``^2 patches to the text width. Qwen2.5-VL: RMSNorms and a biased SwiGLU MLP of
    ``intermediate_size``, output ``out_hidden_size``; Qwen2-VL: LayerNorms and a GELU MLP of ``mlp_ratio`` x
    ``embed_dim``, output ``hidden_size``. Absent fields take the ``transformers`` vision config defaults
    (Qwen2-VL-7B's config lists only ``in_chans`` and ``spatial_patch_size``)."""
    v = {k: x for k, x in v.items() if x is not None}
    if qwen25:
        width, out, ffn = _opt(v, "hidden_size", 3584), _opt(v, "out_hidden_size", text_hidden), _opt(
            v, "intermediate_size", 3420)
        norm, mlp = width, 2 * (width * ffn + ffn) + ffn * width + width
    else:
        width, out = _opt(v, "embed_dim", 1280), _opt(v, "hidden_size", text_hidden)
        ffn = int(width * float(v.get("mlp_ratio", 4)))
        norm, mlp = 2 * width, (width * ffn + ffn) + (ffn * width + width)
    channels, temporal = _opt(v, "in_chans", _opt(v, "in_channels", 3)), _opt(v, "temporal_patch_size", 2)
    patch, depth = _opt(v, "patch_size", _opt(v, "spatial_patch_size", 14)), _opt(v, "depth", 32)
    if min(width, out, ffn, channels, temporal, patch, depth) <= 0:
        raise GraphError("config", "vision_config: sizes must be positive")
    block = 2 * norm + (width * 3 * width + 3 * width) + (width * width + width) + mlp
    merged = width * _opt(v, "spatial_merge_size", 2) ** 2
    merger = norm + (merged * merged + merged) + (merged * out + out)
    return channels * temporal * patch * patch * width + depth * block + merger


def _periodic(layers: int, flags: list[bool], field: str) -> int:
    """Period p of a per-layer pattern true exactly at layers p-1, 2p-1, ... (0: never true)."""
    hits = [i for i, f in enumerate(flags) if f]
    if not hits:
        return 0
    if len(flags) != layers or hits != list(range(hits[0], layers, hits[0] + 1)):
        raise GraphError("config", f"{field}: not a periodic pattern over {layers} layers")
    return hits[0] + 1


def _llama4(data: dict[str, Any], name: str) -> LlmConfig:
    """Llama 4 text: GQA, RMSNorm, SwiGLU; MoE layers every ``interleave_moe_layer_step`` (``moe_layers``) with
    ``num_local_experts`` of ``intermediate_size`` plus one shared expert of that size, dense layers of
    ``intermediate_size_mlp``; attention within ``attention_chunk_size`` chunks except on the NoPE layers
    (``no_rope_layers`` 0: global), modelled as a sliding window of the chunk size (an upper bound)."""
    hidden, heads, layers = _need(data, "hidden_size"), _need(data, "num_attention_heads"), _need(
        data, "num_hidden_layers")
    head_dim = _opt(data, "head_dim", hidden // heads)
    moe_ffn = _need(data, "intermediate_size")
    step = _opt(data, "interleave_moe_layer_step", 1)
    if isinstance(data.get("moe_layers"), list):
        step = _periodic(layers, [i in data["moe_layers"] for i in range(layers)], "moe_layers") or step
    nope = data.get("no_rope_layers")
    global_every = _periodic(layers, [not x for x in nope], "no_rope_layers") if isinstance(nope, list) else 4
    chunk = _opt(data, "attention_chunk_size", 0)
    return LlmConfig(
        name=name, family="llama", hidden=hidden, layers=layers, heads=heads,
        kv_heads=_opt(data, "num_key_value_heads", heads), head_dim=head_dim,
        ffn=_opt(data, "intermediate_size_mlp", moe_ffn), vocab=_need(data, "vocab_size"),
        max_positions=_opt(data, "max_position_embeddings", 4096 * 32),
        qkv_bias=bool(data.get("attention_bias", False)), out_bias=bool(data.get("attention_bias", False)),
        tied_embeddings=bool(data.get("tie_word_embeddings", False)), rotary_dim=head_dim,
        experts=_need(data, "num_local_experts"), top_k=_opt(data, "num_experts_per_tok", 1), moe_ffn=moe_ffn,
        shared_experts=1, shared_ffn=moe_ffn, moe_every=step, sliding_window=chunk,
        global_every=global_every if chunk else 0,
        notes=(f"llama4: attention in chunks of {chunk} keys costed as a sliding window of {chunk} (upper bound); "
               "L2 q/k norms and temperature tuning carry no parameters",) if chunk else (),
        source=str(data.get("_source", "")),
    )


def llama4_vision_params(v: dict[str, Any], text_hidden: int) -> int:
    """Parameters of the Llama 4 vision encoder, its pixel-shuffle adapter and the projector (not built).

    Unfolded patch embedding (no bias), class token, positions for (image/patch)^2 + 1 tokens, pre/post
    LayerNorms, ``num_hidden_layers`` blocks (biased q/k/v/o, biased GELU MLP, two LayerNorms), the adapter MLP
    (``intermediate_size`` -> ``projector_input_dim`` -> ``projector_output_dim``, no bias) and the projector
    ``vision_output_dim`` -> text width (bias when ``multi_modal_projector_bias``)."""
    v = {k: x for k, x in v.items() if x is not None}
    h, ffn, layers = _need(v, "hidden_size"), _need(v, "intermediate_size"), _need(v, "num_hidden_layers")
    patch, image, channels = _need(v, "patch_size"), _opt(v, "image_size", 336), _opt(v, "num_channels", 3)
    p_in, p_out = _opt(v, "projector_input_dim", 4096), _opt(v, "projector_output_dim", 4096)
    out = _opt(v, "vision_output_dim", p_out)
    block = 4 * (h * h + h) + (h * ffn + ffn) + (ffn * h + h) + 4 * h
    embed = channels * patch * patch * h + h + ((image // patch) ** 2 + 1) * h + 4 * h
    projector = out * text_hidden + (text_hidden if v.get("multi_modal_projector_bias") else 0)
    return embed + layers * block + ffn * p_in + p_out * p_out + projector


def pixtral_vision_params(v: dict[str, Any], text_hidden: int, merge: int, projector_bias: bool) -> int:
    """Parameters of a Pixtral vision encoder and the Mistral 3 projector (not built, counted in notes).

    Conv patch embedding (no bias), RMSNorm, ``num_hidden_layers`` blocks (two RMSNorms, q/k/v/o and a SwiGLU MLP
    of ``intermediate_size``, no biases); projector: RMSNorm, a ``merge``^2 -> 1 patch-merging matrix and a
    2-layer MLP to the text width (biased when ``multimodal_projector_bias``)."""
    v = {k: x for k, x in v.items() if x is not None}
    h, ffn, layers = _need(v, "hidden_size"), _need(v, "intermediate_size"), _need(v, "num_hidden_layers")
    patch, channels = _need(v, "patch_size"), _opt(v, "num_channels", 3)
    inner = _opt(v, "num_attention_heads", 16) * _opt(v, "head_dim", h // _opt(v, "num_attention_heads", 16))
    block = 2 * h + 4 * h * inner + 3 * h * ffn
    bias = text_hidden if projector_bias else 0
    projector = h + h * merge * merge * h + (h * text_hidden + bias) + (text_hidden * text_hidden + bias)
    return channels * patch * patch * h + h + layers * block + projector


def _cohere(data: dict[str, Any], name: str) -> LlmConfig:
    """Cohere (Command-R, Aya 23): attention and SwiGLU MLP in parallel under one LayerNorm without bias; with
    ``use_qk_norm`` a bias-free LayerNorm per query / key head (heads x head_dim weights); tied LM head scaled
    by ``logit_scale`` (no parameters)."""
    cfg = _llama(data, name, "cohere")
    return replace(cfg, family="gpt_neox", norm="layernorm", norm_bias=False, parallel_residual=True,
                   shared_parallel_norm=True, qk_norm=bool(data.get("use_qk_norm", False)),
                   qk_norm_full=bool(data.get("use_qk_norm", False)),
                   tied_embeddings=bool(data.get("tie_word_embeddings", True)),
                   notes=(*cfg.notes, f"cohere: logits scaled by logit_scale {data.get('logit_scale', 0.0625)} "
                                      "(no cost difference)"))
