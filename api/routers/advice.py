"""POST /advice/partition and /advice/precision: the diagnostics a compiler lead asks for, on one model.

The model is a bundled LLM name, a Hugging Face config.json or a perfmodel graph JSON; an ONNX file is uploaded
to ``/advice/partition/onnx`` and ``/advice/precision/onnx`` (multipart, as ``/graphs/estimate/onnx``; the CLI's
``perfmodel advise`` reads the .onnx file). Bad models are 422s naming the node or field (``GraphError``,
``OpError`` are ValueErrors the app turns into 422).
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, File, Form, Response, UploadFile
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, model_validator

from api.deps import get_state, require_read
from api.routers.convert import finite, json_bytes, json_response
from api.routers.graphs import TRIP_COUNTS_FORM, parse_dims, read_upload
from api.schemas import Versioned
from api.state import AppState
from perfmodel import __version__
from perfmodel.advice.partition import partition
from perfmodel.advice.precision import precision_advice
from perfmodel.advice.source import advice_graph, with_supported_ops
from perfmodel.graph.ir import Graph
from perfmodel.graph.loops import parse_trip_counts
from perfmodel.hardware import Hardware

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


class PrecisionRequest(AdviceRequest):
    fp32_math: Literal["framework", "tf32", "ieee"] = Field(
        default="framework", description="the baseline's fp32 convolutions / matmuls (perfmodel.graph.math_mode)")


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
    fp32_math: dict[str, Any] | None = Field(default=None, description="the baseline's fp32 math mode")
    totals: dict[str, dict[str, float]]
    layers: list[dict[str, Any]]
    ops: list[dict[str, Any]]


@router.post("/advice/partition", response_model=PartitionOut)
def advise_partition(body: PartitionRequest, state: AppState = Depends(get_state)) -> Response:
    """Which ops fall back from the device to the host (by the device's declared supported_ops, or the
    request's), the tensors crossing the host link with their copy times, and the step against all-on-device."""
    device, _ = state.hardware(body.hardware)
    host, _ = state.hardware(body.fallback)
    return json_response(_partition_json(body.built_graph(), device, host, body.supported_ops))


@router.post("/advice/precision", response_model=PrecisionOut)
def advise_precision(body: PrecisionRequest, state: AppState = Depends(get_state)) -> Response:
    """Per weight-holding matmul/conv and per layer: the predicted gain of fp8 / int8 / int4, weight-only and
    full (with the quantize op full quantization adds), and the whole step's time under each scheme."""
    hardware, _ = state.hardware(body.hardware)
    return json_response(_precision_json(body.built_graph(), hardware, body.fp32_math))


def _onnx_graph(data: bytes, dims: dict[str, int], trip_counts: dict[str, int] | None = None) -> Graph:
    from perfmodel.graph.onnx_import import import_onnx  # onnx loads only when a model is uploaded

    return import_onnx(data, dims=dims, trip_counts=trip_counts)


def _partition_json(graph: Graph, device: Hardware, host: Hardware, supported_ops: list[str] | None) -> bytes:
    report = partition(graph, with_supported_ops(device, supported_ops), host)
    return json_bytes(finite({"model_version": __version__, **report.to_json()}))


def _precision_json(graph: Graph, hardware: Hardware, fp32_math: str = "framework") -> bytes:
    report = precision_advice(graph, hardware, fp32_math)
    return json_bytes(finite({"model_version": __version__, **report.to_json()}))


@router.post("/advice/partition/onnx", response_model=PartitionOut)
async def advise_partition_onnx(
        file: UploadFile = File(description="an ONNX model"), hardware: str = Form(...),
        fallback: str = Form(default=DEFAULT_FALLBACK, description="the host that runs what the device cannot"),
        supported_ops: str = Form(default="", description="comma-separated op kinds or ONNX op types the device "
                                                          "runs; empty: its spec's supported_ops"),
        dims: str = Form(default="", description="symbolic dims, name=size,name=size"),
        trip_counts: str = Form(default="", description=TRIP_COUNTS_FORM),
        state: AppState = Depends(get_state)) -> Response:
    """``/advice/partition`` for an uploaded ONNX model (at most ``PERFMODEL_MAX_UPLOAD_BYTES``)."""
    data = await read_upload(file, state.settings.max_upload_bytes)
    bindings = parse_dims(dims)
    trips = parse_trip_counts(trip_counts)
    ops = [o.strip() for o in supported_ops.split(",") if o.strip()] or None
    device, _ = await run_in_threadpool(state.hardware, hardware)
    host, _ = await run_in_threadpool(state.hardware, fallback)
    graph = await run_in_threadpool(_onnx_graph, data, bindings, trips)
    return json_response(await run_in_threadpool(_partition_json, graph, device, host, ops))


@router.post("/advice/precision/onnx", response_model=PrecisionOut)
async def advise_precision_onnx(
        file: UploadFile = File(description="an ONNX model"), hardware: str = Form(...),
        dims: str = Form(default="", description="symbolic dims, name=size,name=size"),
        fp32_math: Literal["framework", "tf32", "ieee"] = Form(default="framework"),
        trip_counts: str = Form(default="", description=TRIP_COUNTS_FORM),
        state: AppState = Depends(get_state)) -> Response:
    """``/advice/precision`` for an uploaded ONNX model (at most ``PERFMODEL_MAX_UPLOAD_BYTES``)."""
    data = await read_upload(file, state.settings.max_upload_bytes)
    bindings = parse_dims(dims)
    trips = parse_trip_counts(trip_counts)
    device, _ = await run_in_threadpool(state.hardware, hardware)
    graph = await run_in_threadpool(_onnx_graph, data, bindings, trips)
    return json_response(await run_in_threadpool(_precision_json, graph, device, fp32_math))
