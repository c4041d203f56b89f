"""Build the per-device op graph of an LLM step: prefill of S tokens, decode at KV length L, or training.

Tensor parallelism shards heads and FFN columns (Megatron layout: an all-reduce after the
attention output and the MLP down projection); pipeline parallelism assigns layers to stages
with a send between them; expert parallelism routes tokens with two all-to-alls; data
parallelism adds the (overlapped) gradient all-reduce when training. Every node records the
parameters it holds on one device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

from perfmodel.dtypes import DType, parse_dtype
from perfmodel.gc_pause import without_gc
from perfmodel.graph.ir import Graph, GraphError, Node, Stream
from perfmodel.graph.lazy_graph import Copied, LazyGraph, node_column
from perfmodel.graph.llm_config import LlmConfig
from perfmodel.graph.parallel import Parallelism, allgather, allreduce, alltoall, send, shard
from perfmodel.graph.repeat import LayerBlock, LayerCopy, RepeatPlan

Phase = Literal["prefill", "decode", "train"]
ROPE_FLOPS_PER_ELEMENT = 3.0  # x·cos + rotate(x)·sin
SILU_MUL_FLOPS = 5.0  # x·sigmoid(x)·up: negate, exp (special), add, divide, multiply
GELU_FLOPS = 8.0  # tanh approximation: cube, scale, add, tanh (special), add, multiply
# activation -> (FLOPs, transcendentals) per element, plain and gated (times the up projection)
_ACT_FLOPS = {"silu": ((4.0, 1.0), (SILU_MUL_FLOPS, 1.0)), "gelu": ((GELU_FLOPS, 1.0), (GELU_FLOPS + 1.0, 1.0)),
              "relu": ((1.0, 0.0), (2.0, 0.0))}
ADAM_FLOPS_PER_PARAM = 12.0


@dataclass(frozen=True)
class LlmWorkload:
    """One step: ``batch`` sequences; prefill of ``prompt_tokens``; decode attending to ``kv_len`` keys."""

    phase: Phase = "decode"
    batch: int = 1
    prompt_tokens: int = 2048
    kv_len: int = 2049  # keys a decode step attends to: the cache plus the new token
    dtype: str = "bf16"  # activations and GEMM inputs (fp8: W8A8 GEMMs, 16-bit elsewhere)
    weight_dtype: str | None = None  # int4/int8/fp8 weight-only quantization (None: dtype)
    kv_dtype: str | None = None  # KV-cache storage (None: activation dtype)
    attention: Literal["flash", "unfused"] = "flash"

    def __post_init__(self) -> None:
        if self.phase not in ("prefill", "decode", "train"):
            raise GraphError("workload", f"phase {self.phase!r}: expected prefill, decode or train")
        for name in ("batch", "prompt_tokens", "kv_len"):
            if int(getattr(self, name)) < 1:
                raise GraphError("workload", f"{name} must be >= 1")
        for name in ("dtype", "weight_dtype", "kv_dtype"):
            value = getattr(self, name)
            if value is not None:
                try:
                    parse_dtype(value)
                except ValueError as exc:
                    raise GraphError("workload", f"{name}: {exc}") from None

    @property
    def tokens_per_sequence(self) -> int:
        return 1 if self.phase == "decode" else self.prompt_tokens

    @property
    def keys(self) -> int:
        return self.kv_len if self.phase == "decode" else self.prompt_tokens


class _Builder:
    """Emits nodes with tensor edges; tracks layer, stage and per-device params."""

    def __init__(self, cfg: LlmConfig, w: LlmWorkload, par: Parallelism) -> None:
        self.cfg, self.w, self.par = cfg, w, par
        gemm = parse_dtype(w.dtype)
        self.gemm_dtype = gemm.value
        self.act = gemm.value if gemm.bytes >= 2 else DType.BF16.value  # fp8/int8 GEMMs keep 16-bit activations
        self.weight = parse_dtype(w.weight_dtype).value if w.weight_dtype else gemm.value
        # the workload's own choice; the config's quantization_config applies where the workload leaves it
        self.plain_gemm, self.plain_weight = self.gemm_dtype, self.weight
        self.group_size, self.scale_bytes = 0, 0.0  # quantized weights: weights per scale, scale bytes per weight
        q = cfg.quant
        self.experts_only = q is not None and q.experts_only and w.weight_dtype is None  # gpt-oss mxfp4
        self.window = cfg.sliding_window  # of the layer being built
        if q is not None and w.weight_dtype is None:
            self.weight, self.group_size, self.scale_bytes = q.weight_dtype, q.group_size, q.scale_bytes_per_weight
            if q.gemm_dtype and gemm.bytes >= 2:  # fp8 checkpoints: activations quantized on the fly (W8A8)
                self.gemm_dtype = q.gemm_dtype
        self.batch = w.batch // par.microbatches
        if self.batch * par.microbatches != w.batch:
            raise GraphError("workload", f"batch {w.batch} does not split into {par.microbatches} microbatches")
        self.tokens = self.batch * w.tokens_per_sequence
        self.pass_ = "forward_backward" if w.phase == "train" else "forward"
        self.graph = LazyGraph(name=cfg.name)  # copied layers held by reference (``add_copied``)
        self.layer, self.stage = "embed", 0

    # --- emission ---------------------------------------------------------------------------
    def emit(self, name: str, op: dict[str, Any], inputs: list[str], out_shape: tuple[int, ...] | None,
             params: int = 0, weight_dtype: str | None = None, stream: Stream = "compute",
             out_dtype: str | None = None, scale_bytes: float = 0.0) -> str:
        """Add a node; its weights are ``params`` of ``weight_dtype`` plus ``scale_bytes`` per weight."""
        full = f"{self.layer}.{name}"
        outputs: list[str] = []
        if out_shape is not None:
            outputs = [self.graph.add_tensor(f"{full}:0", out_shape, out_dtype or self.act)]
        wbytes = params * (parse_dtype(weight_dtype or self.act).bytes + scale_bytes)
        self.graph.add(Node(name=full, op=op, inputs=[x for x in inputs if x], outputs=outputs, layer=self.layer,
                            source_op="llm", stream=stream, params=params, weight_bytes=wbytes, stage=self.stage))
        return outputs[0] if outputs else (inputs[0] if inputs else "")

    def linear(self, name: str, x: str, k: int, n: int, bias: bool = False, m: int | None = None,
               batch: int = 1, per_batch_weights: bool = False, quantized: bool = True, expert: bool = False) -> str:
        """A GEMM against a weight matrix (k x n per batch entry when ``per_batch_weights``); ``quantized``:
        the config's quantization_config applies (the LM head stays unquantized; with an experts-only
        quantization, only ``expert`` GEMMs)."""
        m = self.tokens if m is None else m
        quantized = quantized and (expert or not self.experts_only)
        gemm, weight = (self.gemm_dtype, self.weight) if quantized else (self.plain_gemm, self.plain_weight)
        op: dict[str, Any] = {"kind": "matmul", "m": m, "n": n, "k": k, "dtype": gemm, "bias": bias,
                              "pass": self.pass_}
        if gemm != self.act:
            op["out_dtype"] = self.act
        if weight != gemm:
            op["weight_dtype"] = weight
            if quantized and self.group_size:
                op["group_size"] = self.group_size
        if batch > 1:
            op.update(batch=batch, b_batched=per_batch_weights)
        params = k * n * (batch if per_batch_weights else 1) + (n if bias else 0)
        return self.emit(name, op, [x], (batch * m, n) if batch > 1 else (m, n), params, weight,
                         scale_bytes=self.scale_bytes if quantized else 0.0)

    def norm(self, name: str, x: str, width: int, rows: int | None = None) -> str:
        kind = self.cfg.norm
        rows = self.tokens if rows is None else rows
        params = width * (2 if kind == "layernorm" and self.cfg.norm_bias else 1) if self.cfg.norm_affine else 0
        return self.emit(name, {"kind": kind, "shape": [rows, width], "dtype": self.act, "pass": self.pass_},
                         [x], (rows, width), params, self.act)

    def eltwise(self, name: str, inputs: list[str], shape: tuple[int, ...], flops: float = 1.0,
                transcendentals: float = 0.0) -> str:
        op = {"kind": "elementwise", "shape": list(shape), "dtype": self.act, "inputs": len(inputs),
              "flops_per_element": flops, "transcendentals_per_element": transcendentals}
        return self.emit(name, op, inputs, shape)

    def comm(self, name: str, op: dict[str, Any], x: str, stream: Stream = "comm") -> str:
        return self.emit(name, op, [x], None, stream=stream)


@without_gc
def build_llm(cfg: LlmConfig, workload: LlmWorkload, par: Parallelism | None = None,
              copy_layers: bool = True) -> Graph:
    """The graph one device runs for one step (all pipeline stages listed, each node tagged).

    ``copy_layers``: build one layer of each kind and copy it (with a plan that lets ``fuse`` fuse one
    window and copy it too); False builds every layer (the reference: both give equal graphs)."""
    par = par or Parallelism()
    b = _Builder(cfg, workload, par)
    t = par.tp
    shard(cfg.heads, t, "attention heads")
    if cfg.layers < par.pp:
        raise GraphError("parallelism", f"pp={par.pp} exceeds the {cfg.layers} layers")
    x = _embed(b)
    per_stage = math.ceil(cfg.layers / par.pp)
    copies: dict[str, LayerCopy] = {}  # one built layer per kind (dense, MoE), copied to the others
    blocks: list[LayerBlock] = []
    for i in range(cfg.layers):
        stage = i // per_stage
        if stage != b.stage:
            x = _pipeline_hop(b, x, stage)
        b.layer = f"layers.{i}"
        first = len(b.graph)
        key = "moe" if cfg.moe_layer(i) else "dense"
        b.window = cfg.window_of(i)
        if cfg.global_every and cfg.sliding_window:
            key += "-local" if b.window else "-global"
        copy = copies.get(key)
        if not copy_layers:
            x = _layer(b, x, i)
            params = sum(n.params for n in b.graph.tail(len(b.graph) - first))
        elif copy is None:
            x_in, x = x, _layer(b, x, i)
            built = b.graph.tail(len(b.graph) - first)
            copies[key] = LayerCopy(built, b.graph.tensors, i, b.stage, x_in, x)
            params = sum(n.params for n in built)
        else:  # the layer by reference: its output tensors (their names alone rendered), no nodes
            x_in, x = x, copy.output_names(i, x, b.graph.tensors)
            b.graph.add_copied(Copied(copy, i, b.stage, x_in))
            params = sum(copy.column("params"))
        _gradient_bucket(b, params, x)
        blocks.append(LayerBlock(first, len(b.graph), i, key, b.stage))
    b.layer = "head"
    _head(b, x)
    if workload.phase == "train":
        _optimizer(b)
    b.graph.meta.update(_meta(cfg, workload, par))
    b.graph.repeat = RepeatPlan.capture(b.graph, blocks, (cfg, workload, par)) if copy_layers else None
    return b.graph


def _embed(b: _Builder) -> str:
    cfg, h = b.cfg, b.cfg.hidden
    ids = b.graph.add_tensor("input_ids", (b.tokens,), "int64")
    rows = math.ceil(cfg.vocab / b.par.tp)  # vocab-parallel: each device holds a slice, then all-reduce
    width = cfg.embed_proj_dim or h
    x = b.emit("embedding", {"kind": "embedding", "table_shape": [rows, width], "num_indices": b.tokens,
                             "dtype": b.act}, [ids], (b.tokens, width), rows * width, b.act)
    x = _tp_reduce(b, "embedding_allreduce", x)
    if cfg.embed_norm:  # BLOOM: word_embeddings_layernorm
        x = b.norm("embedding_norm", x, width)
    if cfg.embed_proj_dim:  # OPT-350m: project_in
        x = b.linear("project_in", x, width, h, quantized=False)
    if cfg.learned_positions:
        table = cfg.max_positions + cfg.position_offset
        pos = b.emit("positions", {"kind": "embedding", "table_shape": [table, h],
                                   "num_indices": b.tokens, "dtype": b.act}, [ids], (b.tokens, h),
                     table * h, b.act)
        x = b.eltwise("add_positions", [x, pos], (b.tokens, h))
    return x


def _pipeline_hop(b: _Builder, x: str, stage: int) -> str:
    per_node = b.par.devices_per_node or 8
    across = (stage * b.par.tp) % per_node == 0 and b.par.tp * b.par.pp > per_node
    b.stage, b.layer = stage, f"pipeline.{stage}"
    size = b.tokens * b.cfg.hidden * parse_dtype(b.act).bytes
    hops = 2 if b.w.phase == "train" else 1  # activations forward, gradients back
    return b.comm("send", {**send(size * hops, b.act, across)}, x)


def _layer(b: _Builder, x: str, index: int) -> str:
    cfg = b.cfg
    post = cfg.sandwich_norms or cfg.post_norms_only  # Gemma 2/3, OLMo 2: attention / MLP outputs normalised
    h1 = x if cfg.post_norms_only else b.norm("input_norm", x, cfg.hidden)
    attn = _mla(b, h1) if cfg.mla else _attention(b, h1)
    if cfg.parallel_residual:  # GPT-NeoX: x + attn(ln1(x)) + mlp(ln2(x)), one all-reduce (Falcon-7B: ln1 only)
        h2 = h1 if cfg.shared_parallel_norm else b.norm("post_attention_norm", x, cfg.hidden)
        mlp = _mlp_or_moe(b, h2, index, reduce=False)
        summed = b.eltwise("parallel_residual_add", [x, attn, mlp], (b.tokens, cfg.hidden), 2.0)
        return _tp_reduce(b, "mlp_allreduce", summed)
    attn = _tp_reduce(b, "attention_allreduce", attn)
    if post:
        attn = b.norm("attention_output_norm", attn, cfg.hidden)
    x = b.eltwise("attention_residual_add", [x, attn], (b.tokens, cfg.hidden))
    h2 = x if cfg.post_norms_only else b.norm("post_attention_norm", x, cfg.hidden)
    mlp = _mlp_or_moe(b, h2, index, reduce=True)
    if post:
        mlp = b.norm("mlp_output_norm", mlp, cfg.hidden)
    return b.eltwise("mlp_residual_add", [x, mlp], (b.tokens, cfg.hidden))


def _tp_reduce(b: _Builder, name: str, x: str) -> str:
    if b.par.tp == 1:
        return x
    size = b.tokens * b.cfg.hidden * parse_dtype(b.act).bytes
    out = b.comm(name, allreduce(size, b.par.tp, b.act), x)
    if b.w.phase == "train":  # the backward of the column-parallel input is an all-reduce too
        out = b.comm(name + "_backward", allreduce(size, b.par.tp, b.act), out)
    return out


def _attention(b: _Builder, x: str) -> str:
    cfg, t, w = b.cfg, b.par.tp, b.w
    heads = cfg.heads // t
    kv = max(cfg.kv_heads // t, 1)
    hd = cfg.head_dim
    qkv = b.linear("qkv_proj", x, cfg.hidden, (heads + 2 * kv) * hd, bias=cfg.qkv_bias)
    if cfg.qk_norm_full:  # OLMo 2: one RMSNorm over all query heads together, one over all key heads
        qkv = b.norm("q_norm", qkv, heads * hd)
        qkv = b.norm("k_norm", qkv, kv * hd)
    elif cfg.qk_norm:  # Gemma 3: one RMSNorm of head_dim weights over every query head, one over every key head
        qkv = b.norm("q_norm", qkv, hd, rows=b.tokens * heads)
        qkv = b.norm("k_norm", qkv, hd, rows=b.tokens * kv)
    if cfg.rotary_dim:
        qkv = b.eltwise("rotary", [qkv], (b.tokens, (heads + kv) * cfg.rotary_dim), ROPE_FLOPS_PER_ELEMENT)
    kv_dtype = w.kv_dtype or b.act
    kv_shape = (b.tokens, 2 * kv * hd)
    b.emit("kv_cache_write", {"kind": "elementwise", "shape": list(kv_shape), "dtype": b.act,
                              "flops_per_element": 0.0}, [qkv], kv_shape, out_dtype=kv_dtype)
    o = _core_attention(b, qkv, heads, kv, hd, hd, heads if cfg.attention_sinks else 0)
    return b.linear("o_proj", o, heads * hd, cfg.hidden, bias=cfg.out_bias)


def _core_attention(b: _Builder, q: str, heads: int, kv: int, d: int, dv: int, sinks: int = 0) -> str:
    """Attention of this device's heads; ``sinks``: learned per-head logits (gpt-oss) held by the last node."""
    w = b.w
    sq, skv = w.tokens_per_sequence, w.keys
    window = b.window
    if window and sq == 1:  # decode: the newest token attends to the last ``window`` keys
        skv = min(skv, window)
    out_shape = (b.tokens, heads * dv)
    if w.attention == "unfused":
        bh = b.batch * heads
        scores = b.emit("qk_matmul", {"kind": "matmul", "batch": bh, "m": sq, "n": skv, "k": d, "dtype": b.act,
                                      "pass": b.pass_}, [q], (bh * sq, skv))
        probs = b.emit("softmax", {"kind": "softmax", "shape": [bh * sq, skv], "dtype": b.act, "pass": b.pass_},
                       [scores], (bh * sq, skv))
        return b.emit("av_matmul", {"kind": "matmul", "batch": bh, "m": sq, "n": dv, "k": skv, "dtype": b.act,
                                    "pass": b.pass_}, [probs], out_shape, sinks)
    op = {"kind": "attention", "batch": b.batch, "heads": heads, "kv_heads": kv, "seq_q": sq, "seq_kv": skv,
          "head_dim": d, "head_dim_v": dv, "causal": True, "dtype": b.act, "pass": b.pass_}
    if window and skv > window:
        # a prompt longer than the window: its first ``window`` queries attend causally, each later one to
        # exactly ``window`` keys (a band): the band runs as one unmasked (S - W) x W attention
        head = b.emit("attention", {**op, "seq_q": window, "seq_kv": window}, [q], out_shape)
        band = {**op, "seq_q": sq - window, "seq_kv": window, "causal": False}
        return b.emit("attention_window_band", band, [q, head], out_shape, sinks)
    return b.emit("attention", op, [q], out_shape, sinks)


