"""Whole models: op graphs, importers (ONNX, torch.export, LLM configs), fusion, parallelism, estimates."""

from typing import TYPE_CHECKING

from perfmodel.lazy import keep_names_over_submodules, lazy_exports

if TYPE_CHECKING:
    from perfmodel.graph.estimate import CompiledGraph, Estimate, compile_graph, estimate
    from perfmodel.graph.fusion import FusionReport, fuse
    from perfmodel.graph.ir import Graph, GraphError, Node, Tensor
    from perfmodel.graph.llm_build import LlmWorkload, build_llm
    from perfmodel.graph.llm_config import LlmConfig, bundled, bundled_names
    from perfmodel.graph.memory import DoesNotFit, MemoryReport
    from perfmodel.graph.parallel import Parallelism

# imported on first use: `perfmodel --help` and the estimate/sweep commands' registration stay light
_LAZY = {
    "CompiledGraph": "perfmodel.graph.estimate", "Estimate": "perfmodel.graph.estimate",
    "compile_graph": "perfmodel.graph.estimate", "estimate": "perfmodel.graph.estimate",
    "FusionReport": "perfmodel.graph.fusion", "fuse": "perfmodel.graph.fusion",
    "Graph": "perfmodel.graph.ir", "GraphError": "perfmodel.graph.ir",
    "Node": "perfmodel.graph.ir", "Tensor": "perfmodel.graph.ir",
    "LlmWorkload": "perfmodel.graph.llm_build", "build_llm": "perfmodel.graph.llm_build",
    "LlmConfig": "perfmodel.graph.llm_config", "bundled": "perfmodel.graph.llm_config",
    "bundled_names": "perfmodel.graph.llm_config", "DoesNotFit": "perfmodel.graph.memory",
    "MemoryReport": "perfmodel.graph.memory", "Parallelism": "perfmodel.graph.parallel",
}

__all__ = [
    "CompiledGraph", "DoesNotFit", "Estimate", "FusionReport", "Graph", "GraphError", "LlmConfig", "LlmWorkload",
    "MemoryReport", "Node", "Parallelism", "Tensor", "build_llm", "bundled", "bundled_names", "compile_graph",
    "estimate", "fuse",
]

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
keep_names_over_submodules(__name__, {"estimate"})  # the function, as before, not the submodule
