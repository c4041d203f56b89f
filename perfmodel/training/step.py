"""Step time of many layouts at once (numpy over layouts), from the per-layer probe costs.

Per micro-batch a layer costs its forward + backward compute, its blocking tensor-parallel
collectives, the recomputation (selective: the core attention's forward; full: the layer's
forward and its tp collectives again), the exposed part of ring attention's send/recv under
context parallelism (cp−1 KV blocks forward, KV and their gradients backward, hidden behind the
attention compute of the same pass) and, under ZeRO-3/FSDP, the exposed part of the layer's
parameter all-gather (forward and backward) and gradient reduce-scatter, per micro-batch; and,
where the weight gradients accumulate in a kernel of their own (PyTorch autograd, FSDP) rather than
in the weight-gradient GEMM (Megatron's fusion), that kernel's DRAM stream.

A stage runs ceil(L/pp) layers (+ embedding on the first, LM head on the last; with the ends in the
split, ceil((L+2)/pp) slots, the first and last stage one layer fewer) and sends its
activations and gradients to its neighbours (2·v sends per micro-batch with v model chunks).
The pipeline takes (m + (pp−1)/v) stage times for m micro-batches: the interleaved 1F1B
bubble (pp−1)/(v·m). The data-parallel gradient reduction over dp·cp ranks (all-reduce, or under
ZeRO-1/2 a reduce-scatter and a parameter all-gather), bucketed by layer, overlaps the last
micro-batch's backward; what outlasts it and the last bucket are exposed. Then Adam runs over
the device's (sharded) parameters, or on the host over the host link with ``offload``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from perfmodel.collectives import (
    ALLGATHER,
    ALLREDUCE,
    AUTO,
    REDUCESCATTER,
    SENDRECV,
    collective_time,
    devices_per_node,
    host_link_bytes_per_s,
)
from perfmodel.graph.llm_config import LlmConfig
from perfmodel.hardware import Hardware
from perfmodel.machine import tables
from perfmodel.ops.base import FloatArray
from perfmodel.training.costs import CostTable, LayerCosts
from perfmodel.training.layout import SCHEDULES
from perfmodel.training.memory import ACT_BYTES, FULL, SELECTIVE
from perfmodel.training.variability import slowest_device_slowdown

ZB_H1 = SCHEDULES.index("zb-h1")
# LayerCosts fields that are kernel compute (run at the slowest device's pace); the rest are collectives and sizes
COMPUTE_FIELDS = ("layer_s", "layer_forward_s", "attention_s", "attention_forward_s", "embed_s", "head_s")
HOST_ADAM_BYTES_PER_PARAM = 28.0  # CPU Adam: reads fp32 master, m, v (12) and a bf16 gradient (2), writes 12 + 2
GEMM_GRAD_BYTES = 2.0  # a weight-gradient GEMM's bf16 output
HOST_COPY_BYTES_PER_PARAM = 4.0  # bf16 gradient to the host, bf16 weight back


@dataclass
class LayoutArrays:
    """One entry per layout: degrees, ZeRO stage, recompute code, micro-batch, virtual stages, and the
    index of its probe in the cost arrays."""

    tp: Any
    pp: Any
    dp: Any
    cp: Any
    ep: Any
    zero: Any
    recompute: Any
    micro_batch: Any
    virtual_stages: Any
    probe: Any
    schedule: Any = 0  # index in layout.SCHEDULES

    def __post_init__(self) -> None:
        for f in fields(self):
            setattr(self, f.name, np.asarray(getattr(self, f.name), dtype=np.int64))
        self.schedule = np.broadcast_to(self.schedule, self.tp.shape)


def probe_arrays(costs: list[LayerCosts]) -> dict[str, FloatArray]:
    """``LayerCosts`` fields as arrays indexed by probe."""
    return {f.name: np.array([getattr(c, f.name) for c in costs], dtype=float) for f in fields(LayerCosts)}


@dataclass
class StepTimes:
    """Seconds per optimizer step, by part, one entry per layout."""

    step_s: FloatArray
    compute_s: FloatArray  # forward + backward compute of all micro-batches (no bubble)
    attention_s: FloatArray  # the core attention's share of compute_s (the slowest context-parallel rank's)
    recompute_s: FloatArray
    tp_comm_s: FloatArray
    cp_exposed_s: FloatArray
    zero3_exposed_s: FloatArray
    pipeline_send_s: FloatArray
    bubble_s: FloatArray
    dp_exposed_s: FloatArray
    dp_hidden_s: FloatArray
    grad_accumulate_s: FloatArray  # separate weight-gradient accumulation kernels (0 when fused into the GEMMs)
    optimizer_s: FloatArray
    microbatches: FloatArray


def _stride_per_node(per_node: int, stride: Any, size: Any) -> Any:
    """Devices of a group (ranks ``stride`` apart) that share a node."""
    return np.clip(per_node // np.maximum(stride, 1), 1, np.maximum(size, 1)).astype(float)


def accumulation_s_per_param(m: Any, grad_bytes: float, stream_s_per_byte: float) -> Any:
    """Seconds per parameter and micro-batch (mean over the step's ``m``) of accumulating weight gradients in a
    kernel of their own: the GEMM writes each micro-batch's gradient in bf16; the first is cast into the
    accumulator of ``grad_bytes`` (2 + grad_bytes bytes; nothing when the accumulator is bf16 too), each later one is
    read with the accumulator, added, and written back (2 + 2·grad_bytes), all streaming DRAM."""
    first = GEMM_GRAD_BYTES + grad_bytes if grad_bytes > GEMM_GRAD_BYTES else 0.0
    m = np.asarray(m, dtype=float)
    return ((m - 1.0) * (GEMM_GRAD_BYTES + 2.0 * grad_bytes) + first) / np.maximum(m, 1.0) * stream_s_per_byte


def pod_span(tp: Any, cp: Any, pp: Any, dp: Any, pod_devices: int) -> tuple[Any, Any]:
    """Members of the data-parallel group (dp·cp ranks: cp of them tp apart, dp of them a replica of tp·cp·pp
    apart, Megatron's and Llama 3's [TP, CP, PP, DP] order) that share a pod of ``pod_devices`` (a tp·cp block is
    taken to sit in one pod), and the pods the group spans, fractional where the job ends inside a pod.
    No pods (``pod_devices`` 0): (dp·cp, 1)."""
    shards = np.asarray(dp * cp, dtype=float)
    if pod_devices <= 0:
        return shards, np.ones_like(shards)
    replicas_per_pod = np.clip(np.floor(pod_devices / (tp * cp * pp)), 1.0, dp)
    in_pod = cp * replicas_per_pod
    return in_pod, np.where(tp * cp * pp * dp > pod_devices, shards / in_pod, 1.0)


def all_gather_cp_exposed(coll: Any, kv_block: Any, cp: Any, per_node: Any, full_recompute: Any) -> Any:
    """Exposed seconds per layer and micro-batch of all-gather context parallelism (Llama 3, §3.3.2): the
    forward all-gathers the cp ranks' K/V blocks (output: cp blocks) before the attention, which needs all of
    them, so nothing hides it; the backward gathers them again (only the local block is kept) and
    reduce-scatters the K/V gradients (bf16); full recomputation repeats the forward's gather."""
    gather = coll(ALLGATHER, cp * kv_block, cp, per_node)
    scatter = coll(REDUCESCATTER, cp * kv_block, cp, per_node)
    return np.where(full_recompute, 3.0, 2.0) * gather + scatter


def step_times(cfg: LlmConfig, hardware: Hardware, table: CostTable, costs: dict[str, FloatArray],
               lay: LayoutArrays, seq_len: int, global_batch: int, sequence_parallel: bool,
               grad_bytes: float, offload: bool, host_memory_bytes_per_s: float,
               ends_in_split: bool = False, cp_allgather: bool = False, device_spread: float = 0.0,
               separate_accumulation: bool = False, pod_devices: int = 0,
               pod_oversubscription: float = 1.0) -> StepTimes:
    """Step time of every layout in ``lay`` (``costs``: ``probe_arrays`` of the probes ``lay.probe`` indexes);
    ``ends_in_split``: the embedding and the loss take a layer's slot in the pipeline split (``TrainingSetup``);
    ``cp_allgather``: context parallelism all-gathers K/V before the attention instead of passing them round a ring;
    ``device_spread``: same-SKU devices' speed range (``variability``): compute runs at the slowest device's pace;
    ``separate_accumulation``: weight gradients join the accumulator in their own DRAM-bound kernel (PyTorch / FSDP),
    not in the weight-gradient GEMM's epilogue (``TrainingSetup.grad_accumulation``); ``pod_devices``: devices with
    full bisection bandwidth between them (0: the whole job), joined to the other pods by uplinks tapered
    ``pod_oversubscription``:1."""
    t = tables(hardware)
    per_node = devices_per_node(hardware)
    launch = t.kernel_overhead_s

    def coll(kind: int, size: Any, devices: Any, q: Any) -> Any:
        size = np.asarray(size, dtype=float)
        n = np.broadcast_shapes(size.shape, np.shape(devices), np.shape(q))
        out = collective_time(t, np.full(n, kind), np.broadcast_to(size, n).astype(float),
                              np.broadcast_to(np.asarray(devices, dtype=float), n),
                              np.broadcast_to(np.asarray(q, dtype=float), n), np.full(n, AUTO))
        return np.where(np.broadcast_to(np.asarray(devices), n) > 1, out + launch, 0.0)

    c = {k: v[lay.probe] for k, v in costs.items()}
    tp, pp, dp, cp, v = (x.astype(float) for x in (lay.tp, lay.pp, lay.dp, lay.cp, lay.virtual_stages))
    slow = slowest_device_slowdown(tp * pp * dp * cp, device_spread)
    c.update({k: c[k] * slow for k in COMPUTE_FIELDS})
    m = global_batch / (dp * lay.micro_batch)
    split = ends_in_split & (lay.pp > 1)
    layers_stage = np.ceil((cfg.layers + np.where(split, 2.0, 0.0)) / pp)  # the middle (the fullest) stage's

    def slowest(per_layer: Any, end: Any) -> Any:
        """The slowest stage's layers plus its end: with the ends in the split, a first or last stage trades one
        layer for its embedding or head."""
        return np.where(split, (layers_stage - 1.0) * per_layer + np.maximum(per_layer, end),
                        layers_stage * per_layer + end)

    rc = lay.recompute
    recompute = np.where(rc == FULL, c["layer_forward_s"] + c["tp_comm_forward_s"],
                         np.where(rc == SELECTIVE, c["attention_forward_s"], 0.0))
    # ring attention: per layer (cp−1) KV blocks forward, KV and their gradients backward
    tokens = lay.micro_batch * seq_len / cp
    kv_width = 2.0 * max(cfg.kv_heads * cfg.head_dim, 1) if not cfg.mla else float(cfg.kv_lora_rank + cfg.qk_rope_dim)
    kv_block = tokens * kv_width / np.where(cfg.mla, 1.0, np.minimum(tp, max(cfg.kv_heads, 1))) * ACT_BYTES
    # a ring step is as slow as its slowest hop: one crosses nodes once the cp group spans more than one
    ring_across = tp * cp > per_node
    ring_fwd = (cp - 1.0) * coll(SENDRECV, kv_block, np.minimum(cp, 2.0), np.where(ring_across, 1.0, 2.0))
    attn_fwd = c["attention_forward_s"]
    attn_bwd = c["attention_s"] - attn_fwd
    cp_exposed = np.maximum(ring_fwd - attn_fwd, 0.0) + np.maximum(2.0 * ring_fwd - attn_bwd, 0.0)
    cp_exposed += np.where(rc == FULL, np.maximum(ring_fwd - attn_fwd, 0.0), 0.0)
    if cp_allgather:  # Llama 3 §3.3.2: all-gather K/V, then attend; the gather is on the critical path
        cp_exposed = all_gather_cp_exposed(coll, kv_block, cp, _stride_per_node(per_node, tp, cp), rc == FULL)
    # ZeRO-3 / FSDP: gather each layer's weights in the forward and the backward, reduce-scatter its gradients.
    # Dense weights are shared by the dp·cp ranks; routed experts (ep dividing dp) by dp·cp / ep of them.
    shards = dp * cp
    q_dp = _stride_per_node(per_node, tp, shards)
    ep_div = np.where(lay.tp == 1, lay.ep, 1).astype(float)
    expert_shards = np.maximum(shards / ep_div, 1.0)
    q_ep = _stride_per_node(per_node, tp * ep_div, expert_shards)
    dense_params = c["layer_params"] - c["expert_params"]
    has_experts = c["expert_params"] > 0

    in_pod, pods = pod_span(tp, cp, pp, dp, pod_devices)

    def dense_group(kind: int, size: Any) -> Any:
        """The dense group's collective; spanning pods, a hierarchical one: over the members in each pod, then of
        their 1/in_pod share across the pods, where every device of a pod crosses at once: the uplinks' taper
        (``pod_oversubscription``) divides each device's network bandwidth."""
        flat = coll(kind, size, shards, q_dp)
        if pod_devices <= 0:
            return flat
        across = coll(kind, pod_oversubscription * np.asarray(size) / in_pod, np.ceil(pods), 1.0)
        return np.where(pods > 1.0, coll(kind, size, in_pod, q_dp) + across, flat)

    def grouped(kind: int, dense: Any, expert: Any) -> Any:
        """One collective over the dense group plus one over the experts' group (where there are experts)."""
        return dense_group(kind, dense) + np.where(has_experts, coll(kind, expert, expert_shards, q_ep), 0.0)

    accumulate = accumulation_s_per_param(m, grad_bytes, table.stream_s_per_byte) if separate_accumulation else 0.0
    gather = grouped(ALLGATHER, dense_params * 2.0, c["expert_params"] * 2.0)
    scatter = grouped(REDUCESCATTER, dense_params * grad_bytes, c["expert_params"] * grad_bytes)
    fwd_layer = c["layer_forward_s"] + c["tp_comm_forward_s"]
    bwd_layer = c["layer_s"] + c["tp_comm_s"] - fwd_layer + recompute
    zero3 = np.where(lay.zero >= 3, np.maximum(gather - fwd_layer, 0.0) + np.maximum(gather + scatter - bwd_layer, 0.0),
                     0.0)
    # ZeRO-3 reduce-scatters each micro-batch's gradients: only the device's shard accumulates
    grad_accumulate = accumulate * c["layer_params"] / np.where(lay.zero >= 3, shards, 1.0)
    layer = c["layer_s"] + c["tp_comm_s"] + recompute + cp_exposed + zero3 + grad_accumulate
    embed = c["embed_s"] + accumulate * c["embed_params"]
    head = c["head_s"] + accumulate * c["head_params"]
    ends = np.where(pp > 1, np.maximum(embed, head), embed + head)
    act_bytes = tokens * cfg.hidden * ACT_BYTES / (tp if sequence_parallel else 1.0)
    across = tp * cp * dp >= per_node
    send = coll(SENDRECV, act_bytes, np.where(pp > 1, 2.0, 1.0), np.where(across, 1.0, 2.0))
    sends = np.where(pp > 1, 2.0 * v * send, 0.0)
    stage = slowest(layer, ends) + sends
    # 1F1B: (pp−1)/v stage times idle. ZB-H1 (Qi et al. 2023) splits the backward into input and weight
    # gradients (half each for the GEMMs) and runs the weight half in the bubble: (pp−1)·(T_F + T_B − T_W),
    # i.e. (pp−1) times a stage's forward, plus its recomputation (part of T_B) and exposed communication
    stage_forward = slowest(fwd_layer + recompute + cp_exposed + zero3, ends / 3.0) + sends / 2.0
    bubble = np.where(lay.schedule == ZB_H1, (pp - 1.0) * stage_forward, (pp - 1.0) / v * stage)
    pipeline = m * stage + bubble
    # data-parallel gradient reduction, one bucket per layer, hidden behind the last micro-batch's backward
    stage_expert = layers_stage * c["expert_params"]
    stage_dense = slowest(dense_params, np.maximum(c["embed_params"], c["head_params"]))
    buckets = layers_stage + 1.0
    dense_bucket, expert_bucket = stage_dense / buckets, stage_expert / buckets
    reduce_all = buckets * grouped(ALLREDUCE, dense_bucket * grad_bytes, expert_bucket * grad_bytes)
    split = buckets * (grouped(REDUCESCATTER, dense_bucket * grad_bytes, expert_bucket * grad_bytes)
                       + grouped(ALLGATHER, dense_bucket * 2.0, expert_bucket * 2.0))
    dp_total = np.where(lay.zero == 0, reduce_all, np.where(lay.zero >= 3, 0.0, split))
    window = layers_stage * bwd_layer
    dp_exposed = np.where(dp_total > 0, np.maximum(dp_total - window, 0.0) + dp_total / buckets, 0.0)
    sharded = lay.zero >= 1
    local_params = stage_dense / np.where(sharded, shards, 1.0) + stage_expert / np.where(sharded, expert_shards, 1.0)
    if offload:
        host = HOST_COPY_BYTES_PER_PARAM * local_params
        link = host_link_bytes_per_s(hardware) * t.defaults.link_efficiency
        optimizer = host / link + local_params * HOST_ADAM_BYTES_PER_PARAM / host_memory_bytes_per_s
    else:
        optimizer = local_params * table.adam_s_per_param
    step = pipeline + dp_exposed + optimizer
    return StepTimes(step_s=step, compute_s=m * layers_stage * c["layer_s"],
                     attention_s=m * layers_stage * c["attention_s"], recompute_s=m * layers_stage * recompute,
                     tp_comm_s=m * layers_stage * c["tp_comm_s"], cp_exposed_s=m * layers_stage * cp_exposed,
                     zero3_exposed_s=m * layers_stage * zero3, pipeline_send_s=m * sends,
                     bubble_s=bubble, dp_exposed_s=dp_exposed,
                     dp_hidden_s=np.maximum(dp_total - dp_exposed, 0.0),
                     grad_accumulate_s=m * layers_stage * grad_accumulate, optimizer_s=optimizer, microbatches=m)

