"""Memory per device of many layouts (numpy over layouts): the fuller of the first pipeline stage
(embedding, the most micro-batches in flight) and the last (LM head, logits), from the ZeRO and
Korthikanti formulas in ``memory``, with the micro-batches each stage's chunks hold at the schedule's
peak (``memory.held_layer_microbatches``). ZeRO-3 also holds two gathered layers (the one running and
the one prefetched)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.ops.base import FloatArray
from perfmodel.training.layout import TrainingSetup
from perfmodel.training.memory import (
    MASK_BYTES,
    ActivationShape,
    held_layer_microbatches,
    layer_activation_bytes,
    layer_working_bytes,
    model_state_bytes,
    output_layer_bytes,
)
from perfmodel.training.step import LayoutArrays

GATHERED_LAYERS = 2.0


@dataclass
class Footprint:
    """Bytes per device by part (the fuller stage's), one entry per layout."""

    weights_bytes: FloatArray
    gradients_bytes: FloatArray
    optimizer_bytes: FloatArray
    activations_bytes: FloatArray
    params_per_device: FloatArray  # before ZeRO sharding, the fuller stage

    @property
    def total_bytes(self) -> FloatArray:
        out: FloatArray = self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes
        return out


def footprint(shape: ActivationShape, costs: dict[str, FloatArray], lay: LayoutArrays, setup: TrainingSetup,
              layers: int, attention_bytes: Any = 0.0) -> Footprint:
    """Per-device bytes of every layout (``costs``: probe arrays indexed by ``lay.probe``; ``attention_bytes``: the
    attention backward's working buffers of one layer, ``attention_memory``, live on top of the held activations)."""
    c = {k: v[lay.probe] for k, v in costs.items()}
    tp, pp, dp, cp, v = (x.astype(float) for x in (lay.tp, lay.pp, lay.dp, lay.cp, lay.virtual_stages))
    m = setup.global_batch / (dp * lay.micro_batch)
    ends = setup.ends_in_pipeline_split & (lay.pp > 1)  # the embedding / loss take a layer's slot
    slots_stage = np.ceil((layers + np.where(ends, 2.0, 0.0)) / pp)
    layers_end = slots_stage - np.where(ends, 1.0, 0.0)  # the first and the last stage's layers
    tokens = lay.micro_batch * setup.seq_len / cp
    sp = setup.sequence_parallel
    per_layer = layer_activation_bytes(shape, tokens, setup.seq_len, tp, sp, lay.recompute)
    working = layer_working_bytes(shape, tokens, setup.seq_len, tp, sp, lay.recompute) + attention_bytes
    sets_first, embed_held = held_layer_microbatches(pp, m, v, slots_stage / v, last=False, end_in_split=ends)
    sets_last, _ = held_layer_microbatches(pp, m, v, slots_stage / v, last=True, end_in_split=ends)
    embed_mask = tokens * shape.hidden * MASK_BYTES / (tp if sp else 1.0) if setup.dropout else 0.0 * tp
    output = output_layer_bytes(shape, tokens, tp)
    single = pp <= 1
    acts_first = sets_first * per_layer + working + embed_mask * embed_held + np.where(single, output, 0.0)
    acts_last = sets_last * per_layer + working + output
    experts = layers_end * c["expert_params"]
    body = layers_end * c["layer_params"] - experts
    params_first = body + c["embed_params"] + np.where(single, c["head_params"], 0.0)
    params_last = body + c["head_params"]
    shards = dp * cp
    expert_shards = np.maximum(shards / np.where(lay.tp == 1, lay.ep, 1), 1.0)  # ranks holding the same experts
    offload = setup.offload == "optimizer"

    def states(params: Any) -> tuple[Any, Any, Any]:
        """Dense parameters sharded over dp·cp, the stage's routed experts over dp·cp / ep (ZeRO)."""
        w, g, o = model_state_bytes(params, lay.zero, shards, setup.weight_bytes, setup.grad_bytes, offload=offload,
                                    microbatches=m)
        we, ge, oe = model_state_bytes(experts, lay.zero, expert_shards, setup.weight_bytes, setup.grad_bytes,
                                       offload=offload, microbatches=m)
        gathered = np.where(lay.zero >= 3, GATHERED_LAYERS * c["layer_params"] * setup.weight_bytes, 0.0)
        return w + we + gathered, g + ge, o + oe

    first, last = states(params_first), states(params_last)
    total_first = sum(first) + acts_first
    total_last = sum(last) + acts_last
    pick = total_first >= total_last
    return Footprint(weights_bytes=np.where(pick, first[0], last[0]), gradients_bytes=np.where(pick, first[1], last[1]),
                     optimizer_bytes=np.where(pick, first[2], last[2]),
                     activations_bytes=np.where(pick, acts_first, acts_last),
                     params_per_device=np.where(pick, params_first, params_last) + experts)
