"""Every parallel layout of a model on N devices, costed at once and ranked by step time.

Layouts: tp (powers of two up to a node), cp (powers of two up to ``max_cp``), pp (every degree
up to the layer count that leaves an integer dp), ZeRO 0–3, recompute none/selective/full,
micro-batch sizes, virtual pipeline stages (interleaved 1F1B: by default every divisor of the layers
per stage, at most ``MAX_VIRTUAL_STAGE_CANDIDATES``, v > 1 only where pp > 1), and ep for MoE models.
Per-layer costs come from ``costs`` once per (tp, cp, micro-batch, ep); memory and step time
are numpy expressions over all layouts. A layout that cannot run gets a reason; one that does
not fit says how many bytes it needs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.collectives import devices_per_node
from perfmodel.dtypes import DType
from perfmodel.graph.ir import GraphError
from perfmodel.graph.llm_config import LlmConfig
from perfmodel.hardware import Hardware
from perfmodel.training.attention_memory import COUNTED, attention_backward_bytes, buffer_kernel
from perfmodel.training.costs import LayerCosts, ProbeKey, cost_table
from perfmodel.training.flops import palm_flops
from perfmodel.training.footprint import Footprint, footprint
from perfmodel.training.layout import RECOMPUTE_MODES, SCHEDULES, Layout, TrainingSetup
from perfmodel.training.memory import ActivationShape
from perfmodel.training.step import LayoutArrays, StepTimes, probe_arrays, step_times
from perfmodel.units import format_bytes

DEFAULT_MICRO_BATCHES = (1, 2, 4, 8)
MAX_VIRTUAL_STAGE_CANDIDATES = 8
DEFAULT_MAX_CP = 16


@dataclass(frozen=True)
class SearchSpace:
    """The choices to enumerate; None: the defaults above (tp up to the devices of a node)."""

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    cp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    zero: tuple[int, ...] = (0, 1, 2, 3)
    recompute: tuple[str, ...] = RECOMPUTE_MODES
    micro_batch: tuple[int, ...] = DEFAULT_MICRO_BATCHES
    virtual_stages: tuple[int, ...] | None = None  # None: ``virtual_stage_candidates`` for each pp
    schedules: tuple[str, ...] = SCHEDULES


@dataclass
class SearchResult:
    """All layouts (arrays), their step times, footprints and reasons (empty string: it runs and fits)."""

    cfg: LlmConfig
    hardware: Hardware
    setup: TrainingSetup
    devices: int
    layouts: LayoutArrays
    times: StepTimes
    memory: Footprint
    capacity_bytes: float
    reasons: list[str]
    model_flops_per_step: float  # PaLM's convention (``flops.palm_flops``): MFU and TFLOP/s per device

    @property
    def count(self) -> int:
        return len(self.reasons)

    def ranked(self) -> list[int]:
        """Indices of the layouts that fit, fastest first."""
        ok = np.array([not r for r in self.reasons], dtype=bool)
        idx = np.nonzero(ok)[0]
        return [int(i) for i in idx[np.argsort(self.times.step_s[idx], kind="stable")]]

    def layout(self, i: int) -> Layout:
        a = self.layouts
        return Layout(tp=int(a.tp[i]), pp=int(a.pp[i]), dp=int(a.dp[i]), cp=int(a.cp[i]), ep=int(a.ep[i]),
                      zero=int(a.zero[i]), recompute=RECOMPUTE_MODES[int(a.recompute[i])],
                      micro_batch=int(a.micro_batch[i]), virtual_stages=int(a.virtual_stages[i]),
                      schedule=SCHEDULES[int(a.schedule[i])])

    def row(self, i: int) -> dict[str, Any]:
        """One layout: choices, step time by part, memory by part, throughput and MFU (6N + attention)."""
        t, mem = self.times, self.memory
        step = float(t.step_s[i])
        tokens = self.setup.global_batch * self.setup.seq_len
        peak = self.hardware.peak_flops_per_s(DType.BF16 if self.setup.precision == "bf16" else DType.FP8_E4M3)
        known = bool(np.isfinite(step) and step > 0)
        mfu = self.model_flops_per_step / (step * self.devices * peak) if peak and known else None
        achieved = self.model_flops_per_step / (step * self.devices) if known else float("nan")
        return {"layout": self.layout(i).to_json(), "step_s": step, "tokens_per_s": tokens / step if known else None,
                "microbatches": float(t.microbatches[i]), "mfu": mfu, "tflops_per_device": achieved / 1e12,
                "time_s": {k: float(getattr(t, k)[i]) for k in (
                    "compute_s", "recompute_s", "tp_comm_s", "cp_exposed_s", "zero3_exposed_s", "pipeline_send_s",
                    "bubble_s", "dp_exposed_s", "dp_hidden_s", "grad_accumulate_s", "optimizer_s")},
                "memory_bytes": {"weights": float(mem.weights_bytes[i]), "gradients": float(mem.gradients_bytes[i]),
                                 "optimizer": float(mem.optimizer_bytes[i]),
                                 "activations": float(mem.activations_bytes[i]), "total": float(mem.total_bytes[i]),
                                 "capacity": self.capacity_bytes},
                "fits": not self.reasons[i], "reason": self.reasons[i]}

    def reason_counts(self) -> dict[str, int]:
        """How many layouts each kind of reason rules out (the reason's text before its first colon)."""
        out: dict[str, int] = {}
        for r in self.reasons:
            if r:
                head = r.split(":", 1)[0]
                out[head] = out.get(head, 0) + 1
        return out


def _powers(limit: int) -> tuple[int, ...]:
    return tuple(2 ** k for k in range(0, max(limit, 1).bit_length()) if 2 ** k <= limit)


def virtual_stage_candidates(layers: int, pp: int, limit: int = MAX_VIRTUAL_STAGE_CANDIDATES) -> tuple[int, ...]:
    """Model chunks per device worth trying: the ``limit`` smallest divisors of the layers per stage
    (ceil(layers / pp)), since each chunk holds whole layers (Narayanan et al. 2021, §2.2.2); (1,) when pp = 1.
    Megatron's 530B (105 layers, pp = 35) gets v = 3, its 76.1B (60 layers, pp = 4) v in {1, 3, 5, 15}."""
    if layers < 1 or pp < 1 or limit < 1:
        raise GraphError("training", f"layers, pp and limit must be >= 1, got {layers}, {pp}, {limit}")
    if pp == 1:
        return (1,)
    per_stage = -(-layers // pp)
    return tuple(v for v in range(1, per_stage + 1) if per_stage % v == 0)[:limit]


def enumerate_layouts(cfg: LlmConfig, devices: int, space: SearchSpace, per_node: int,
                      end_slots: int = 0) -> list[tuple[int, ...]]:
    """(tp, pp, dp, cp, ep, zero, recompute code, micro-batch, v, schedule code) of every layout whose degrees
    make ``devices`` (the zero-bubble schedule only where it applies, pp > 1 and v = 1, unless asked for);
    ``end_slots``: layer slots the embedding and loss take in the pipeline split (0 or 2)."""
    tps = space.tp or _powers(min(per_node, devices))
    cps = space.cp or _powers(min(DEFAULT_MAX_CP, devices))
    eps = space.ep or ((1, *(e for e in _powers(min(cfg.experts, devices)) if e > 1)) if cfg.moe else (1,))
    out: list[tuple[int, ...]] = []
    for tp, cp in itertools.product(tps, cps):
        rest = devices // (tp * cp)
        if rest * tp * cp != devices:
            continue
        pps = space.pp or tuple(p for p in range(1, min(cfg.layers, rest) + 1) if rest % p == 0)
        for pp in pps:
            dp = rest // pp
            if dp * pp != rest:
                continue
            for ep in eps:
                if ep > 1 and not (ep == tp or (tp == 1 and dp % ep == 0)):
                    continue
                # asked-for chunks are all kept (those that cannot run get a reason)
                vs = space.virtual_stages or virtual_stage_candidates(cfg.layers + end_slots, pp)
                default_schedules = space.schedules == SCHEDULES
                for zero, rc, mb, v, sched in itertools.product(space.zero, range(len(space.recompute)),
                                                                space.micro_batch, vs, space.schedules):
                    if sched != "1f1b" and default_schedules and (pp == 1 or v > 1):
                        continue
                    out.append((tp, pp, dp, cp, ep, zero, RECOMPUTE_MODES.index(space.recompute[rc]), mb, v,
                                SCHEDULES.index(sched)))
    return out


def search_layouts(cfg: LlmConfig, hardware: Hardware, devices: int, setup: TrainingSetup,
                   space: SearchSpace | None = None) -> SearchResult:
    """Cost every layout of ``devices`` devices; ``SearchResult.ranked()`` lists those that fit, fastest first."""
    if devices < 1:
        raise GraphError("training", f"devices must be >= 1, got {devices}")
    space = space or SearchSpace()
    rows = enumerate_layouts(cfg, devices, space, devices_per_node(hardware), setup.stage_slots(0))
    if not rows:
        raise GraphError("training", f"no layout of tp x cp x pp x dp makes {devices} devices in the search space")
    table = np.array(rows, dtype=np.int64)
    keys = sorted({ProbeKey(int(r[0]), int(r[3]), int(r[7]), int(r[4])) for r in rows},
                  key=lambda k: (k.tp, k.cp, k.micro_batch, k.ep))
    costs = cost_table(cfg, hardware, keys, setup.seq_len, "fp8_e4m3" if setup.precision == "fp8" else "bf16",
                       setup.flash_attention, setup.dropout, setup.sequence_parallel,
                       setup.cp_attention == "allgather", setup.attention_kernel)
    position = {k: i for i, k in enumerate(keys)}
    built = [c if isinstance(c, LayerCosts) else _EMPTY for c in (costs.probes[k] for k in keys)]
    probe_idx = np.array([position[ProbeKey(int(r[0]), int(r[3]), int(r[7]), int(r[4]))] for r in rows])
    cols = table.T
    lay = LayoutArrays(tp=cols[0], pp=cols[1], dp=cols[2], cp=cols[3], ep=cols[4], zero=cols[5], recompute=cols[6],
                       micro_batch=cols[7], virtual_stages=cols[8], probe=probe_idx, schedule=cols[9])
    arrays = probe_arrays(built)
    times = step_times(cfg, hardware, costs, arrays, lay, setup.seq_len, setup.global_batch,
                       setup.sequence_parallel, setup.grad_bytes, setup.offload == "optimizer",
                       setup.host_memory_bytes_per_s, setup.ends_in_pipeline_split,
                       setup.cp_attention == "allgather", setup.device_speed_spread,
                       setup.grad_accumulation == "separate", setup.pod_devices or 0, setup.pod_oversubscription)
    shape = ActivationShape.of(cfg, setup.dropout, setup.flash_attention)
    attention_bytes = (attention_backward_bytes(cfg, lay.micro_batch, setup.seq_len, lay.tp, lay.cp,
                                                setup.cp_attention == "allgather",
                                                buffer_kernel(hardware, setup.attention_kernel))
                       if setup.flash_attention and COUNTED["on"] else 0.0)
    mem = footprint(shape, arrays, lay, setup, cfg.layers, attention_bytes)
    capacity = float(hardware.level_capacity_bytes(hardware.dram) or np.inf)
    probe_errors = [None if isinstance(costs.probes[k], LayerCosts) else str(costs.probes[k]) for k in keys]
    per_layout_errors = [probe_errors[i] for i in probe_idx]
    reasons = _reasons(cfg, setup, lay, mem, capacity, per_layout_errors)
    unbuilt = np.array([e is not None for e in per_layout_errors], dtype=bool)
    times.step_s = np.where(unbuilt, np.nan, times.step_s)  # no costs for a layer that cannot be built
    return SearchResult(cfg, hardware, setup, devices, lay, times, mem, capacity, reasons,
                        palm_flops(cfg, setup.global_batch, setup.seq_len))


_EMPTY = LayerCosts(*([0.0] * 12))


def _reasons(cfg: LlmConfig, setup: TrainingSetup, lay: LayoutArrays, mem: Footprint, capacity: float,
             probe_errors: list[str | None]) -> list[str]:
    """Why each layout cannot run ('' where it runs and fits); the first reason found."""
    slots = np.where(lay.pp > 1, setup.stage_slots(cfg.layers), cfg.layers)
    layers_stage = -(-slots // lay.pp)
    per_step = lay.dp * lay.micro_batch
    micro = np.where(setup.global_batch % per_step == 0, setup.global_batch // np.maximum(per_step, 1), 0)
    total = mem.total_bytes
    out = []
    for i in range(len(lay.tp)):
        pp, dp, cp, zero, v = (int(x[i]) for x in (lay.pp, lay.dp, lay.cp, lay.zero, lay.virtual_stages))
        if probe_errors[i]:
            out.append(f"cannot build: {probe_errors[i]}")
        elif pp > cfg.layers:
            out.append(f"pipeline: pp={pp} exceeds the {cfg.layers} layers")
        elif micro[i] == 0:
            out.append(f"batch: global batch {setup.global_batch} is not a multiple of dp x micro-batch "
                       f"({dp} x {int(lay.micro_batch[i])})")
        elif setup.seq_len % (2 * cp) and cp > 1:
            out.append(f"context parallel: sequence {setup.seq_len} does not split into 2 x cp={cp} balanced chunks")
        elif zero > 0 and dp * cp == 1:
            out.append("ZeRO: nothing to shard over (dp x cp = 1)")
        elif int(lay.schedule[i]) != 0 and (pp == 1 or v > 1):
            out.append(f"zero bubble: {SCHEDULES[int(lay.schedule[i])]} needs pp > 1 and v = 1 (pp={pp}, v={v})")
        elif v > 1 and pp == 1:
            out.append(f"interleaving: v={v} model chunks need pipeline stages (pp > 1)")
        elif v > 1 and int(layers_stage[i]) % v:
            out.append(f"interleaving: {int(layers_stage[i])} layer slots per stage do not split into {v} chunks")
        elif v > 1 and int(micro[i]) % pp:
            out.append(f"interleaving: {int(micro[i])} micro-batches are not a multiple of pp={pp}")
        elif total[i] > capacity:
            out.append(f"does not fit: needs {format_bytes(float(total[i]))} per device, has {format_bytes(capacity)}")
        else:
            out.append("")
    return out


def fastest(result: SearchResult, count: int = 10) -> list[dict[str, Any]]:
    """The ``count`` fastest layouts that fit, as rows."""
    return [result.row(i) for i in result.ranked()[:count]]

