"""A published run's predicted step, part by part, beside the step its published figure implies.

The parts are the slowest pipeline stage's (what the step waits on), summed over the step's micro-batches:
GEMMs and other kernels, the core attention (the slowest context-parallel rank's), recomputation, the blocking
tensor-parallel collectives, the exposed context-parallel K/V collectives, the exposed ZeRO-3 gathers, the
pipeline sends, the separate weight-gradient accumulation, the interleaved 1F1B bubble ((pp−1)/(v·m) of the
m micro-batches' stage time), the exposed data-parallel reduction and the optimizer; the embedding or LM head
beyond a layer's slot is what is left of the step. The data-parallel reduction hidden under the backward is
listed but is not part of the step.

A diagnostic, not a model term: the share of the spec's tensor clock at which the step's kernel compute (GEMMs,
other kernels, core attention, recomputation, with the bubble's share of them) would take the published step,
``k / (k + missing)``; in PaLM's count and, where the source states no convention, in the causal count. One
power-limited sustained clock would give every row of one device the same share. All kernels are treated as
clock-bound, so it is the highest such clock (memory-bound kernels do not stretch with it).

A second diagnostic, also not a model term: the useful (causal) attention TFLOP/s per device at which the core
attention alone, with the bubble's share of it, would take the published step, beside the model's own rate
(``attention_tflops_to_close``); against published kernels' rates it says whether any attention kernel could
explain a row's gap in a given count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfmodel.training import flops
from perfmodel.training.published import PublishedRun, published_step_s, search

# (key, label) of the parts that add up to the step, in the order they are printed
PARTS = (("gemm_s", "GEMMs and other kernels"), ("attention_s", "core attention"),
         ("recompute_s", "recomputation"), ("tp_comm_s", "TP collectives (blocking)"),
         ("cp_exposed_s", "CP K/V collectives (exposed)"), ("zero3_exposed_s", "ZeRO-3 gathers (exposed)"),
         ("pipeline_send_s", "pipeline sends"), ("grad_accumulate_s", "gradient accumulation kernels"),
         ("bubble_s", "pipeline bubble"), ("dp_exposed_s", "DP reduction (exposed)"),
         ("optimizer_s", "optimizer"), ("ends_s", "embedding / LM head beyond a slot"))


@dataclass(frozen=True)
class StepBreakdown:
    """One run's predicted step by part (seconds), its layout and schedule, and the published step."""

    name: str
    layout: dict[str, object]
    microbatches: float
    bubble_fraction: float  # (pp−1)/(v·m): the interleaved 1F1B bubble over the m micro-batches' stage time
    parts: dict[str, float]  # PARTS' keys; they sum to step_s
    dp_hidden_s: float  # data-parallel reduction under the last micro-batch's backward (not in the step)
    step_s: float
    published_step_s: float
    memory_gb: float
    capacity_gb: float
    published_step_causal_s: float | None = None  # the same figure in the causal count (source states none)
    attention_flops: float = 0.0  # useful (causal) attention FLOPs of the slowest stage's step on one device

    @property
    def attention_tflops(self) -> float:
        """The model's core attention rate on the slowest stage: useful (causal) TFLOP/s per device."""
        a = self.parts["attention_s"]
        return self.attention_flops / a / 1e12 if a > 0.0 else float("inf")

    def attention_tflops_to_close(self, published_s: float | None = None) -> float:
        """The useful attention TFLOP/s per device at which the core attention alone would make the step
        ``published_s`` (default: the published step): the attention and the bubble's share of it, a·(1 + f),
        take up the missing time (infinite where the rest of the step already exceeds it)."""
        target = self.published_step_s if published_s is None else published_s
        a = self.parts["attention_s"] + (target - self.step_s) / (1.0 + self.bubble_fraction)
        return self.attention_flops / a / 1e12 if a > 0.0 else float("inf")

    @property
    def missing_s(self) -> float:
        """The published step's time the model does not predict (negative: the model is slower)."""
        return self.published_step_s - self.step_s

    @property
    def clock_bound_s(self) -> float:
        """The kernel compute a lower tensor clock would stretch, with the bubble's share of it."""
        p = self.parts
        return (p["gemm_s"] + p["attention_s"] + p["recompute_s"]) * (1.0 + self.bubble_fraction)

    def clock_share_to_close(self, published_s: float | None = None) -> float:
        """The share of the spec's clock at which the clock-bound compute would make the step ``published_s``
        (default: the published step): k / (k + missing); above 1 where the model is slower."""
        target = self.published_step_s if published_s is None else published_s
        k = self.clock_bound_s
        return k / (k + target - self.step_s)


