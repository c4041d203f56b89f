"""POST /training/layouts (rank the layouts of a training run) and /training/check (one layout, and the
single changes that make it fit). Model errors (GraphError) become 422 naming the field."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, model_validator

from api.deps import get_state, require_read
from api.routers.convert import finite, json_bytes, json_response
from api.state import AppState
from perfmodel.graph.ir import GraphError
from perfmodel.graph.llm_config import LlmConfig
from perfmodel.graph.loader import resolve_model
from perfmodel.hardware import Hardware
from perfmodel.training.fit import make_it_fit
from perfmodel.training.layout import RECOMPUTE_MODES, SCHEDULES, Layout, Recompute, Schedule, TrainingSetup
from perfmodel.training.no_fit import does_not_fit
from perfmodel.training.search import DEFAULT_MICRO_BATCHES, SearchSpace, fastest, search_layouts
from perfmodel.training.variability import DEVICE_SPEED_SPREAD

router = APIRouter(tags=["training"], dependencies=[Depends(require_read)])


class TrainingRequest(BaseModel):
    """A model (bundled name or HF config), a device, the devices and the workload of one optimizer step."""

    model_config = ConfigDict(extra="forbid")
    hardware: str
    model: str | None = Field(default=None, description="bundled config name, e.g. llama-3.1-405b")
    config: dict[str, Any] | None = Field(default=None, description="a Hugging Face config.json object")
    devices: int = Field(ge=1, le=1 << 20)
    global_batch: int = Field(default=512, ge=1, le=1 << 24, description="sequences per optimizer step")
    seq_len: int = Field(default=4096, ge=1, le=1 << 22)
    precision: Literal["bf16", "fp8"] = "bf16"
    offload: bool = Field(default=False, description="optimizer state in host memory")
    dropout: bool = Field(default=False, description="GPT-style dropout: masks stored and costed")
    flash_attention: bool = Field(default=True, description="False: the attention scores are stored")
    sequence_parallel: bool = Field(default=True, description="norm and dropout activations sharded over tp")
    grad_bytes: Literal[2, 4] = Field(default=2, description="bytes per gradient (4: fp32 accumulation)")
    ends_in_pipeline_split: bool = Field(default=False, description="the embedding and the loss take one layer "
                                         "slot each in the pipeline split (Llama 3 §3.3.2)")
    cp_attention: Literal["ring", "allgather"] = Field(default="ring", description="context parallelism: ring "
                                                       "attention, or all-gather K/V first (Llama 3 §3.3.2)")
    grad_accumulation: Literal["fused", "separate"] = Field(default="fused", description="weight gradients "
                                                            "accumulate in the GEMM (Megatron) or in a kernel of "
                                                            "their own (PyTorch / FSDP)")
    pod_devices: int | None = Field(default=None, ge=1, le=1 << 24, description="devices per full-bisection pod")
    pod_oversubscription: float = Field(default=1.0, ge=1.0, le=1000.0, description="taper of the uplinks above "
                                        "the pods, k:1 (Llama 3 §3.3.1: 7)")
    device_speed_spread: float = Field(default=DEVICE_SPEED_SPREAD, ge=0.0, lt=1.0, description="range of "
                                       "sustained speeds among same-SKU devices; the step computes at the slowest's "
                                       "pace (0: off)")
    attention_kernel: Literal["native", "fa2"] = Field(default="native", description="native: the device's own "
                                                       "flash attention (FA3 on Hopper); fa2: FlashAttention-2's "
                                                       "mma.sync kernel (runs before FA3, July 2024)")

    @model_validator(mode="after")
    def _one_source(self) -> TrainingRequest:
        given = [k for k in ("model", "config") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of model or config (got {given or 'none'})")
        return self

    def llm(self) -> LlmConfig:
        cfg = resolve_model(self.model if self.model is not None else self.config or {})
        if not isinstance(cfg, LlmConfig):
            raise GraphError("model", "training layouts need an LLM config")
        return cfg

    def setup(self) -> TrainingSetup:
        return TrainingSetup(seq_len=self.seq_len, global_batch=self.global_batch, precision=self.precision,
                             offload="optimizer" if self.offload else "none", dropout=self.dropout,
                             flash_attention=self.flash_attention, sequence_parallel=self.sequence_parallel,
                             grad_bytes=float(self.grad_bytes), ends_in_pipeline_split=self.ends_in_pipeline_split,
                             cp_attention=self.cp_attention, device_speed_spread=self.device_speed_spread,
                             grad_accumulation=self.grad_accumulation, pod_devices=self.pod_devices,
                             pod_oversubscription=self.pod_oversubscription, attention_kernel=self.attention_kernel)


class LayoutSearchRequest(TrainingRequest):
    """Fix any choice to narrow the search; ``top``: how many of the fastest fitting layouts to return."""

    tp: int | None = Field(default=None, ge=1, le=1 << 20)
    pp: int | None = Field(default=None, ge=1, le=1 << 20)
    cp: int | None = Field(default=None, ge=1, le=1 << 20)
    zero: Literal[0, 1, 2, 3] | None = None
    recompute: Recompute | None = None
    micro_batch: int | None = Field(default=None, ge=1, le=1 << 16)
    schedule: Schedule | None = None
    top: int = Field(default=10, ge=1, le=1000)


class LayoutCheckRequest(TrainingRequest):
    """One layout: its step time and memory, and when it does not fit the changes that make it fit."""

    tp: int = Field(default=1, ge=1, le=1 << 20)
    pp: int = Field(default=1, ge=1, le=1 << 20)
    dp: int = Field(default=1, ge=1, le=1 << 20)
    cp: int = Field(default=1, ge=1, le=1 << 20)
    ep: int = Field(default=1, ge=1, le=1 << 20, description="expert parallelism: 1, tp, or dividing dp with tp=1")
    zero: Literal[0, 1, 2, 3] = 0
    recompute: Recompute = "none"
    micro_batch: int = Field(default=1, ge=1, le=1 << 16)
    virtual_stages: int = Field(default=1, ge=1, le=1024)
    schedule: Schedule = "1f1b"


def _search(hardware: Hardware, body: LayoutSearchRequest) -> bytes:
    space = SearchSpace(tp=(body.tp,) if body.tp else None, pp=(body.pp,) if body.pp else None,
                        cp=(body.cp,) if body.cp else None,
                        zero=(body.zero,) if body.zero is not None else (0, 1, 2, 3),
                        recompute=(body.recompute,) if body.recompute else RECOMPUTE_MODES,
                        micro_batch=(body.micro_batch,) if body.micro_batch else DEFAULT_MICRO_BATCHES,
                        schedules=(body.schedule,) if body.schedule else SCHEDULES)
    cfg = body.llm()
    result = search_layouts(cfg, hardware, body.devices, body.setup(), space)
    out: dict[str, Any] = {"layouts_costed": result.count, "fit": len(result.ranked()),
                           "ruled_out": result.reason_counts(), "fastest": fastest(result, body.top)}
    if not out["fastest"]:  # why, and the smallest changes of the request that make a layout fit
        out["does_not_fit"] = does_not_fit(cfg, hardware, result, space)
    return json_bytes(finite(out))


def _check(hardware: Hardware, body: LayoutCheckRequest) -> bytes:
    layout = Layout(tp=body.tp, pp=body.pp, dp=body.dp, cp=body.cp, ep=body.ep, zero=body.zero,
                    recompute=body.recompute, micro_batch=body.micro_batch, virtual_stages=body.virtual_stages,
                    schedule=body.schedule)
    if layout.devices != body.devices:
        raise GraphError("devices", f"tp x cp x pp x dp = {layout.devices}, not devices = {body.devices}")
    return json_bytes(finite(make_it_fit(body.llm(), hardware, layout, body.setup())))


@router.post("/training/layouts")
async def training_layouts(body: LayoutSearchRequest, state: AppState = Depends(get_state)) -> Response:
    """Training layouts (tp, cp, pp, dp, ZeRO, recompute, micro-batch, interleaving) that fit, fastest first."""
    hardware, _ = await run_in_threadpool(state.hardware, body.hardware)
    return json_response(await run_in_threadpool(_search, hardware, body))


@router.post("/training/check")
async def training_check(body: LayoutCheckRequest, state: AppState = Depends(get_state)) -> Response:
    """One training layout's step time and memory; if it does not fit, each single change that makes it fit."""
    hardware, _ = await run_in_threadpool(state.hardware, body.hardware)
    return json_response(await run_in_threadpool(_check, hardware, body))
