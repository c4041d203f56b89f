"""Hugging Face ``config.json``-style LLM configs: Llama/Mistral/Qwen, Gemma, GPT-2/NeoX, Mixtral, Qwen2-MoE,
DeepSeek MLA.

``LlmConfig.from_hf(dict)`` normalises the field names of each family; ``bundled(name)`` loads a
config shipped in ``perfmodel/graph/configs/`` (each cites its source in ``_source``). A multimodal config
(``text_config`` / ``vision_config``: PaliGemma, LLaVA) builds its text model and notes what it leaves out;
a ``quantization_config`` (``hf_quant``) sets how the linear weights are stored; a ``model_type`` the
importer does not know is refused with the list it knows (set ``"model_type": "llama"`` to build it as one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from perfmodel.graph.hf_quant import WeightQuant, parse_quantization
from perfmodel.graph.ir import GraphError

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
Family = Literal["llama", "gpt2", "gpt_neox", "deepseek"]
# decoder-only types with Llama's layer (pre-norm, GQA, gated MLP, RoPE); their differences are fields below
# (Granite's embedding / attention / residual / logit multipliers scale activations and change no parameter)
_LLAMA_TYPES = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "gemma", "phi3", "granite")
_TIED_BY_DEFAULT = ("gemma",)  # types whose HF config class defaults tie_word_embeddings to True
# multimodal -> text model type; Qwen2-VL / Qwen2.5-VL may also keep the text fields at the top level
_TEXT_OF = {"paligemma": "gemma", "llava": "llama", "gemma3": "gemma3_text", "qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2",
            "llama4": "llama4_text", "mistral3": "mistral"}
_TEXT_ALIASES = {"qwen2_vl_text": "qwen2", "qwen2_5_vl_text": "qwen2"}  # nested text model types built as another
FAMILY_TYPES = ("gemma2", "gemma3_text", "gpt_oss", "falcon", "refinedweb", "refinedwebmodel", "opt",  # llm_families
                "phi", "starcoder2", "olmo2", "llama4_text", "cohere",
                "bloom", "mpt", "gptj", "gpt_bigcode", "phimoe", "olmo", "gpt_neo")  # the last 7: llm_families_more
MAX_LAYERS = 10_000  # the deepest published decoders have ~100-200 layers; each layer is built as graph nodes
MAX_CONFIG_VALUE = 2**40  # a size past this is no real model (the ops refuse such dimensions too: MAX_DIMENSION)
KNOWN_TYPES = (*_LLAMA_TYPES, "gpt2", "gpt_neox", "deepseek_v2", "deepseek_v3", *FAMILY_TYPES, *_TEXT_OF)


@dataclass(frozen=True)
class LlmConfig:
    """A decoder-only transformer's shape (counts of elements, not bytes)."""

    name: str
    family: Family
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    max_positions: int
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    norm_bias: bool = True  # LayerNorms hold a bias (Cohere's do not)
    norm_affine: bool = True  # norms hold weights (OLMo 1's LayerNorm is non-parametric)
    embed_norm: bool = False  # BLOOM: a LayerNorm right after the word embeddings
    gated_mlp: bool = True  # SwiGLU (gate, up, down) vs GELU MLP (fc1, fc2)
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    tied_embeddings: bool = False
    learned_positions: bool = False
    parallel_residual: bool = False
    rotary_dim: int = 0  # per head; 0: no rotary embedding
    sliding_window: int = 0  # keys each query attends to at most (Mistral v0.1); 0: full attention
    global_every: int = 0  # with a window: layer i attends globally when (i + 1) % global_every == 0 (0: none)
    activation: Literal["silu", "gelu", "relu"] = "silu"  # of the MLP (gated: SwiGLU / GeGLU)
    sandwich_norms: bool = False  # Gemma 2/3: RMSNorms on the attention and MLP outputs too (4 per layer)
    qk_norm: bool = False  # Gemma 3: RMSNorm (head_dim weights) on each query and key head
    qk_norm_full: bool = False  # OLMo 2: the q/k norms span the whole projection (heads x head_dim weights)
    post_norms_only: bool = False  # OLMo 2: no pre-norms; the attention and MLP outputs are normalised instead
    attention_sinks: bool = False  # gpt-oss: one learned logit per head joins each softmax
    moe_bias: bool = False  # gpt-oss: biases on the router and the expert projections
    shared_parallel_norm: bool = False  # Falcon-7B: one LayerNorm feeds both parallel branches
    head_bias: bool = False  # Phi-2: the LM head has a bias (vocab parameters)
    position_offset: int = 0  # OPT: the learned position table has max_positions + offset rows
    embed_proj_dim: int = 0  # OPT-350m: embeddings of this width, projected in and out of hidden (0: hidden)
    experts: int = 0  # routed experts (0: dense)
    top_k: int = 0
    moe_ffn: int = 0
    shared_experts: int = 0
    shared_ffn: int = 0  # intermediate size of the shared expert(s) together (0: shared_experts x moe_ffn)
    shared_gate: bool = False  # Qwen2-MoE: a sigmoid gate (hidden -> 1) scales the shared expert
    dense_layers: int = 0  # leading layers with a dense MLP in an MoE model
    moe_every: int = 1  # Llama 4: layer i (past dense_layers) is MoE when (i + 1) % moe_every == 0, else dense
    q_lora_rank: int = 0  # MLA (DeepSeek-V2/V3); kv_lora_rank > 0 turns MLA on
    kv_lora_rank: int = 0
    qk_nope_dim: int = 0
    qk_rope_dim: int = 0
    v_head_dim: int = 0
    quant: WeightQuant | None = None  # quantization_config: stored linear weights and the GEMM dtype
    extra_params: int = 0  # parameters of parts not built (a vision tower), counted in notes only
    notes: tuple[str, ...] = ()  # what the import left out or assumed
    source: str = ""

    def __post_init__(self) -> None:
        for field, value in (("hidden_size", self.hidden), ("num_hidden_layers", self.layers),
                             ("num_attention_heads", self.heads), ("num_key_value_heads", self.kv_heads),
                             ("vocab_size", self.vocab)):
            if value <= 0:
                raise GraphError("config", f"{field}: expected a positive integer, got {value}")
        if self.layers > MAX_LAYERS:
            raise GraphError("config", f"num_hidden_layers: {self.layers} is more than the {MAX_LAYERS:,} layers the "
                                       "importer builds (one graph layer each)")
        if self.heads % self.kv_heads:
            raise GraphError("config", f"num_key_value_heads: {self.kv_heads} does not divide "
                                       f"num_attention_heads {self.heads}")
        if self.experts and not 0 < self.top_k <= self.experts:
            raise GraphError("config", f"num_experts_per_tok: {self.top_k} must be in 1..{self.experts} experts")
        if self.experts and self.moe_ffn <= 0:
            raise GraphError("config", "moe_intermediate_size: an MoE model needs a positive expert size")
        if self.sliding_window < 0:
            raise GraphError("config", f"sliding_window: expected >= 0, got {self.sliding_window}")
        if self.global_every < 0:
            raise GraphError("config", f"sliding_window_pattern: expected >= 0, got {self.global_every}")
        if self.moe_every < 1:
            raise GraphError("config", f"interleave_moe_layer_step: expected >= 1, got {self.moe_every}")
        if self.dense_layers > self.layers:
            raise GraphError("config", f"first_k_dense_replace: {self.dense_layers} exceeds {self.layers} layers")

    @property
    def shared_intermediate(self) -> int:
        """Intermediate width of the shared expert(s) together."""
        return self.shared_ffn or self.shared_experts * self.moe_ffn

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe(self) -> bool:
        return self.experts > 0

    def moe_layer(self, layer: int) -> bool:
        """Whether ``layer`` routes to experts (the rest run the dense MLP of ``ffn``)."""
        return self.moe and layer >= self.dense_layers and (layer + 1) % self.moe_every == 0

    @property
    def moe_layer_count(self) -> int:
        """Layers that route to experts (``moe_layer``); the other ``layers - moe_layer_count`` run ``ffn``."""
        return sum(1 for layer in range(self.layers) if self.moe_layer(layer))

    def window_of(self, layer: int) -> int:
        """Keys a query of ``layer`` attends to at most (0: all)."""
        if self.global_every and (layer + 1) % self.global_every == 0:
            return 0
        return self.sliding_window

    def kv_elements_per_token_layer(self) -> int:
        """KV-cache elements one token adds in one layer (MLA caches the compressed latent)."""
        if self.mla:
            return self.kv_lora_rank + self.qk_rope_dim
        return 2 * self.kv_heads * self.head_dim

    @staticmethod
    def from_hf(data: dict[str, Any], name: str | None = None) -> LlmConfig:
        """Normalise a Hugging Face config dict; errors name the missing field."""
        if not isinstance(data, dict):
            raise GraphError("config", "expected a JSON object")
        model_type = str(data.get("model_type", "llama")).lower()
        label = name or str(data.get("_name_or_path") or model_type)
        notes: list[str] = []
        try:
            return _from_hf(data, model_type, label, notes)
        except (TypeError, ZeroDivisionError, OverflowError, AttributeError) as exc:  # a field of the wrong type
            raise GraphError("config", f"malformed config.json: {type(exc).__name__}: {exc}") from exc


