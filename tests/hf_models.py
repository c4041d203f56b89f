"""The real Hugging Face configs of ``tests/graph/hf_configs`` (each with its ``_source``) for the importer tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perfmodel.graph import LlmWorkload, build_llm
from perfmodel.graph.ir import Graph
from perfmodel.graph.llm_config import LlmConfig

CONFIGS = Path(__file__).parent / "graph" / "hf_configs"


def hf_data(name: str) -> dict[str, Any]:
    """``hf_configs/<name>.json`` as parsed JSON (a fresh copy each call)."""
    data: dict[str, Any] = json.loads((CONFIGS / f"{name}.json").read_text())
    return data


def hf_config(name: str) -> LlmConfig:
    return LlmConfig.from_hf(hf_data(name), name)


def hf_graph(name: str, **workload: Any) -> Graph:
    """The model's graph for one decode step (batch 1, 16 cached tokens) unless ``workload`` says otherwise."""
    return build_llm(hf_config(name), LlmWorkload(**{"phase": "decode", "batch": 1, "kv_len": 16, **workload}))