def _mla(b: _Builder, x: str) -> str:
    """DeepSeek multi-head latent attention; decode uses the absorbed form (attends to the latent)."""
    cfg, t = b.cfg, b.par.tp
    heads = cfg.heads // t
    nope, rope, v, lora = cfg.qk_nope_dim, cfg.qk_rope_dim, cfg.v_head_dim, cfg.kv_lora_rank
    if cfg.q_lora_rank:
        q = b.linear("q_a_proj", x, cfg.hidden, cfg.q_lora_rank)
        q = b.norm("q_a_norm", q, cfg.q_lora_rank)
        q = b.linear("q_b_proj", q, cfg.q_lora_rank, heads * (nope + rope))
    else:
        q = b.linear("q_proj", x, cfg.hidden, heads * (nope + rope))
    latent = b.linear("kv_a_proj", x, cfg.hidden, lora + rope)
    latent = b.norm("kv_a_norm", latent, lora)
    b.emit("kv_cache_write", {"kind": "elementwise", "shape": [b.tokens, lora + rope], "dtype": b.act,
                              "flops_per_element": 0.0}, [latent], (b.tokens, lora + rope),
           out_dtype=b.w.kv_dtype or b.act)
    if b.w.phase == "decode":
        q = b.linear("q_absorb", q, nope, lora, m=b.tokens, batch=heads, per_batch_weights=True)
        o = _core_attention(b, q, heads, 1, lora + rope, lora)
        o = b.linear("v_absorb", o, lora, v, m=b.tokens, batch=heads, per_batch_weights=True)
    else:
        b.linear("kv_b_proj", latent, lora, heads * (nope + v))
        o = _core_attention(b, q, heads, heads, nope + rope, v)
    return b.linear("o_proj", o, heads * v, cfg.hidden)


