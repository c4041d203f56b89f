"""Per-layer costs of one micro-batch from the op model, once per (tp, cp, micro-batch, ep).

A probe builds the training graph of the model cut to its distinct layers (a dense layer, and an
MoE layer where the config has both) on one device of a tp (and ep) group, for a micro-batch of
``micro_batch`` sequences of seq/cp tokens, and costs every node with ``predict_many`` — all
probes' distinct ops in one call. Attention under context parallelism: each rank's own kernels
(``cp_attention.rank_calls``: the causal load balance's chunks, ring steps or all-gathered prefixes),
the slowest rank's time; an attention the op model has no per-rank shapes for (unfused) is the probe's
s/cp-token attention times cp (the same causal work, s²/(2·cp) per rank).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from perfmodel.graph.ir import Graph, GraphError, Node
from perfmodel.graph.llm_build import ADAM_FLOPS_PER_PARAM, LlmWorkload, build_llm
from perfmodel.graph.llm_config import LlmConfig
from perfmodel.graph.parallel import Parallelism
from perfmodel.hardware import Hardware
from perfmodel.roofline import predict_many, predict_valid
from perfmodel.training.attention_kernel import attention_device
from perfmodel.training.cp_attention import rank_calls

ATTENTION_KINDS = ("attention",)
ATTENTION_NAMES = ("qk_matmul", "softmax", "av_matmul", "attention", "attention_window_band", "attention_dropout")
DROPOUT_FLOPS = 2.0  # compare a random number with the keep probability, scale the kept value
EXPERT_MARK = ".experts_"  # llm_build's routed-expert GEMMs (experts_gate_up, experts_down)
VOCAB_GATHER = "logits_allgather"  # training keeps logits vocab-parallel (Megatron's cross-entropy): no gather
ADAM_PROBE_PARAMS = 100_000_000  # one Adam step of this many fp32 parameters gives seconds per parameter
STREAM_PROBE_BYTES_PER_ELEMENT = 8.0  # the stream probe reads and writes one fp32 value per element
# an element-wise op's backward reads the output gradient and its saved inputs and writes the input gradients:
# about twice the forward's traffic, so forward + backward = 3 x forward
ELEMENTWISE_FORWARD_BACKWARD = 3.0


@dataclass(frozen=True)
class ProbeKey:
    tp: int
    cp: int
    micro_batch: int
    ep: int = 1


@dataclass(frozen=True)
class LayerCosts:
    """One micro-batch on one device, seconds (per layer: averaged over the model's layers)."""

    layer_s: float  # compute of forward + backward
    layer_forward_s: float  # compute of the forward (what full recomputation repeats)
    attention_s: float  # core attention forward + backward (cp-scaled)
    attention_forward_s: float  # what selective recomputation repeats
    tp_comm_s: float  # blocking collectives (tp all-reduces, ep all-to-alls), forward + backward
    tp_comm_forward_s: float
    layer_params: float  # parameters of one layer on this device
    embed_s: float
    head_s: float  # final norm, LM head and its all-gather, forward + backward
    embed_params: float
    head_params: float
    expert_params: float = 0.0  # of layer_params: routed experts' (their data-parallel group is dp·cp / ep)


RankSlots = list[list[tuple[int, int, int]]]  # per context-parallel rank: (forward+backward slot, forward slot, count)
Row = tuple[Node, int, int, RankSlots | None]


@dataclass(frozen=True)
class CostTable:
    """Every probe's ``LayerCosts`` plus the device's Adam seconds per parameter."""

    probes: dict[ProbeKey, LayerCosts | str]  # a string: why the probe cannot be built
    adam_s_per_param: float
    stream_s_per_byte: float = 0.0  # a streaming element-wise kernel's DRAM seconds per byte moved


def probe_config(cfg: LlmConfig) -> tuple[LlmConfig, list[float]]:
    """The config cut to its distinct layers and each kept layer's share of the full model's layers: a dense
    layer (leading ``dense_layers`` or between interleaved MoE layers, ``moe_every``) and an MoE layer."""
    moe_layers = cfg.moe_layer_count
    if cfg.moe and 0 < moe_layers < cfg.layers:
        cut = replace(cfg, layers=cfg.dense_layers + cfg.moe_every)
        kinds = [cut.moe_layer(layer) for layer in range(cut.layers)]
        shares = [0.0] * cut.layers
        shares[kinds.index(False)] = (cfg.layers - moe_layers) / cfg.layers
        shares[kinds.index(True)] = moe_layers / cfg.layers
        return cut, shares
    return replace(cfg, layers=1, dense_layers=0), [1.0]


def _probe_graph(cfg: LlmConfig, key: ProbeKey, seq_len: int, dtype: str, flash: bool) -> Graph:
    cut, _ = probe_config(cfg)
    if seq_len % key.cp:
        raise GraphError("layout", f"sequence length {seq_len} is not divisible by cp={key.cp}")
    dp = key.ep if key.ep > 1 and key.tp == 1 else 1
    par = Parallelism(tp=key.tp, dp=dp, ep=key.ep)
    work = LlmWorkload(phase="train", batch=key.micro_batch, prompt_tokens=seq_len // key.cp, dtype=dtype,
                       attention="flash" if flash else "unfused")
    return build_llm(cut, work, par)


def _forward(op: dict[str, Any]) -> dict[str, Any]:
    return {**op, "pass": "forward"} if op.get("pass") == "forward_backward" else op


def _is_attention(node: Node) -> bool:
    return node.name.rsplit(".", 1)[-1] in ATTENTION_NAMES


def dropout_nodes(cfg: LlmConfig, key: ProbeKey, seq_len: int, flash: bool, sequence_parallel: bool) -> list[Node]:
    """GPT-style dropout, which the inference graph has no node for: after the attention output and the MLP
    (one row per token, sharded over tp with sequence parallelism) and, without flash attention, on the
    attention probabilities (heads/tp x s x s per sequence; flash attention regenerates its mask in-kernel).
    Each writes its output and its mask."""
    tokens = key.micro_batch * (seq_len // key.cp)
    width = cfg.hidden // key.tp if sequence_parallel else cfg.hidden
    out = []
    cut, _ = probe_config(cfg)
    for i in range(cut.layers):
        shapes = [("hidden_dropout_attention", [tokens, width]), ("hidden_dropout_mlp", [tokens, width])]
        if not flash:
            rows = key.micro_batch * max(cfg.heads // key.tp, 1) * (seq_len // key.cp)
            shapes.append(("attention_dropout", [rows, seq_len // key.cp]))
        for name, shape in shapes:
            op = {"kind": "elementwise", "shape": shape, "dtype": "bf16", "inputs": 1, "outputs": 2,
                  "flops_per_element": DROPOUT_FLOPS}
            out.append(Node(name=f"layers.{i}.{name}", op=op, layer=f"layers.{i}"))
    return out


def sequence_parallel_comm(node: Node) -> list[Node]:
    """Under sequence parallelism a layer's tensor-parallel all-reduce runs as a reduce-scatter and an all-gather
    of the same buffer (Korthikanti et al. 2022, §4.2.2: g and ḡ). Over a ring they move what the all-reduce
    moves, 2(p−1)/p of the buffer per device; but on an NVSwitch with in-switch reduction (NVLS) the all-reduce
    moves each byte once up and once down, which the pair cannot: charged as the pair, not the all-reduce."""
    op = node.op or {}
    if node.stream != "comm" or op.get("kind") != "allreduce" or not node.layer.startswith("layers."):
        return [node]
    return [replace(node, op={**op, "kind": kind}) for kind in ("reducescatter", "allgather")]


SEQUENCE_PARALLEL_ROWS = ("input_norm", "post_attention_norm", "attention_output_norm", "mlp_output_norm",
                          "attention_residual_add", "mlp_residual_add", "parallel_residual_add")


def sequence_parallel_rows(node: Node, tp: int, hidden: int) -> Node:
    """Under sequence parallelism the layer's norms and residual adds run on the device's s/tp tokens between the
    all-gather and the reduce-scatter (Korthikanti et al. 2022, §4.2.2: LayerNorm and dropout in the
    sequence-parallel region), not on all s tokens as in the tensor-parallel graph."""
    op = node.op or {}
    shape = op.get("shape")
    if (tp <= 1 or node.name.rsplit(".", 1)[-1] not in SEQUENCE_PARALLEL_ROWS or not isinstance(shape, list)
            or len(shape) != 2 or shape[1] != hidden):
        return node
    return replace(node, op={**op, "shape": [-(-int(shape[0]) // tp), hidden]})


def cost_table(cfg: LlmConfig, hardware: Hardware, keys: list[ProbeKey], seq_len: int, dtype: str = "bf16",
               flash: bool = True, dropout: bool = False, sequence_parallel: bool = True,
               cp_allgather: bool = False, attention_kernel: str = "native") -> CostTable:
    """Cost every probe in ``keys`` with one ``predict_many`` over their distinct ops (with ``dropout``, the
    dropout ops the graph leaves out; ``cp_allgather``: context parallelism's attention over all-gathered K/V,
    else a ring; ``attention_kernel``: ``attention_kernel.ATTENTION_KERNELS``, the fused attentions costed with
    that kernel, everything else on ``hardware`` as specified)."""
    kernel_device = attention_device(hardware, attention_kernel)
    graphs: dict[ProbeKey, Graph | str] = {}
    slots: dict[str, int] = {}
    ops: list[dict[str, Any]] = []

    def slot(op: dict[str, Any]) -> int:
        text = json.dumps(op, sort_keys=True, default=str)
        if text not in slots:
            slots[text] = len(ops)
            ops.append(op)
        return slots[text]

    # a sliding window shorter than the sequence keeps the probe's s/cp-token attention times cp
    windowed = bool(cfg.sliding_window) and int(cfg.sliding_window or 0) < seq_len

    def ranks(node: Node, op: dict[str, Any], cp: int) -> RankSlots | None:
        plain = _is_attention(node) and not windowed and op.get("seq_q") == seq_len // cp
        calls = rank_calls(op, cp, cp_allgather) if plain else [[(op, 1)]]
        if len(calls) == 1 and len(calls[0]) == 1 and calls[0][0][0] is op:
            return None
        return [[(slot(call), slot(_forward(call)), n) for call, n in rank] for rank in calls]

    def row(node: Node, op: dict[str, Any], cp: int) -> Row:
        split = ranks(node, op, cp)
        if split is not None:
            return node, split[0][0][0], split[0][0][1], split
        return node, slot(op), slot(_forward(op)), None

    rows: dict[ProbeKey, list[Row]] = {}
    for key in keys:
        try:
            graph = _probe_graph(cfg, key, seq_len, dtype, flash)
        except GraphError as exc:
            graphs[key] = str(exc)
            continue
        graphs[key] = graph
        extra = dropout_nodes(cfg, key, seq_len, flash, sequence_parallel) if dropout else []
        nodes = [*graph.nodes, *extra]
        if sequence_parallel and key.tp > 1:
            nodes = [sequence_parallel_rows(split, key.tp, cfg.hidden) for n in nodes
                     for split in sequence_parallel_comm(n)]
        rows[key] = [row(n, op, key.cp) for n in nodes if (op := n.cost_op)
                     is not None and n.stream != "comm_overlap" and not n.layer.startswith("optimizer")
                     and not n.name.endswith(VOCAB_GATHER)]
    adam = slot({"kind": "elementwise", "shape": [ADAM_PROBE_PARAMS], "dtype": "fp32", "inputs": 4, "outputs": 3,
                 "flops_per_element": ADAM_FLOPS_PER_PARAM, "transcendentals_per_element": 1.0})
    stream = slot({"kind": "elementwise", "shape": [ADAM_PROBE_PARAMS], "dtype": "fp32", "inputs": 1, "outputs": 1,
                   "flops_per_element": 1.0})  # 8 bytes per element: a copy-like stream
    swapped = kernel_device is not hardware
    fused = [i for i, op in enumerate(ops) if swapped and op.get("kind") in ATTENTION_KINDS]
    rest = sorted(set(range(len(ops))) - set(fused))
    times = np.full(len(ops), np.nan)
    errors: dict[int, str] = {}
    for device, part in ((hardware, rest), (kernel_device, fused)):
        kept, batch, failed = predict_valid([ops[i] for i in part], partial(predict_many, device))
        errors.update({part[i]: why for i, why in failed.items()})
        if batch is not None:
            times[[part[i] for i in kept]] = batch.time_s
    _, shares = probe_config(cfg)
    probes: dict[ProbeKey, LayerCosts | str] = {}
    for key, built in graphs.items():
        bad = None if isinstance(built, str) else next(
            (f"{node.name}: {errors[i]}" for node, both, fwd, split in rows[key]
             for i in (both, fwd, *(j for rank in split or [] for call in rank for j in call[:2])) if i in errors),
            None)
        if isinstance(built, str) or bad is not None:
            probes[key] = built if isinstance(built, str) else bad or ""
        else:
            probes[key] = _layer_costs(rows[key], times, shares, key.cp)
    for probe in (adam, stream):
        if probe in errors:
            raise GraphError("optimizer", errors[probe])
    return CostTable(probes, float(times[adam]) / ADAM_PROBE_PARAMS,
                     float(times[stream]) / (STREAM_PROBE_BYTES_PER_ELEMENT * ADAM_PROBE_PARAMS))


def slowest_rank(split: RankSlots, times: np.ndarray[Any, Any]) -> tuple[float, float]:
    """Forward + backward and forward seconds of the context-parallel rank whose attention calls cost most."""
    per_rank = [(sum(n * float(times[b]) for b, _, n in rank), sum(n * float(times[f]) for _, f, n in rank))
                for rank in split]
    return max(per_rank)


def _layer_costs(rows: list[Row], times: np.ndarray[Any, Any], shares: list[float], cp: int) -> LayerCosts:
    acc = {k: 0.0 for k in ("layer", "fwd", "attn", "attn_fwd", "comm", "comm_fwd", "params",
                            "embed", "head", "embed_params", "head_params", "expert_params")}
    for node, both, fwd, split in rows:
        t, tf = slowest_rank(split, times) if split is not None else (float(times[both]), float(times[fwd]))
        op = node.op or {}
        if op.get("kind") == "elementwise" and "pass" not in op:
            t = tf * ELEMENTWISE_FORWARD_BACKWARD  # the graph costs element-wise ops forward only
        if node.layer.startswith("layers."):
            w = shares[int(node.layer.split(".")[1])]
            acc["params"] += w * node.params
            acc["expert_params"] += w * node.params if EXPERT_MARK in node.name else 0.0
            if node.stream == "comm":
                acc["comm"] += w * t
                acc["comm_fwd"] += 0.0 if node.name.endswith("_backward") else w * t
                continue
            scale = float(cp) if _is_attention(node) and split is None else 1.0
            acc["layer"] += w * t * scale
            acc["fwd"] += w * tf * scale
            if _is_attention(node):
                acc["attn"] += w * t * scale
                acc["attn_fwd"] += w * tf * scale
        elif node.layer == "embed":
            acc["embed"] += t
            acc["embed_params"] += node.params
        elif node.layer == "head":
            acc["head"] += t
            acc["head_params"] += node.params
    return LayerCosts(acc["layer"], acc["fwd"], acc["attn"], acc["attn_fwd"], acc["comm"], acc["comm_fwd"],
                      acc["params"], acc["embed"], acc["head"], acc["embed_params"], acc["head_params"],
                      acc["expert_params"])
