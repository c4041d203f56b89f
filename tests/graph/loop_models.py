"""Shared constants of the loop trip-count tests: the devices, the ONNX element types and the body GEMM's size,
and the FLOPs of a graph's nodes (optionally those imported from one source op)."""

from __future__ import annotations

from onnx import TensorProto

from perfmodel.graph.ir import Graph
from perfmodel.ops import make_op

A100 = "nvidia-a100-sxm4-80gb"
H100 = "nvidia-h100-sxm5-80gb"
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
ROWS, HID = 8, 256
GEMM = 2 * ROWS * HID * HID  # x[8, 256] @ W[256, 256]


def graph_flops(g: Graph, source: str | None = None) -> float:
    """Sum of the costed nodes' FLOPs, optionally only those whose ``source_op`` is ``source``."""
    return sum(make_op(n.op).flops for n in g.nodes if n.op is not None and (source is None or n.source_op == source))