def _mlp_or_moe(b: _Builder, x: str, index: int, reduce: bool) -> str:
    cfg = b.cfg
    if cfg.moe_layer(index):
        out = _moe(b, x)
        if cfg.shared_experts:
            shared = _mlp(b, x, cfg.shared_intermediate, "shared_")
            if cfg.shared_gate:  # Qwen2-MoE: sigmoid(x · w_gate) scales the shared expert's output
                gate = b.linear("shared_expert_gate", x, cfg.hidden, 1, quantized=False)
                shared = b.eltwise("shared_gate_mul", [shared, gate], (b.tokens, cfg.hidden), 3.0, 1.0)
            shared = _tp_reduce(b, "shared_allreduce", shared) if reduce else shared
            out = b.eltwise("shared_add", [out, shared], (b.tokens, cfg.hidden))
        return out
    out = _mlp(b, x, cfg.ffn)
    return _tp_reduce(b, "mlp_allreduce", out) if reduce else out


def _mlp(b: _Builder, x: str, ffn: int, prefix: str = "") -> str:
    cfg = b.cfg
    f = shard(ffn, b.par.tp, "intermediate size")
    flops, special = _ACT_FLOPS[cfg.activation][1 if cfg.gated_mlp else 0]
    if cfg.gated_mlp:
        up = b.linear(prefix + "gate_up_proj", x, cfg.hidden, 2 * f, bias=cfg.mlp_bias)
        act = b.eltwise(prefix + f"{cfg.activation}_mul", [up, up], (b.tokens, f), flops, special)
    else:
        up = b.linear(prefix + "fc1", x, cfg.hidden, f, bias=cfg.mlp_bias)
        act = b.eltwise(prefix + cfg.activation, [up], (b.tokens, f), flops, special)
    return b.linear(prefix + "down_proj" if cfg.gated_mlp else prefix + "fc2", act, f, cfg.hidden,
                    bias=cfg.mlp_bias)


