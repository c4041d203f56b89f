"""Whole models: op graphs, importers (ONNX, torch.export, LLM configs), fusion, parallelism, estimates."""

from perfmodel.graph.estimate import CompiledGraph, Estimate, compile_graph, estimate
from perfmodel.graph.fusion import FusionReport, fuse
from perfmodel.graph.ir import Graph, GraphError, Node, Tensor
from perfmodel.graph.llm_build import LlmWorkload, build_llm
from perfmodel.graph.llm_config import LlmConfig, bundled, bundled_names
from perfmodel.graph.memory import DoesNotFit, MemoryReport
from perfmodel.graph.parallel import Parallelism

__all__ = [
    "CompiledGraph", "DoesNotFit", "Estimate", "FusionReport", "Graph", "GraphError", "LlmConfig", "LlmWorkload",
    "MemoryReport", "Node", "Parallelism", "Tensor", "build_llm", "bundled", "bundled_names", "compile_graph",
    "estimate", "fuse",
]
