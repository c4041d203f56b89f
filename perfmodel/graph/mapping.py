"""Shared by the importers: elementwise cost table, fallback ops, and shape helpers.

Elementwise costs are (FLOPs, transcendentals) per output element; an op type missing here is
not covered and becomes an ``unsupported`` node with a bytes-bound fallback.
"""

from __future__ import annotations

import math
from typing import Any

from perfmodel.dtypes import parse_dtype

ELEMENTWISE: dict[str, tuple[float, float]] = {
    # binary arithmetic and comparisons
    "add": (1, 0), "sub": (1, 0), "mul": (1, 0), "div": (1, 0), "pow": (1, 1), "max": (1, 0), "min": (1, 0),
    "maximum": (1, 0), "minimum": (1, 0), "mod": (1, 0), "fmod": (1, 0), "rsub": (1, 0),
    "equal": (1, 0), "eq": (1, 0), "ne": (1, 0), "greater": (1, 0), "gt": (1, 0), "less": (1, 0), "lt": (1, 0),
    "ge": (1, 0), "le": (1, 0), "greaterorequal": (1, 0), "lessorequal": (1, 0),
    "and": (1, 0), "or": (1, 0), "xor": (1, 0), "not": (1, 0), "logical_not": (1, 0), "bitwise_not": (1, 0),
    "where": (1, 0), "masked_fill": (1, 0), "clip": (2, 0), "clamp": (2, 0),
    # unary math
    "neg": (1, 0), "abs": (1, 0), "reciprocal": (1, 0), "sqrt": (0, 1), "rsqrt": (0, 1), "exp": (0, 1),
    "log": (0, 1), "sin": (0, 1), "cos": (0, 1), "tanh": (1, 1), "erf": (1, 1), "floor": (1, 0), "ceil": (1, 0),
    "round": (1, 0), "sign": (1, 0), "square": (1, 0),
    # activations
    "relu": (1, 0), "leakyrelu": (2, 0), "leaky_relu": (2, 0), "sigmoid": (2, 1), "silu": (3, 1), "swish": (3, 1),
    "gelu": (8, 1), "fastgelu": (8, 1), "biasgelu": (9, 1), "quickgelu": (3, 1), "hardsigmoid": (3, 0),
    "hardswish": (4, 0), "elu": (2, 1), "selu": (3, 1), "softplus": (2, 2), "mish": (5, 3), "prelu": (2, 0),
    "celu": (3, 1), "hardtanh": (2, 0), "relu6": (2, 0),
    # copies and conversions
    "cast": (0, 0), "_to_copy": (0, 0), "copy": (0, 0), "clone": (0, 0), "contiguous": (0, 0), "to": (0, 0),
    "type_as": (0, 0), "dropout": (0, 0), "identity_copy": (0, 0),
}

VIEWS = {"reshape", "view", "_unsafe_view", "flatten", "squeeze", "unsqueeze", "identity", "alias", "detach",
         "expand_dims", "unflatten", "t", "transpose", "permute", "expand", "slice", "select", "split",
         "split_with_sizes", "chunk", "unbind", "view_as", "narrow", "lift_fresh_copy", "shape", "size", "sym_size",
         "constant", "dropout_eval", "getitem"}


class UnsupportedOp(Exception):
    """An operator (or one of its attributes) a file importer cannot cost with its own model: the importer
    catches it, costs the node with ``fallback`` and lists it with this message."""


def transposed_conv(rows: int, k: int, cols: int, groups: int, out_shape: tuple[int, ...] | list[int], dtype: str,
                    bias: bool) -> list[dict[str, Any]]:
    """A transposed convolution as the libraries run it: per group the GEMM x[rows = N·input positions, k = C/g]
    × w[k, cols = O/g·kernel] writes the columns, col2im scatter-adds them into y (the columns read once more, a
    FLOP each), and y is written once (plus the bias)."""
    return [{"kind": "matmul", "m": rows, "n": cols, "k": k, "dtype": dtype, "batch": groups},
            {"kind": "elementwise", "shape": [groups * rows * cols], "dtype": storage(dtype), "inputs": 1,
             "outputs": 0, "flops_per_element": 1.0},
            {"kind": "elementwise", "shape": list(out_shape) or [1], "dtype": storage(dtype), "inputs": 0,
             "outputs": 1, "flops_per_element": 1.0 if bias else 0.0}]


def numel(shape: tuple[int, ...] | list[int]) -> int:
    return math.prod(shape) if shape else 1


def as_2d(shape: tuple[int, ...] | list[int], axis: int = -1) -> list[int]:
    """[rows, cols] of a tensor reduced over ``axis`` and the dims after it."""
    if not shape:
        return [1, 1]
    axis = axis % len(shape)
    return [max(numel(shape[:axis]), 1), max(numel(shape[axis:]), 1)]


def elementwise(op_type: str, out_shape: tuple[int, ...] | list[int], dtype: str, inputs: int,
                outputs: int = 1) -> dict[str, Any] | None:
    """An elementwise op for ``op_type`` (None when the type is not in the table)."""
    cost = ELEMENTWISE.get(op_type.lower())
    if cost is None:
        return None
    return {"kind": "elementwise", "shape": list(out_shape) or [1], "dtype": storage(dtype), "inputs": inputs,
            "outputs": outputs, "flops_per_element": float(cost[0]), "transcendentals_per_element": float(cost[1])}


def view(shape: tuple[int, ...] | list[int], dtype: str) -> dict[str, Any]:
    """A view: no bytes, no kernel (a contiguous reshape)."""
    s = list(shape) or [1]
    return {"kind": "reshape", "shape": s, "new_shape": s, "dtype": storage(dtype), "contiguous": True}


def storage(dtype: str) -> str:
    """Ops take float/int storage dtypes; bool moves as one byte."""
    return "int8" if dtype == "bool" else parse_dtype(dtype).value


def fallback(shapes_in: list[tuple[int, ...]], shapes_out: list[tuple[int, ...]], dtype: str) -> dict[str, Any]:
    """A zero-FLOP stream that reads every input and writes every output once: bytes / DRAM bandwidth."""
    sizes = [numel(s) for s in (*shapes_in, *shapes_out)] or [1]
    largest = max(sizes)
    ins = max(1, round(sum(numel(s) for s in shapes_in) / largest)) if shapes_in else 0
    outs = max(1, round(sum(numel(s) for s in shapes_out) / largest)) if shapes_out else 0
    if ins + outs == 0:
        ins = 1
    return {"kind": "elementwise", "shape": [largest], "dtype": storage(dtype), "inputs": ins, "outputs": outs,
            "flops_per_element": 0.0}


def full_size_inputs(shapes: list[tuple[int, ...]], out_shape: tuple[int, ...]) -> int:
    """Inputs as large as the output (broadcast scalars and bias rows are not streamed per element)."""
    n = numel(out_shape)
    return max(1, sum(1 for s in shapes if numel(s) >= n))


def layer_of(path: str) -> str:
    """'/model/layers.0/attn/MatMul' -> 'model/layers.0/attn' (the node's enclosing scope)."""
    parts = [p for p in path.replace("::", "/").split("/") if p]
    return "/".join(parts[:-1]) or "model"
