"""One training run's choices (``Layout``) and the workload every layout shares (``TrainingSetup``).

Devices = tp · cp · pp · dp (Megatron's order: tensor, context, pipeline, data); expert
parallelism reuses tp or dp ranks (``Parallelism``'s rule). ZeRO stage 3 is FSDP's full sharding.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from perfmodel.graph.ir import GraphError
from perfmodel.training.variability import DEVICE_SPEED_SPREAD

AttentionKernel = Literal["native", "fa2"]  # the device's own flash attention, or FlashAttention-2's kernel
ATTENTION_KERNELS: tuple[AttentionKernel, ...] = ("native", "fa2")

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_MODES: tuple[Recompute, ...] = ("none", "selective", "full")
Offload = Literal["none", "optimizer"]
GradAccumulation = Literal["fused", "separate"]
Schedule = Literal["1f1b", "zb-h1"]
SCHEDULES: tuple[Schedule, ...] = ("1f1b", "zb-h1")  # 1F1B (interleaved when v > 1); zero-bubble H1
ZERO_STAGES = (0, 1, 2, 3)
ADAM_STATE_BYTES_PER_PARAM = 12.0  # fp32 master weights, first and second moments: the ZeRO paper's K = 12


def _positive(owner: str, **values: int) -> None:
    for name, value in values.items():
        if int(value) < 1:
            raise GraphError(owner, f"{name} must be >= 1, got {value}")


@dataclass(frozen=True)
class Layout:
    """Parallel degrees, ZeRO stage (3 = FSDP), recomputation, sequences per micro-batch, virtual pipeline
    stages per device (interleaved 1F1B when > 1) and the pipeline schedule: ``1f1b``, or ``zb-h1`` (Qi et al.
    2023, zero-bubble H1: the weight-gradient half of the backward fills the bubble; v = 1)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    zero: int = 0
    recompute: Recompute = "none"
    micro_batch: int = 1
    virtual_stages: int = 1
    schedule: Schedule = "1f1b"

    def __post_init__(self) -> None:
        _positive("layout", tp=self.tp, pp=self.pp, dp=self.dp, cp=self.cp, ep=self.ep,
                  micro_batch=self.micro_batch, virtual_stages=self.virtual_stages)
        if self.zero not in ZERO_STAGES:
            raise GraphError("layout", f"zero must be one of 0, 1, 2, 3 (3 = FSDP), got {self.zero}")
        if not (self.ep == 1 or self.ep == self.tp or (self.tp == 1 and self.dp % self.ep == 0)):
            raise GraphError("layout", f"ep={self.ep} must be 1, equal tp ({self.tp}), or divide dp ({self.dp}) "
                                       "with tp=1")
        if self.schedule not in SCHEDULES:
            raise GraphError("layout", f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.recompute not in RECOMPUTE_MODES:
            raise GraphError("layout", f"recompute must be one of {', '.join(RECOMPUTE_MODES)}, "
                                       f"got {self.recompute!r}")

    @property
    def devices(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "devices": self.devices}


@dataclass(frozen=True)
class TrainingSetup:
    """What every layout shares: sequence length (tokens), global batch (sequences per optimizer
    step), GEMM precision, and the memory conventions.

    ``grad_bytes`` per parameter (2: bf16 gradients as in the ZeRO paper; 4: fp32 accumulation);
    ``sequence_parallel``: LayerNorm/dropout activations sharded over tp (Korthikanti et al. 2022);
    ``dropout``: attention and hidden dropout masks are stored (GPT-3 style; Llama trains without);
    ``flash_attention``: the attention scores are never stored (only a log-sum-exp per row);
    ``offload``: ``optimizer`` keeps the fp32 master weights and Adam moments in host memory;
    ``ends_in_pipeline_split``: the embedding and the loss each take one layer's slot when the layers are split
    into pipeline stages and chunks, so the first and last stages hold one layer fewer (Megatron-Core's
    ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``; Llama 3, §3.3.2);
    ``cp_attention``: how context parallelism shares K/V, ``ring`` (ring attention, the send/recv hidden behind the
    attention where it is shorter) or ``allgather`` (Llama 3, §3.3.2: all-gather K/V, then attend; exposed);
    ``device_speed_spread``: the range of sustained speeds among same-SKU devices (``variability``; 0: identical);
    ``grad_accumulation``: how each micro-batch's weight gradients join the accumulated ones, ``fused`` (the
    weight-gradient GEMM adds into the accumulator in its epilogue: Megatron-LM's gradient accumulation fusion) or
    ``separate`` (the GEMM writes the gradient, then a DRAM-bound kernel adds it: PyTorch autograd / FSDP);
    ``pod_devices``: devices with full bisection bandwidth between them (a pod; None: the whole job), the pods
    joined by uplinks tapered ``pod_oversubscription``:1 (Llama 3 §3.3.1: 3,072-GPU pods, 1:7 above them);
    ``attention_kernel``: ``native`` (the device's own flash attention: FlashAttention-3 on Hopper) or ``fa2``
    (FlashAttention-2's mma.sync kernel, what a run from before FlashAttention-3 had; ``attention_kernel``).
    """

    seq_len: int = 2048
    global_batch: int = 512
    precision: Literal["bf16", "fp8"] = "bf16"
    grad_bytes: float = 2.0
    sequence_parallel: bool = True
    dropout: bool = False
    flash_attention: bool = True
    offload: Offload = "none"
    host_memory_bytes_per_s: float = 100e9  # host DRAM for the CPU Adam step (a two-socket server, sustained)
    ends_in_pipeline_split: bool = False
    cp_attention: Literal["ring", "allgather"] = "ring"
    device_speed_spread: float = DEVICE_SPEED_SPREAD
    grad_accumulation: GradAccumulation = "fused"
    pod_devices: int | None = None
    pod_oversubscription: float = 1.0
    attention_kernel: AttentionKernel = "native"

    def __post_init__(self) -> None:
        _positive("training", seq_len=self.seq_len, global_batch=self.global_batch)
        if self.precision not in ("bf16", "fp8"):
            raise GraphError("training", f"precision must be bf16 or fp8, got {self.precision!r}")
        if self.grad_bytes not in (2.0, 4.0):
            raise GraphError("training", f"grad_bytes must be 2 (bf16) or 4 (fp32), got {self.grad_bytes}")
        if self.offload not in ("none", "optimizer"):
            raise GraphError("training", f"offload must be none or optimizer, got {self.offload!r}")
        if self.cp_attention not in ("ring", "allgather"):
            raise GraphError("training", f"cp_attention must be ring or allgather, got {self.cp_attention!r}")
        if self.grad_accumulation not in ("fused", "separate"):
            raise GraphError("training",
                             f"grad_accumulation must be fused or separate, got {self.grad_accumulation!r}")
        if self.pod_devices is not None and self.pod_devices < 1:
            raise GraphError("training", f"pod_devices must be at least 1, got {self.pod_devices}")
        if self.pod_oversubscription < 1.0:
            raise GraphError("training", f"pod_oversubscription must be at least 1, got {self.pod_oversubscription}")
        if not 0.0 <= self.device_speed_spread < 1.0:
            raise GraphError("training", f"device_speed_spread must be in [0, 1), got {self.device_speed_spread}")
        if self.attention_kernel not in ATTENTION_KERNELS:
            raise GraphError("training", f"attention_kernel must be one of {', '.join(ATTENTION_KERNELS)}, "
                             f"got {self.attention_kernel!r}")
        if self.host_memory_bytes_per_s <= 0:
            raise GraphError("training", "host_memory_bytes_per_s must be positive")

    @property
    def weight_bytes(self) -> float:
        """Bytes per parameter on the device for the weights: bf16, plus an fp8 copy under fp8 training
        (Transformer Engine keeps the 16-bit weights and casts them once per step)."""
        return 2.0 + (1.0 if self.precision == "fp8" else 0.0)

    def stage_slots(self, layers: int) -> int:
        """Layer slots the pipeline split divides: the layers, plus the embedding and the loss where they count."""
        return layers + (2 if self.ends_in_pipeline_split else 0)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