def _from_hf(data: dict[str, Any], model_type: str, label: str, notes: list[str]) -> LlmConfig:
    """``from_hf`` once the type and the label are known: a nested text model, the quantization, the family."""
    extra = 0
    flat_vl = model_type in _TEXT_OF and isinstance(data.get("vision_config"), dict)
    if isinstance(data.get("text_config"), dict) or flat_vl:  # multimodal: build the text model
        data, model_type, extra = _text_model(data, model_type, notes)
    quant = parse_quantization(data.get("quantization_config"))
    if quant is not None:
        notes.append(f"quantization_config {quant.method}: linear weights {quant.weight_dtype}, "
                     f"{quant.scale_bytes_per_group:g} scale bytes per {quant.group_size} weights"
                     + (f", GEMMs in {quant.gemm_dtype}" if quant.gemm_dtype else "")
                     + ("; MoE experts only" if quant.experts_only else "")
                     + "; embeddings and the LM head unquantized")
    cfg = _build(data, label, model_type)
    return replace(cfg, quant=quant, extra_params=extra, notes=(*cfg.notes, *notes))


def _build(data: dict[str, Any], label: str, model_type: str) -> LlmConfig:
    if model_type == "gpt2":
        return _gpt2(data, label)
    if model_type == "gpt_neox":
        return _neox(data, label)
    if model_type.startswith("deepseek"):
        return _deepseek(data, label)
    if model_type in _LLAMA_TYPES:
        return _llama(data, label, model_type)
    if model_type in FAMILY_TYPES:
        from perfmodel.graph.llm_families import build_family  # imports this module's helpers

        return build_family(data, label, model_type)
    raise GraphError("config", f"model_type {model_type!r} is not supported; known: {', '.join(KNOWN_TYPES)} "
                               "(a Llama-shaped model can be built as one with \"model_type\": \"llama\")")


