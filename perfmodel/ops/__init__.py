"""Operators: frozen dataclasses with FLOPs per engine class, bytes per role and loop dims.

The op classes are imported on first use (PEP 562 ``__getattr__``), and ``make_op`` / ``Op.from_dict`` import only
the module of the kind they build (``perfmodel.ops.base.OP_MODULES``): ``perfmodel predict`` of a matmul does not
import the attention, convolution or collective code (issue 25)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from perfmodel.lazy import lazy_exports
from perfmodel.ops.base import ENGINE_CLASSES, ROLES, Op, OpError, Work, op_class, op_kinds

if TYPE_CHECKING:
    from perfmodel.ops.attention import Attention
    from perfmodel.ops.collective import (
        AllGather,
        AllReduce,
        AllToAll,
        Collective,
        HostCopy,
        ReduceScatter,
        SendRecv,
    )
    from perfmodel.ops.conv import Conv2d
    from perfmodel.ops.elementwise import Elementwise, Reduce, Reshape, Transpose
    from perfmodel.ops.indexing import Embedding, Gather, Scatter
    from perfmodel.ops.matmul import Matmul
    from perfmodel.ops.norm import BatchNorm, LayerNorm, RmsNorm, Softmax
    from perfmodel.ops.quant import Dequantize, Quantize

_LAZY = {
    "Attention": "perfmodel.ops.attention",
    **dict.fromkeys(["AllGather", "AllReduce", "AllToAll", "Collective", "HostCopy", "ReduceScatter", "SendRecv"],
                    "perfmodel.ops.collective"),
    "Conv2d": "perfmodel.ops.conv",
    **dict.fromkeys(["Elementwise", "Reduce", "Reshape", "Transpose"], "perfmodel.ops.elementwise"),
    **dict.fromkeys(["Embedding", "Gather", "Scatter"], "perfmodel.ops.indexing"),
    "Matmul": "perfmodel.ops.matmul",
    **dict.fromkeys(["BatchNorm", "LayerNorm", "RmsNorm", "Softmax"], "perfmodel.ops.norm"),
    **dict.fromkeys(["Dequantize", "Quantize"], "perfmodel.ops.quant"),
}


def make_op(op: Op | dict[str, object]) -> Op:
    """An ``Op`` as given, or built from a plain dict with a ``kind``."""
    return op if isinstance(op, Op) else Op.from_dict(dict(op))


__all__ = [
    "ENGINE_CLASSES", "ROLES", "AllGather", "AllReduce", "AllToAll", "Attention", "BatchNorm",
    "Collective", "Conv2d", "Dequantize", "Elementwise", "Embedding", "Gather", "HostCopy", "LayerNorm",
    "Matmul", "Op", "OpError", "Quantize", "Reduce", "ReduceScatter", "Reshape", "RmsNorm",
    "Scatter", "SendRecv", "Softmax", "Transpose", "Work", "make_op", "op_class", "op_kinds",
]

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