def step_breakdown(run: PublishedRun) -> StepBreakdown:
    """The model's step for ``run`` (its fastest fitting layout, as ``published.predict``), part by part."""
    result, i, _ = search(run)
    t, lay = result.times, result.layouts
    parts = {key: float(getattr(t, key)[i]) for key, _ in PARTS if key not in ("gemm_s", "ends_s")}
    parts["gemm_s"] = float(t.compute_s[i]) - parts["attention_s"]
    step = float(t.step_s[i])
    parts["ends_s"] = step - sum(parts.values())
    m = float(t.microbatches[i])
    pp, v = int(lay.pp[i]), int(lay.virtual_stages[i])
    published = published_step_s(run)
    cfg = run.config()
    split = run.ends_in_split and pp > 1
    layers_stage = math.ceil((cfg.layers + (2 if split else 0)) / pp)  # the middle (fullest) stage's, as step.py
    attention_flops = (flops.causal_attention_flops(cfg, int(lay.micro_batch[i]), run.seq_len) / cfg.layers
                       * layers_stage * m / (int(lay.tp[i]) * int(lay.cp[i])))
    causal = None
    if run.convention == "palm":  # a source that states no convention: the causal count beside it
        causal = published * flops.palm_flops(cfg, run.global_batch, run.seq_len, causal=True) / flops.palm_flops(
            cfg, run.global_batch, run.seq_len)
    return StepBreakdown(run.name, result.layout(i).to_json(), m, (pp - 1) / (v * m),
                         {key: parts[key] for key, _ in PARTS}, float(t.dp_hidden_s[i]), step,
                         published, float(result.memory.total_bytes[i]) / 1e9,
                         result.capacity_bytes / 1e9, causal, attention_flops)


def markdown(rows: list[StepBreakdown]) -> str:
    """The breakdowns side by side, one column per run."""
    head = "| seconds per step | " + " | ".join(r.name for r in rows) + " |"
    lines = [head, "|---|" + "---:|" * len(rows)]

    def line(label: str, values: list[str]) -> None:
        lines.append(f"| {label} | " + " | ".join(values) + " |")

    line("layout", [f"tp{r.layout['tp']} cp{r.layout['cp']} pp{r.layout['pp']} dp{r.layout['dp']} "
                    f"v{r.layout['virtual_stages']} mb{r.layout['micro_batch']} {r.layout['recompute']}"
                    for r in rows])
    line("micro-batches m, bubble (pp−1)/(v·m)", [f"{r.microbatches:.0f}, {r.bubble_fraction:.1%}" for r in rows])
    for key, label in PARTS:
        line(label, [f"{r.parts[key]:.3f}" for r in rows])
    line("**predicted step**", [f"**{r.step_s:.2f}**" for r in rows])
    line("**published step** (its FLOPs / its TFLOP/s)", [f"**{r.published_step_s:.2f}**" for r in rows])
    line("missing (published − predicted)", [f"{r.missing_s:+.2f} ({r.missing_s / r.step_s:+.1%})" for r in rows])
    line("clock share that would close it (kernel compute k / (k + missing))",
         [f"{r.clock_share_to_close():.3f}" for r in rows])
    line("the same in the causal count (published step in it)",
         [f"{r.clock_share_to_close(r.published_step_causal_s):.3f} ({r.published_step_causal_s:.2f} s)"
          if r.published_step_causal_s is not None else "—" for r in rows])
    line("core attention, useful (causal) TFLOP/s per device", [f"{r.attention_tflops:.0f}" for r in rows])
    line("attention TFLOP/s that alone would close it (the source's count; causal count)",
         [f"{r.attention_tflops_to_close():.0f}" + (f"; {r.attention_tflops_to_close(r.published_step_causal_s):.0f}"
                                                    if r.published_step_causal_s is not None else "")
          for r in rows])
    line("DP reduction hidden under the backward (not in the step)", [f"{r.dp_hidden_s:.3f}" for r in rows])
    line("memory per device, GB (of)", [f"{r.memory_gb:.1f} ({r.capacity_gb:.1f})" for r in rows])
    return "\n".join(lines)