def _text_model(data: dict[str, Any], model_type: str, notes: list[str]) -> tuple[dict[str, Any], str, int]:
    """The text config of a multimodal one (top-level quantization and tying carry over), its type, and the
    parameters of the vision tower and projector that are not built."""
    if isinstance(data.get("text_config"), dict):
        text = dict(data["text_config"])
    else:  # Qwen2-VL style: the text model's fields at the top level beside vision_config
        text = {k: v for k, v in data.items() if k not in ("vision_config", "model_type")}
    for key in ("quantization_config", "tie_word_embeddings", "_source"):
        if key in data and key not in text:
            text[key] = data[key]
    text_type = str(text.get("model_type") or _TEXT_OF.get(model_type, "")).lower()
    text_type = _TEXT_ALIASES.get(text_type, text_type)
    if not text_type:
        raise GraphError("config", f"text_config.model_type: missing, and {model_type!r} has no known text model")
    text["model_type"] = text_type
    vision = data.get("vision_config")
    extra = 0
    if isinstance(vision, dict):
        if model_type in ("qwen2_vl", "qwen2_5_vl"):
            from perfmodel.graph.llm_families import qwen_vl_vision_params

            extra = qwen_vl_vision_params(vision, _need(text, "hidden_size"), model_type == "qwen2_5_vl")
        elif model_type == "llama4":
            from perfmodel.graph.llm_families import llama4_vision_params

            extra = llama4_vision_params(vision, _need(text, "hidden_size"))
        elif model_type == "mistral3":
            from perfmodel.graph.llm_families import pixtral_vision_params

            extra = pixtral_vision_params(vision, _need(text, "hidden_size"), _opt(data, "spatial_merge_size", 2),
                                          bool(data.get("multimodal_projector_bias", False)))
        else:
            extra = _vit_params(vision) + int(vision.get("hidden_size", 0)) * int(text.get("hidden_size", 0))
        notes.append(f"{model_type}: the text model ({text_type}) is built; the vision tower "
                     f"({vision.get('model_type', 'vision')}, {extra:,} parameters with its projector) is not")
    return text, text_type, extra