def active_experts(experts: float, top_k: int, tokens: float) -> float:
    """Expected experts that receive at least one of ``tokens`` tokens (uniform routing)."""
    return float(experts * (1.0 - (1.0 - top_k / experts) ** tokens)) if tokens > 0 else 0.0


def _moe(b: _Builder, x: str) -> str:
    """Router, top-k, expert GEMMs over the experts that get tokens; all-to-all under EP."""
    cfg, par = b.cfg, b.par
    e, k, h = cfg.experts, cfg.top_k, cfg.hidden
    logits = b.linear("router", x, h, e, bias=cfg.moe_bias)
    b.emit("router_softmax", {"kind": "softmax", "shape": [b.tokens, e], "dtype": b.act, "pass": b.pass_},
           [logits], (b.tokens, e))
    elem = parse_dtype(b.act).bytes
    if par.ep == 1:
        local_e, own, f = e, b.tokens, shard(cfg.moe_ffn, par.tp, "expert intermediate size")
        group_tokens = own
    else:
        local_e, f = shard(e, par.ep, "experts"), cfg.moe_ffn
        own = math.ceil(b.tokens / par.tp) if par.tp > 1 else b.tokens
        group_tokens = own * par.ep
        x = b.comm("dispatch_alltoall", alltoall(own * k * h * elem, par.ep, b.act), x)
    active = max(1, round(active_experts(local_e * par.ep if par.ep > 1 else e, k, group_tokens)
                          / (par.ep if par.ep > 1 else 1)))
    active = min(active, local_e)
    m = max(1, math.ceil(own * k / active))
    bias = cfg.moe_bias  # gpt-oss: a bias per expert output column
    up = b.linear("experts_gate_up", x, h, 2 * f, m=m, batch=active, per_batch_weights=True, bias=bias, expert=True)
    _fix_params(b, local_e * (h + int(bias)) * 2 * f)
    flops, special = _ACT_FLOPS[cfg.activation][1]
    act = b.eltwise(f"experts_{cfg.activation}_mul", [up, up], (active * m, f), flops, special)
    out = b.linear("experts_down", act, f, h, m=m, batch=active, per_batch_weights=True, bias=bias, expert=True)
    _fix_params(b, local_e * (f + int(bias)) * h)
    out = b.eltwise("experts_combine", [out], (b.tokens, h), float(k))
    if par.ep > 1:
        out = b.comm("combine_alltoall", alltoall(own * k * h * elem, par.ep, b.act), out)
        if par.tp > 1:
            out = b.comm("experts_allgather", allgather(b.tokens * h * elem, par.tp, b.act), out)
    elif par.tp > 1:
        out = _tp_reduce(b, "experts_allreduce", out)
    return out


