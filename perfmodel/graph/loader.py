"""Resolve a MODEL (bundled config name, config.json, .onnx file, graph JSON, or a dict) and estimate it.

``estimate_model`` is what the CLI and the API call: for LLM configs it estimates the prefill
(time to first token) and the decode step (time per output token), or one of them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from perfmodel.graph.estimate import Progress, estimate
from perfmodel.graph.ir import Graph, GraphError
from perfmodel.graph.llm_build import LlmWorkload, build_llm
from perfmodel.graph.llm_config import CONFIG_DIR, LlmConfig, bundled
from perfmodel.graph.parallel import Parallelism
from perfmodel.hardware import Hardware
from perfmodel.roofline import HardwareLike, SpaceName, resolve_hardware

PhaseChoice = Literal["prefill", "decode", "both", "train"]


def resolve_model(model: str | dict[str, Any],
                  trip_counts: Mapping[str, int] | None = None) -> LlmConfig | Graph | bytes:
    """A bundled name, a path (.json config or graph, .onnx, .tflite, StableHLO .mlir), or a dict (config or
    graph JSON). ``trip_counts`` reaches the StableHLO importer here (ONNX bytes are imported by the caller)."""
    if isinstance(model, dict):
        return Graph.from_json(model) if "nodes" in model else LlmConfig.from_hf(model)
    if (CONFIG_DIR / f"{model.lower()}.json").is_file():
        return bundled(model)
    path = Path(model)
    if not path.is_file():
        return bundled(model)  # raises with the list of bundled names
    if path.suffix.lower() == ".onnx":
        return path.read_bytes()
    if path.suffix.lower() == ".tflite":
        from perfmodel.graph.tflite_import import import_tflite

        return import_tflite(path, name=path.stem)
    if path.suffix.lower() == ".mlir":  # StableHLO text, e.g. jax.jit(f).lower(...).as_text()
        from perfmodel.graph.stablehlo_import import import_stablehlo

        return import_stablehlo(path, name=path.stem, trip_counts=trip_counts)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise GraphError("model", f"{path}: not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise GraphError("model", f"{path}: expected a JSON object")
    return Graph.from_json(data) if "nodes" in data else LlmConfig.from_hf(data, path.stem)


def _with_node(par: Parallelism, hw: Hardware) -> Parallelism:
    per_node = hw.interconnect.devices_per_node if hw.interconnect else None
    return dataclasses.replace(par, devices_per_node=per_node or 8)


def estimate_model(model: str | dict[str, Any] | LlmConfig | Graph | bytes, hardware: HardwareLike,
                   workload: LlmWorkload | None = None, parallel: Parallelism | None = None,
                   phase: PhaseChoice = "both", space: SpaceName = "full", fusion: bool = True,
                   check_memory: bool = True, dims: dict[str, int] | None = None,
                   detail: bool = True, progress: Progress | None = None,
                   fp32_math: str = "framework", trip_counts: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Estimate ``model`` on ``hardware``; returns JSON (per phase for LLMs, with a summary).

    ``trip_counts``: iterations of the ONNX Loops / StableHLO whiles whose count the file does not hold, by
    loop name (``"*"``: every other one; ``perfmodel.graph.loops``); the result's ``loops`` lists each loop
    with the count used, where it came from and its share of the step.

    ``progress(stage, fraction)`` hears each stage start (load, import, [phase: ]build/fuse/compile/cost/
    schedule/memory/report) with the fraction of the work done before it, in [0, 1)."""
    def note(stage: str, fraction: float) -> None:
        if progress is not None:
            progress(stage, fraction)

    hw = resolve_hardware(hardware)
    note("load", 0.0)
    source = model if isinstance(model, LlmConfig | Graph | bytes) else resolve_model(model, trip_counts)
    if isinstance(source, bytes):
        from perfmodel.graph.onnx_import import import_onnx

        note("import", 0.05)
        source = import_onnx(source, dims=dims, trip_counts=trip_counts)
    if isinstance(source, Graph):
        result = estimate(source, hw, space, fusion, check_memory, progress=progress, span=(0.1, 0.9),
                          fp32_math=fp32_math)
        note("report", 0.9)
        return result.to_json(detail)
    par = _with_node(parallel or Parallelism(), hw)
    base = workload or LlmWorkload()
    phases: list[Literal["prefill", "decode", "train"]] = (
        ["prefill", "decode"] if phase == "both" else [phase])
    out: dict[str, Any] = {"model": source.name, "hardware": hw.id, "parallelism": par.to_json()}
    share = 0.9 / len(phases)  # of the whole, per phase: build 10 %, estimate 80 %, report 10 %
    for i, p in enumerate(phases):
        start = 0.1 + i * share
        note(f"{p}: build", start)
        graph = build_llm(source, dataclasses.replace(base, phase=p), par)
        estimated = estimate(graph, hw, space, fusion, check_memory, progress=progress,
                             span=(start + 0.1 * share, start + 0.9 * share), prefix=f"{p}: ", fp32_math=fp32_math)
        note(f"{p}: report", start + 0.9 * share)
        out[p] = estimated.to_json(detail)
    out["summary"] = _summary(out)
    return out


def _summary(out: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for p in ("prefill", "decode", "train"):
        if p in out:
            llm = out[p]["llm"] or {}
            summary[p] = {k: v for k, v in llm.items() if k != "phase"}
            summary[p]["bottleneck"] = out[p]["bottleneck"]["summary"]
            summary[p]["memory_bytes_per_device"] = out[p]["memory"]["total_bytes"]
    return summary