def _vit_params(v: dict[str, Any]) -> int:
    """A ViT / SigLIP encoder's parameters: patch embedding, positions, layers (attention, MLP, 2 LayerNorms),
    final LayerNorm."""
    h, ffn = _need(v, "hidden_size"), _need(v, "intermediate_size")
    layers, patch = _need(v, "num_hidden_layers"), _need(v, "patch_size")
    image, channels = _opt(v, "image_size", 224), _opt(v, "num_channels", 3)
    layer = 4 * (h * h + h) + (h * ffn + ffn) + (ffn * h + h) + 4 * h
    return channels * patch * patch * h + h + (image // patch) ** 2 * h + layers * layer + 2 * h


def _need(data: dict[str, Any], *keys: str) -> int:
    for key in keys:
        value = data.get(key)
        if value is not None:
            if not isinstance(value, int | float) or not 0 < value <= MAX_CONFIG_VALUE:  # NaN fails too
                raise GraphError("config", f"{key}: expected a positive integer up to {MAX_CONFIG_VALUE:g}, "
                                           f"got {value!r}")
            return int(value)
    raise GraphError("config", f"missing field {keys[0]!r}")


def _opt(data: dict[str, Any], key: str, default: int) -> int:
    value = data.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise GraphError("config", f"{key}: expected a number, got {value!r}")
    if value is not None and not -MAX_CONFIG_VALUE <= value <= MAX_CONFIG_VALUE:  # 1e308 or NaN: int() raised or
        raise GraphError("config", f"{key}: {value!r} is not a size up to {MAX_CONFIG_VALUE:g}")  # overflowed later
    return default if value is None else int(value)


def _llama(data: dict[str, Any], name: str, model_type: str) -> LlmConfig:
    hidden, heads = _need(data, "hidden_size"), _need(data, "num_attention_heads")
    if "head_dim" not in data and hidden % heads:
        raise GraphError("config", f"hidden_size: {hidden} is not a multiple of num_attention_heads {heads} "
                                   "and no head_dim is given")
    head_dim = _opt(data, "head_dim", hidden // heads)
    experts = _opt(data, "num_local_experts", _opt(data, "num_experts", 0))
    shared_ffn = _opt(data, "shared_expert_intermediate_size", 0) if experts else 0
    return LlmConfig(
        name=name, family="llama", hidden=hidden, layers=_need(data, "num_hidden_layers"), heads=heads,
        kv_heads=_opt(data, "num_key_value_heads", heads), head_dim=head_dim,
        ffn=_need(data, "intermediate_size"), vocab=_need(data, "vocab_size"),
        max_positions=_opt(data, "max_position_embeddings", 4096),
        qkv_bias=bool(data.get("attention_bias", model_type.startswith("qwen2"))),
        out_bias=bool(data.get("attention_bias", False)), mlp_bias=bool(data.get("mlp_bias", False)),
        tied_embeddings=bool(data.get("tie_word_embeddings", model_type in _TIED_BY_DEFAULT)), rotary_dim=head_dim,
        experts=experts, top_k=_opt(data, "num_experts_per_tok", 2 if experts else 0),
        moe_ffn=_opt(data, "moe_intermediate_size", _need(data, "intermediate_size")) if experts else 0,
        shared_experts=1 if shared_ffn else 0, shared_ffn=shared_ffn, shared_gate=bool(shared_ffn),
        sliding_window=_opt(data, "sliding_window", 0) if data.get("use_sliding_window", True) else 0,
        activation=_activation(data), source=str(data.get("_source", "")),
    )


def _activation(data: dict[str, Any], default: str = "silu") -> Literal["silu", "gelu", "relu"]:
    """The MLP's activation from ``hidden_activation`` / ``hidden_act`` / ``activation_function``."""
    act = str(data.get("hidden_activation") or data.get("hidden_act") or data.get("activation_function")
              or default).lower()
    if "gelu" in act:
        return "gelu"
    return "relu" if "relu" in act else "silu"


def _gpt2(data: dict[str, Any], name: str) -> LlmConfig:
    hidden, heads = _need(data, "n_embd", "hidden_size"), _need(data, "n_head", "num_attention_heads")
    return LlmConfig(
        name=name, family="gpt2", hidden=hidden, layers=_need(data, "n_layer", "num_hidden_layers"),
        heads=heads, kv_heads=heads, head_dim=hidden // heads, ffn=_opt(data, "n_inner", 4 * hidden),
        vocab=_need(data, "vocab_size"), max_positions=_opt(data, "n_positions", 1024), norm="layernorm",
        gated_mlp=False, activation="gelu", qkv_bias=True, out_bias=True, mlp_bias=True,
        tied_embeddings=bool(data.get("tie_word_embeddings", True)), learned_positions=True,
        source=str(data.get("_source", "")),
    )


def _neox(data: dict[str, Any], name: str) -> LlmConfig:
    hidden, heads = _need(data, "hidden_size"), _need(data, "num_attention_heads")
    head_dim = hidden // heads
    return LlmConfig(
        name=name, family="gpt_neox", hidden=hidden, layers=_need(data, "num_hidden_layers"), heads=heads,
        kv_heads=heads, head_dim=head_dim, ffn=_opt(data, "intermediate_size", 4 * hidden),
        vocab=_need(data, "vocab_size"), max_positions=_opt(data, "max_position_embeddings", 2048),
        norm="layernorm", gated_mlp=False, activation="gelu", qkv_bias=True, out_bias=True, mlp_bias=True,
        tied_embeddings=bool(data.get("tie_word_embeddings", False)),
        parallel_residual=bool(data.get("use_parallel_residual", True)),
        rotary_dim=int(head_dim * float(data.get("rotary_pct", 0.25))), source=str(data.get("_source", "")),
    )


def _deepseek(data: dict[str, Any], name: str) -> LlmConfig:
    hidden, heads = _need(data, "hidden_size"), _need(data, "num_attention_heads")
    nope, rope = _opt(data, "qk_nope_head_dim", 128), _opt(data, "qk_rope_head_dim", 64)
    experts = _opt(data, "n_routed_experts", 0)
    return LlmConfig(
        name=name, family="deepseek", hidden=hidden, layers=_need(data, "num_hidden_layers"), heads=heads,
        kv_heads=heads, head_dim=nope + rope, ffn=_need(data, "intermediate_size"),
        vocab=_need(data, "vocab_size"), max_positions=_opt(data, "max_position_embeddings", 4096),
        tied_embeddings=bool(data.get("tie_word_embeddings", False)), rotary_dim=rope,
        experts=experts, top_k=_opt(data, "num_experts_per_tok", 0),
        moe_ffn=_opt(data, "moe_intermediate_size", 0), shared_experts=_opt(data, "n_shared_experts", 0),
        dense_layers=_opt(data, "first_k_dense_replace", 0) if experts else 0,
        q_lora_rank=_opt(data, "q_lora_rank", 0), kv_lora_rank=_need(data, "kv_lora_rank"),
        qk_nope_dim=nope, qk_rope_dim=rope, v_head_dim=_opt(data, "v_head_dim", nope),
        source=str(data.get("_source", "")),
    )


def bundled_names() -> list[str]:
    """Names of the configs shipped with the package."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.json"))


def bundled(name: str) -> LlmConfig:
    """A shipped config by name (``llama-3-70b``, ``gpt2``...)."""
    path = CONFIG_DIR / f"{name.lower()}.json"
    if not path.is_file():
        raise GraphError("model", f"unknown model {name!r}; bundled: {', '.join(bundled_names())}")
    return LlmConfig.from_hf(json.loads(path.read_text()), name.lower())
