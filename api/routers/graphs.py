"""POST /graphs/estimate (a bundled model, a config JSON or a graph JSON) and /graphs/estimate/onnx, /tflite and
/stablehlo (uploads of the files the CLI reads).

Errors in the model (unknown op fields, shapes, a model that does not fit) are ValueErrors
(``GraphError``, ``OpError``) that the app turns into 422 naming the node or field.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from fastapi import APIRouter, Depends, File, Form, HTTPException, Response, UploadFile
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, model_validator

from api.deps import get_state, require_read
from api.routers.convert import finite, json_bytes, json_response
from api.state import AppState
from perfmodel.graph.ir import GraphError
from perfmodel.graph.llm_build import LlmWorkload
from perfmodel.graph.loader import estimate_model
from perfmodel.graph.loops import parse_trip_counts
from perfmodel.graph.parallel import Parallelism
from perfmodel.hardware import Hardware

router = APIRouter(tags=["graphs"], dependencies=[Depends(require_read)])
UPLOAD_CHUNK_BYTES = 1 << 20
# the file uploads below, whose bodies may reach PERFMODEL_MAX_UPLOAD_BYTES (api.main's BodySizeLimit; other
# bodies stop at PERFMODEL_MAX_BODY_BYTES): tflite and stablehlo stopped at the body limit before
UPLOAD_PATHS = ("/graphs/estimate/onnx", "/graphs/estimate/tflite", "/graphs/estimate/stablehlo")
Fp32MathForm = Literal["framework", "tf32", "ieee"]  # perfmodel.graph.math_mode.FP32_MATH
TRIP_COUNTS_FORM = ("iterations of loops whose count the file does not hold: loop=N,*=N or a JSON object "
                    "(default 1 each, the time per iteration; the result's 'loops' lists them)")


class EstimateRequest(BaseModel):
    """Exactly one of ``model`` (bundled name), ``config`` (HF config.json) or ``graph`` (graph JSON)."""

    model_config = ConfigDict(extra="forbid")
    hardware: str
    model: str | None = Field(default=None, description="bundled config name, e.g. llama-3-70b")
    config: dict[str, Any] | None = Field(default=None, description="a Hugging Face config.json object")
    graph: dict[str, Any] | None = Field(default=None, description="a perfmodel graph JSON")
    phase: Literal["prefill", "decode", "both", "train"] = "both"
    batch: int = Field(default=1, ge=1)
    prompt_tokens: int = Field(default=2048, ge=1)
    kv_len: int | None = Field(default=None, ge=1)
    dtype: str = "bf16"
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    attention: Literal["flash", "unfused"] = "flash"
    devices: int = Field(default=1, ge=1)
    tp: int | None = Field(default=None, ge=1)
    pp: int = Field(default=1, ge=1)
    dp: int | None = Field(default=None, ge=1)
    ep: int = Field(default=1, ge=1)
    microbatches: int = Field(default=1, ge=1)
    fusion: bool = True
    fp32_math: Fp32MathForm = Field(
        default="framework", description="fp32 convolutions / matmuls: framework (TF32 convolutions on NVIDIA "
        "Ampere and later, TensorFlow graphs' matmuls too), tf32 (all on TF32 where native) or ieee (CUDA cores)")
    space: Literal["compact", "full"] = "full"
    check_memory: bool = True
    detail: bool = Field(default=True, description="include per-op rows, the hierarchy and the timeline")
    trip_counts: dict[str, int] | None = Field(
        default=None, description="uploads (ONNX, StableHLO): iterations of loops whose count the file does not "
        "hold, by loop name ('*': every other loop; default 1, the time per iteration); the result's 'loops' "
        "lists each loop, the count used and its share of the step")

    @model_validator(mode="after")
    def _one_source(self) -> EstimateRequest:
        given = [k for k in ("model", "config", "graph") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of model, config or graph (got {given or 'none'})")
        return self


def _run(hardware: Hardware, source: Any, body: EstimateRequest | None = None,
         dims: dict[str, int] | None = None) -> bytes:
    """Estimate ``source`` (a bundled name, a config or graph dict, ONNX bytes or an imported graph)."""
    b = body or EstimateRequest(hardware=hardware.id, model="onnx")
    par = Parallelism.for_devices(b.devices, tp=b.tp, pp=b.pp, dp=b.dp, ep=b.ep, microbatches=b.microbatches)
    workload = LlmWorkload(batch=b.batch, prompt_tokens=b.prompt_tokens, kv_len=b.kv_len or b.prompt_tokens + 1,
                           dtype=b.dtype, weight_dtype=b.weight_dtype, kv_dtype=b.kv_dtype, attention=b.attention)
    result = estimate_model(source, hardware, workload, par, b.phase, b.space, b.fusion, b.check_memory, dims,
                            b.detail, fp32_math=b.fp32_math, trip_counts=b.trip_counts)
    step = result.get("step_time_s") if isinstance(result, dict) else 0.0
    if isinstance(step, float) and not math.isfinite(step):  # an op whose work overflows: no step time (was null)
        raise HTTPException(422, "graph: an op's work overflows a float64, so the step has no time: not a real "
                                 "workload")
    return json_bytes(finite(result))


@router.post("/graphs/estimate")
def estimate_graph(body: EstimateRequest, state: AppState = Depends(get_state)) -> Response:
    """Estimate a whole model: per-op/per-layer breakdown, TTFT/TPOT, bottlenecks, memory, diagnostics."""
    hardware, _ = state.hardware(body.hardware)
    source: Any = body.model if body.model is not None else (body.config if body.config is not None else body.graph)
    return json_response(_run(hardware, source, body))


@router.post("/graphs/estimate/onnx")
async def estimate_onnx(file: UploadFile = File(description="an ONNX model"),
                        hardware: str = Form(...),
                        dims: str = Form(default="", description="symbolic dims, name=size,name=size"),
                        fusion: bool = Form(default=True), detail: bool = Form(default=True),
                        fp32_math: Fp32MathForm = Form(default="framework"),
                        trip_counts: str = Form(default="", description=TRIP_COUNTS_FORM),
                        state: AppState = Depends(get_state)) -> Response:
    """Estimate an uploaded ONNX model (at most ``PERFMODEL_MAX_UPLOAD_BYTES``)."""
    data = await read_upload(file, state.settings.max_upload_bytes)
    bindings = parse_dims(dims)
    device, _ = await run_in_threadpool(state.hardware, hardware)
    body = EstimateRequest(hardware=hardware, model="onnx", fusion=fusion, detail=detail,
                           fp32_math=fp32_math, trip_counts=parse_trip_counts(trip_counts))
    return json_response(await run_in_threadpool(_run, device, data, body, bindings))


@router.post("/graphs/estimate/tflite")
async def estimate_tflite(file: UploadFile = File(description="a TensorFlow Lite flatbuffer"),
                          hardware: str = Form(...), fusion: bool = Form(default=True),
                          detail: bool = Form(default=True), fp32_math: Fp32MathForm = Form(default="framework"),
                          state: AppState = Depends(get_state)) -> Response:
    """Estimate an uploaded .tflite model (quantized int8 ones on the int8 path; the CLI reads the same files)."""
    return await _estimate_file("tflite", file, EstimateRequest(hardware=hardware, model="tflite", fusion=fusion,
                                                                detail=detail, fp32_math=fp32_math), state)


@router.post("/graphs/estimate/stablehlo")
async def estimate_stablehlo(file: UploadFile = File(description="StableHLO text: jax.jit(f).lower(...).as_text()"),
                             hardware: str = Form(...), fusion: bool = Form(default=True),
                             detail: bool = Form(default=True), fp32_math: Fp32MathForm = Form(default="framework"),
                             trip_counts: str = Form(default="", description=TRIP_COUNTS_FORM),
                             state: AppState = Depends(get_state)) -> Response:
    """Estimate uploaded StableHLO text (``main``, else the first public function, is the step)."""
    return await _estimate_file("stablehlo", file, EstimateRequest(
        hardware=hardware, model="stablehlo", fusion=fusion, detail=detail, fp32_math=fp32_math,
        trip_counts=parse_trip_counts(trip_counts)), state)


async def _estimate_file(kind: Literal["tflite", "stablehlo"], file: UploadFile, body: EstimateRequest,
                         state: AppState) -> Response:
    """An uploaded model file of ``kind`` read into a graph and estimated on ``body``'s device and options."""
    data = await read_upload(file, state.settings.max_upload_bytes)
    device, _ = await run_in_threadpool(state.hardware, body.hardware)
    graph = await run_in_threadpool(_file_graph, kind, data, file.filename, body.trip_counts)
    return json_response(await run_in_threadpool(_run, device, graph, body))