def _fix_params(b: _Builder, params: int) -> None:
    """Experts that get no token still hold their weights: charge all local experts."""
    node = b.graph.tail(1)[0]
    node.params = params
    node.weight_bytes = params * (parse_dtype(b.weight).bytes + b.scale_bytes)


def _head(b: _Builder, x: str) -> None:
    cfg, t = b.cfg, b.par.tp
    x = b.norm("final_norm", x, cfg.hidden)
    rows = b.tokens if b.w.phase == "train" else b.batch  # inference computes the last token's logits
    vocab = math.ceil(cfg.vocab / t)
    width = cfg.hidden
    if cfg.embed_proj_dim:  # OPT-350m: project_out to the embedding width
        width = cfg.embed_proj_dim
        x = b.linear("project_out", x, cfg.hidden, width, m=rows, quantized=False)
    logits = b.linear("lm_head", x, width, vocab, m=rows, quantized=False, bias=cfg.head_bias)
    if cfg.tied_embeddings and b.par.pp == 1:
        node = b.graph.tail(1)[0]
        node.params, node.weight_bytes = 0, 0.0  # shares the embedding table
    if t > 1:
        b.comm("logits_allgather", allgather(rows * cfg.vocab * parse_dtype(b.act).bytes, t, b.act), logits)


