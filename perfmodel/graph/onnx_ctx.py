"""ONNX import context: tensor shapes/dtypes after shape inference, constant tensors (initializers and the
outputs of ``Constant`` / constant-shaped ``ConstantOfShape`` nodes), and which weights are already charged."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from perfmodel.graph.ir import GraphError
from perfmodel.graph.loops import LoopTrips
from perfmodel.graph.onnx_fold import FOLDABLE, MAX_FOLD_ELEMENTS, fold_node, tensor_value

ONNX_DTYPES = {"FLOAT": "fp32", "FLOAT16": "fp16", "BFLOAT16": "bf16", "DOUBLE": "fp64", "INT8": "int8",
               "UINT8": "int8", "INT16": "int32", "UINT16": "int32", "INT32": "int32", "UINT32": "int32",
               "INT64": "int64", "UINT64": "int64", "BOOL": "bool", "FLOAT8E4M3FN": "fp8_e4m3",
               "FLOAT8E4M3FNUZ": "fp8_e4m3", "FLOAT8E5M2": "fp8_e5m2", "FLOAT8E5M2FNUZ": "fp8_e5m2",
               "INT4": "int4", "UINT4": "int4"}
INDEX_TYPES = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)  # shape constants and indices, not weights
Shape = tuple[int, ...]
Info = tuple[Shape, str]


class Ctx:
    """Tensor shapes/dtypes, initializer values, and which initializers are already charged."""

    def __init__(self, model: onnx.ModelProto, dims: dict[str, int], graph: onnx.GraphProto | None = None,
                 outer: Ctx | None = None, seed: dict[str, Info] | None = None,
                 trips: LoopTrips | None = None) -> None:
        """``graph``: a subgraph (If/Loop/Scan body) read in the scope of ``outer``, whose tensors it sees;
        ``seed``: shapes of the subgraph's inputs taken from the enclosing node (used where its value_info
        has none); ``trips``: the user's loop trip counts and the loops met (shared with every subgraph)."""
        g = graph if graph is not None else model.graph
        self.model = model
        self.dims = dims
        self.info: dict[str, Info] = {**(outer.info if outer else {}), **(seed or {})}
        self.init: dict[str, onnx.TensorProto] = {**(outer.init if outer else {}), **{t.name: t for t in g.initializer}}
        self.charged: set[str] = set(outer.charged) if outer else set()
        self.unbound: dict[str, list[str]] = dict(outer.unbound) if outer else {}  # tensor -> open dims
        # tensor with open dims -> its shape with -1 at each open axis (a Scan whose length the user sets)
        self.partial: dict[str, Info] = dict(outer.partial) if outer else {}
        self.notes: list[dict[str, Any]] = outer.notes if outer else []  # control-flow diagnostics
        self.trips: LoopTrips = outer.trips if outer else (trips or LoopTrips())
        self.sub_tensors: dict[str, Info] = {}  # tensors of unrolled subgraph copies (onnx_control)
        for vi in [*g.input, *g.value_info, *g.output]:
            parsed = self._value_info(vi)
            if parsed is not None:
                self.info[vi.name] = parsed
        for t in g.initializer:
            self.info[t.name] = (tuple(int(d) for d in t.dims), dtype_of(t.data_type, t.name))
        self.folded: set[str] = set(outer.folded) if outer else set()  # outputs of constant-producing nodes
        self.made: dict[str, tuple[Shape, int]] = dict(outer.made) if outer else {}  # ConstantOfShape weights
        self.values: dict[str, Any] = dict(outer.values) if outer else {}  # folded shape arithmetic (onnx_fold)
        self._opset = list(model.opset_import)
        for node in g.node:
            self._constant(node)
            self._fold(node)

    def _fold(self, node: onnx.NodeProto) -> None:
        """Fold a node whose inputs are all constants; its outputs become free, with known shapes."""
        if node.op_type not in FOLDABLE:
            return
        local: dict[str, Any] = {}
        for name in node.input:
            if name in self.values:
                local[name] = self.values[name]
            elif name in self.init and numel_of(self.init[name].dims) <= MAX_FOLD_ELEMENTS:
                try:  # external data not loaded, an odd encoding: the node stays run-time work
                    local[name] = self.values[name] = tensor_value(self.init[name])
                except Exception:  # numpy_helper raises several types
                    return
        shapes = {n: self.info[n][0] for n in node.input[:1] if n in self.info}
        for out, value in fold_node(node, local, shapes, self._opset).items():
            self.values[out] = value
            if out not in self.folded:
                self.folded.add(out)
                code = helper.np_dtype_to_tensor_dtype(value.dtype)
                self.info[out] = (tuple(int(d) for d in value.shape), dtype_of(code, out))

    def _constant(self, node: onnx.NodeProto) -> None:
        """Record the tensor a ``Constant`` / constant-shaped ``ConstantOfShape`` node makes."""
        if not node.output:
            return
        out = node.output[0]
        if node.op_type == "Constant":
            value = next((a for a in node.attribute if a.name == "value"), None)
            if value is not None:
                tensor = onnx.TensorProto()
                tensor.CopyFrom(value.t)
                tensor.name = out
                self.init[out] = tensor
                self.info.setdefault(out, (tuple(int(d) for d in tensor.dims), dtype_of(tensor.data_type, out)))
            self.folded.add(out)
        elif node.op_type == "ConstantOfShape" and node.input and node.input[0]:
            shape = self.ints(node.input[0])
            if shape is None or any(d < 0 for d in shape):
                return  # a run-time shape: costed as a fill
            value = next((a for a in node.attribute if a.name == "value"), None)
            code = value.t.data_type if value is not None else onnx.TensorProto.FLOAT
            self.made[out] = (tuple(shape), code)
            self.info.setdefault(out, (tuple(shape), dtype_of(code, out)))
            self.folded.add(out)

    def _value_info(self, vi: onnx.ValueInfoProto) -> Info | None:
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            return None
        shape: list[int] = []
        open_dims: list[str] = []
        for axis, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value"):
                shape.append(int(d.dim_value))
            elif d.dim_param in self.dims:
                shape.append(int(self.dims[d.dim_param]))
            else:
                # onnx shape inference names a data-dependent dim it made 'unk__N' (NonZero's count)
                made = not d.dim_param or d.dim_param.startswith("unk__")
                open_dims.append(f"axis {axis}" + (f" ({d.dim_param!r})" if d.dim_param else "") if made
                                 else repr(d.dim_param))
        if open_dims:
            self.unbound[vi.name] = open_dims  # a node that needs the tensor names them
            self.partial[vi.name] = (tuple(int(d.dim_value) if d.HasField("dim_value") else
                                           int(self.dims[d.dim_param]) if d.dim_param in self.dims else -1
                                           for d in tt.shape.dim), dtype_of(tt.elem_type, vi.name))
            return None
        return tuple(shape), dtype_of(tt.elem_type, vi.name)

    def get(self, name: str, node: str) -> Info:
        if name not in self.info:
            raise GraphError(node, self.missing(name))
        return self.info[name]

    def missing(self, name: str) -> str:
        """Why ``name`` has no shape: its unbound symbolic dims by name (bind them), its data-dependent axes
        (ONNX inference leaves them open: NonZero, a run-time Reshape), or no shape at all."""
        open_dims = self.unbound.get(name, [])
        symbolic = [d for d in open_dims if not d.startswith("axis ")]
        if symbolic:
            binds = " ".join(f"--dim {d.strip(chr(39))}=SIZE" for d in symbolic)
            return (f"tensor {name!r} has unbound symbolic dim{'s' if len(symbolic) > 1 else ''} "
                    f"{', '.join(symbolic)}: bind with dims={{'name': size}} / {binds}")
        if open_dims:
            return (f"tensor {name!r} has {', '.join(open_dims)} unknown (data-dependent: ONNX shape inference "
                    "cannot size it; a named one binds with --dim name=SIZE)")
        return (f"shape or dtype of tensor {name!r} is unknown (shape inference could not resolve it; bind "
                "symbolic dims with dims={'name': size} / --dim name=size)")

    def mask_like(self, name: str) -> bool:
        """A float constant that is not a learned weight: all elements equal (a mask of ones, a scalar) or an
        additive attention mask (only 0 and ±inf / ±float max). Consumed by folded shape arithmetic, it is not a
        parameter; a ``ConstantOfShape`` weight (the ONNX backend-test light models) always is."""
        value = self.values.get(name)
        if name in self.made or value is None or value.size == 0 or value.dtype.kind != "f":
            return False
        flat = value.reshape(-1)
        if bool((flat == flat[0]).all()):
            return True
        big = np.abs(flat) >= np.finfo(value.dtype).max
        return bool(((flat == 0) | big | np.isinf(flat)).all())

    def ints(self, name: str) -> list[int] | None:
        if name in self.values:
            return [int(v) for v in self.values[name].reshape(-1)]
        t = self.init.get(name)
        return [int(v) for v in numpy_helper.to_array(t).reshape(-1)] if t is not None else None

    def floats(self, name: str) -> list[float] | None:
        t = self.init.get(name)
        return [float(v) for v in numpy_helper.to_array(t).reshape(-1)] if t is not None else None


def numel_of(dims: Any) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def dtype_of(code: int, where: str) -> str:
    name = onnx.TensorProto.DataType.Name(code)
    if name not in ONNX_DTYPES:
        raise GraphError(where, f"ONNX dtype {name} is not supported; known: {', '.join(ONNX_DTYPES)}")
    return ONNX_DTYPES[name]


def attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}