def _file_graph(kind: Literal["tflite", "stablehlo"], data: bytes, filename: str | None,
                trip_counts: dict[str, int] | None = None) -> Any:
    name = (filename or kind).rsplit("/", 1)[-1].rsplit(".", 1)[0] or kind
    if kind == "tflite":
        from perfmodel.graph.tflite_import import import_tflite

        return import_tflite(data, name=name)
    from perfmodel.graph.stablehlo_import import import_stablehlo

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GraphError("<model>", f"StableHLO must be UTF-8 text: {exc}") from exc
    return import_stablehlo(text, name=name, trip_counts=trip_counts)


async def read_upload(file: UploadFile, limit: int) -> bytes:
    """The uploaded ONNX file, read in chunks; a 413 past ``limit`` bytes."""
    data = bytearray()
    while chunk := await file.read(UPLOAD_CHUNK_BYTES):
        data.extend(chunk)
        if len(data) > limit:
            raise HTTPException(413, f"upload larger than {limit} bytes (PERFMODEL_MAX_UPLOAD_BYTES)")
    return bytes(data)


def parse_dims(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = pair.partition("=")
        if not sep or not value.strip().isdigit():
            raise GraphError("dims", f"expected name=size, got {pair!r}")
        out[key.strip()] = int(value)
    return out
