"""The graph advice works on: a bundled LLM name, a config.json, a graph JSON, an .onnx file, or their dicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from perfmodel.graph.ir import Graph
from perfmodel.graph.llm_build import LlmWorkload, build_llm
from perfmodel.graph.loader import resolve_model
from perfmodel.hardware import Hardware
from perfmodel.roofline import HardwareLike, resolve_hardware


def advice_graph(model: str | dict[str, Any] | Graph, phase: Literal["prefill", "decode"] = "prefill",
                 batch: int = 1, prompt_tokens: int = 2048, dtype: str = "bf16",
                 dims: dict[str, int] | None = None, trip_counts: Mapping[str, int] | None = None) -> Graph:
    """One step's graph: LLM configs are built for ``phase`` (``batch`` sequences of ``prompt_tokens``);
    ``trip_counts``: loops whose count the ONNX / StableHLO file does not hold (``perfmodel.graph.loops``)."""
    source = model if isinstance(model, Graph) else resolve_model(model, trip_counts)
    if isinstance(source, Graph):
        return source
    if isinstance(source, bytes):
        from perfmodel.graph.onnx_import import import_onnx

        return import_onnx(source, dims=dims, trip_counts=trip_counts)
    return build_llm(source, LlmWorkload(phase=phase, batch=batch, prompt_tokens=prompt_tokens,
                                         kv_len=prompt_tokens + 1, dtype=dtype))


def with_supported_ops(hardware: HardwareLike, supported_ops: list[str] | None) -> Hardware:
    """``hardware`` with its declared op support replaced (None: as the spec says)."""
    hw = resolve_hardware(hardware)
    return hw if supported_ops is None else hw.model_copy(update={"supported_ops": tuple(supported_ops)})
