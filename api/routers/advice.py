"""POST /advice/partition and /advice/precision: the diagnostics a compiler lead asks for, on one model.

The model is a bundled LLM name, a Hugging Face config.json or a perfmodel graph JSON (ONNX graphs:
``perfmodel graph`` converts them, or the CLI's ``perfmodel advise`` reads the .onnx file). Bad models
are 422s naming the node or field (``GraphError``, ``OpError`` are ValueErrors the app turns into 422).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from api.deps import get_state, require_read
from api.routers.convert import finite, json_bytes, json_response
from api.schemas import Versioned
from api.state import AppState
from perfmodel import __version__
from perfmodel.advice.partition import partition
from perfmodel.advice.precision import precision_advice
from perfmodel.advice.source import advice_graph, with_supported_ops
from perfmodel.graph.ir import Graph

router = APIRouter(tags=["advice"], dependencies=[Depends(require_read)])
DEFAULT_FALLBACK = "intel-xeon-platinum-8480"


class AdviceRequest(BaseModel):
    """Exactly one of ``model`` (bundled name), ``config`` (HF config.json) or ``graph`` (graph JSON)."""

    model_config = ConfigDict(extra="forbid")
    hardware: str
    model: str | None = Field(default=None, description="bundled config name, e.g. llama-3-8b")
    config: dict[str, Any] | None = Field(default=None, description="a Hugging Face config.json object")
    graph: dict[str, Any] | None = Field(default=None, description="a perfmodel graph JSON")
    phase: Literal["prefill", "decode"] = "prefill"
    batch: int = Field(default=1, ge=1, le=1_000_000)
    prompt_tokens: int = Field(default=2048, ge=1, le=10_000_000)
    dtype: str = "bf16"

    @model_validator(mode="after")
    def _one_source(self) -> AdviceRequest:
        given = [k for k in ("model", "config", "graph") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of model, config or graph (got {given or 'none'})")
        return self

    def built_graph(self) -> Graph:
        if self.graph is not None:
            return Graph.from_json(self.graph)
        source = self.model if self.model is not None else (self.config or {})
        return advice_graph(source, self.phase, self.batch, self.prompt_tokens, self.dtype)


class PartitionRequest(AdviceRequest):
    fallback: str = Field(default=DEFAULT_FALLBACK, description="the host that runs what the device cannot")
    supported_ops: list[str] | None = Field(
        default=None, description="the device's op support (op kinds or importer op types); null: its spec's")


class PartitionOut(Versioned):
    device: str
    fallback: str
    placement: dict[str, int] = Field(description="nodes on the device and on the fallback")
    fallback_ops: list[dict[str, Any]]
    boundaries: list[dict[str, Any]] = Field(description="tensors copied over the host link, one per direction")
    totals: dict[str, float] = Field(description="device_s, fallback_s, transfer_s, launch_s, step_s, "
                                                 "all_on_device_s, transfer_bytes, crossings")
    notes: list[str]


class PrecisionOut(Versioned):
    hardware: str
    schemes: list[str]
    graph_time_s: float
    totals: dict[str, dict[str, float]]
    layers: list[dict[str, Any]]
    ops: list[dict[str, Any]]


@router.post("/advice/partition", response_model=PartitionOut)
def advise_partition(body: PartitionRequest, state: AppState = Depends(get_state)) -> Response:
    """Which ops fall back from the device to the host (by the device's declared supported_ops, or the
    request's), the tensors crossing the host link with their copy times, and the step against all-on-device."""
    device, _ = state.hardware(body.hardware)
    host, _ = state.hardware(body.fallback)
    report = partition(body.built_graph(), with_supported_ops(device, body.supported_ops), host)
    return json_response(json_bytes(finite({"model_version": __version__, **report.to_json()})))


@router.post("/advice/precision", response_model=PrecisionOut)
def advise_precision(body: AdviceRequest, state: AppState = Depends(get_state)) -> Response:
    """Per weight-holding matmul/conv and per layer: the predicted gain of fp8 / int8 / int4, weight-only and
    full (with the quantize op full quantization adds), and the whole step's time under each scheme."""
    hardware, _ = state.hardware(body.hardware)
    report = precision_advice(body.built_graph(), hardware)
    return json_response(json_bytes(finite({"model_version": __version__, **report.to_json()})))