def _gradient_bucket(b: _Builder, params: int, x: str) -> None:
    """Training with dp > 1: all-reduce this layer's gradients (``params`` of them on this device), overlapped
    with the compute that follows."""
    if b.w.phase != "train" or b.par.dp == 1:
        return
    if params:
        b.comm("gradient_allreduce", allreduce(params * parse_dtype(b.act).bytes, b.par.dp, b.act), x,
               stream="comm_overlap")


def _optimizer(b: _Builder) -> None:
    """Adam step over this device's parameters (embedding and head gradients all-reduced first)."""
    by_stage: dict[int, int] = {}
    for stage, params in zip(node_column(b.graph, "stage"), node_column(b.graph, "params"), strict=True):
        by_stage[stage] = by_stage.get(stage, 0) + params
    rest = [n for n in b.graph.built() if not n.layer.startswith("layers.")]  # copied layers are all "layers."
    for stage, params in sorted(by_stage.items()):
        b.stage, b.layer = stage, f"optimizer.{stage}"
        _gradient_bucket(b, sum(n.params for n in rest if n.stage == stage), "")
        b.emit("adam", {"kind": "elementwise", "shape": [params], "dtype": "fp32", "inputs": 4, "outputs": 3,
                        "flops_per_element": ADAM_FLOPS_PER_PARAM, "transcendentals_per_element": 1.0}, [], None)


def _meta(cfg: LlmConfig, w: LlmWorkload, par: Parallelism) -> dict[str, Any]:
    return {"kind": "llm", "model": cfg.name, "phase": w.phase, "batch": w.batch,
            "prompt_tokens": w.prompt_tokens, "kv_len": w.kv_len, "dtype": w.dtype,
            "weight_dtype": w.weight_dtype or (cfg.quant.weight_dtype if cfg.quant else w.dtype),
            "quantization": cfg.quant.method if cfg.quant and not w.weight_dtype else None,
            "config_notes": list(cfg.notes), "kv_dtype": w.kv_dtype or w.dtype,
            "attention": w.attention, "tokens_per_step": w.batch * w.tokens_per_sequence,
            "parallelism": par.to_json(), "layers": cfg.layers, "hidden": cfg.hidden,
            "kv_elements_per_token_layer": cfg.kv_elements_per_token_layer(), "source": cfg.source}


def with_phase(w: LlmWorkload, phase: Phase) -> LlmWorkload:
    return replace(w, phase=phase)
