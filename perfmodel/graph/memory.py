"""Device memory per device: weights, KV cache, activations, and for training gradients and optimizer state.

- weights: the parameters each node holds on the device, at their storage dtype.
- KV cache: every ``kv_cache_write`` node's row width × batch × context length × cache dtype
  (decode: ``kv_len`` keys; prefill: the prompt it fills).
- activations: inference keeps the two largest live tensors (input and output of one op);
  training keeps every node output for the backward, for min(microbatches, pp) microbatches in
  flight (1F1B).
- training state (mixed-precision Adam): 16-bit gradients, and fp32 master weights, first and
  second moments (12 bytes per parameter), no ZeRO sharding (``perfmodel.training`` models ZeRO/FSDP,
  recomputation, sequence/context parallelism and offload for training layouts: docs/training.md).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from itertools import chain, compress
from typing import Any

from perfmodel.graph.ir import Graph, GraphError
from perfmodel.graph.lazy_graph import memory_rows, node_column
from perfmodel.hardware import Hardware
from perfmodel.units import format_bytes

GRAD_BYTES_PER_PARAM = 2.0
ADAM_BYTES_PER_PARAM = 12.0


class DoesNotFit(GraphError):
    """The per-device footprint exceeds the device memory."""


@dataclass
class MemoryReport:
    """Bytes per device (the fullest pipeline stage) against the device's DRAM capacity."""

    weights_bytes: float
    kv_cache_bytes: float
    activations_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    capacity_bytes: float | None
    stage: int

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.kv_cache_bytes + self.activations_bytes + self.gradients_bytes
                + self.optimizer_bytes)

    @property
    def fits(self) -> bool:
        return self.capacity_bytes is None or self.total_bytes <= self.capacity_bytes

    def to_json(self) -> dict[str, Any]:
        return {"weights_bytes": self.weights_bytes, "kv_cache_bytes": self.kv_cache_bytes,
                "activations_bytes": self.activations_bytes, "gradients_bytes": self.gradients_bytes,
                "optimizer_bytes": self.optimizer_bytes, "total_bytes": self.total_bytes,
                "capacity_bytes": self.capacity_bytes, "fits": self.fits, "stage": self.stage}

    def explain(self, hardware_id: str) -> str:
        parts = [f"{name} {format_bytes(v)}" for name, v in (
            ("weights", self.weights_bytes), ("KV cache", self.kv_cache_bytes),
            ("activations", self.activations_bytes), ("gradients", self.gradients_bytes),
            ("optimizer state", self.optimizer_bytes)) if v > 0]
        cap = format_bytes(self.capacity_bytes) if self.capacity_bytes else "?"
        training = ("; for training, `perfmodel train-layouts` finds the ZeRO stage, recomputation and layout "
                    "that fit") if self.optimizer_bytes > 0 else ""
        return (f"needs {format_bytes(self.total_bytes)} per device ({', '.join(parts)}) but {hardware_id} has "
                f"{cap}: use more devices (--tp/--pp), narrower weights (--weight-dtype int8/int4), "
                f"a smaller batch or a shorter context{training}")


def memory(graph: Graph, hardware: Hardware) -> MemoryReport:
    """Per-device footprint of ``graph``; the stage that needs the most decides."""
    meta = graph.meta
    phase = meta.get("phase", "inference")
    batch = int(meta.get("batch", 1))
    context = int(meta.get("kv_len", 0) if phase == "decode" else meta.get("prompt_tokens", 0))
    par = meta.get("parallelism") or {}
    in_flight = min(int(par.get("microbatches", 1)), int(par.get("pp", 1)))
    stages, sizes_of, kv_of = memory_rows(graph)  # per node; no nodes built for copied layers by reference
    weights_of, params_of = node_column(graph, "weight_bytes"), node_column(graph, "params")
    reports = []
    for stage in sorted(set(stages)) or [0]:
        rows = [s == stage for s in stages]  # this stage's nodes, in graph order
        weights = sum(compress(weights_of, rows))
        params = sum(compress(params_of, rows))
        kv = 0.0
        if phase in ("prefill", "decode"):
            for row in compress(kv_of, rows):
                if row is not None:
                    kv += row[0] * batch * context * row[1]
        sizes = list(chain.from_iterable(compress(sizes_of, rows)))  # ``Tensor.numel`` x element bytes
        if phase == "train":  # every output kept: summed largest first
            acts = sum(sorted(sizes, reverse=True)) * in_flight
        else:  # the two largest live at once
            acts = sum(heapq.nlargest(2, sizes)) * max(in_flight, 1)
        grads = params * GRAD_BYTES_PER_PARAM if phase == "train" else 0.0
        opt = params * ADAM_BYTES_PER_PARAM if phase == "train" else 0.0
        reports.append(MemoryReport(weights, kv, acts, grads, opt, hardware.level_capacity_bytes(hardware.dram),
                                    stage))
    return max(reports, key=lambda r: r.total_bytes)
