"""Operators: frozen dataclasses with FLOPs per engine class, bytes per role and loop dims."""

from perfmodel.ops.attention import Attention
from perfmodel.ops.base import ENGINE_CLASSES, ROLES, Op, OpError, Work, op_class, op_kinds
from perfmodel.ops.collective import AllGather, AllReduce, AllToAll, Collective, HostCopy, ReduceScatter, SendRecv
from perfmodel.ops.conv import Conv2d
from perfmodel.ops.elementwise import Elementwise, Reduce, Reshape, Transpose
from perfmodel.ops.indexing import Embedding, Gather, Scatter
from perfmodel.ops.matmul import Matmul
from perfmodel.ops.norm import BatchNorm, LayerNorm, RmsNorm, Softmax
from perfmodel.ops.quant import Dequantize, Quantize


def make_op(op: Op | dict[str, object]) -> Op:
    """An ``Op`` as given, or built from a plain dict with a ``kind``."""
    return op if isinstance(op, Op) else Op.from_dict(dict(op))


__all__ = [
    "ENGINE_CLASSES", "ROLES", "AllGather", "AllReduce", "AllToAll", "Attention", "BatchNorm",
    "Collective", "Conv2d", "Dequantize", "Elementwise", "Embedding", "Gather", "HostCopy", "LayerNorm",
    "Matmul", "Op", "OpError", "Quantize", "Reduce", "ReduceScatter", "Reshape", "RmsNorm",
    "Scatter", "SendRecv", "Softmax", "Transpose", "Work", "make_op", "op_class", "op_kinds",
]
