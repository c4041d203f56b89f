"""TensorFlow Lite flatbuffers → graph (the ``tflite`` package reads the schema): one node per operator of
subgraph 0, quantized int8 / uint8 models with their scales.

- ``CONV_2D`` → ``conv2d`` (NHWC, filter OHWI, SAME / VALID padding, strides, dilation), ``DEPTHWISE_CONV_2D``
  → a grouped conv (groups = input channels), ``FULLY_CONNECTED`` → ``matmul`` (weights [N, K]),
  ``BATCH_MATMUL`` → batched ``matmul``; each in the tensors' dtype (int8 models run the int8 matrix path).
- Element-wise ops by the shared cost table, ``SOFTMAX`` → ``softmax``, ``MEAN`` / ``SUM`` / ``REDUCE_MAX`` →
  ``reduce``, pools → windowed reductions, ``QUANTIZE`` / ``DEQUANTIZE`` → the quant ops, reshapes → views.
- Weights: constant tensors (a buffer with data) read by a conv / FC / matmul, with their quantization scales
  (fp32 per channel or per tensor) in ``weight_bytes``; ``graph.meta["quantization"]`` lists each quantized
  tensor's scale count, zero points and quantized dimension.
- Any other operator is ``unsupported`` with a bytes-bound fallback and the reason; a truncated or foreign file
  is a ``GraphError``; a dynamic (-1) dimension names the tensor.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from perfmodel.dtypes import parse_dtype
from perfmodel.graph.ir import Graph, GraphError, Node
from perfmodel.graph.mapping import (
    UnsupportedOp,
    elementwise,
    fallback,
    full_size_inputs,
    storage,
    transposed_conv,
    view,
)
from perfmodel.ops import OpError, make_op

TFLITE_DTYPES = {"FLOAT32": "fp32", "FLOAT16": "fp16", "BFLOAT16": "bf16", "FLOAT64": "fp64", "INT8": "int8",
                 "UINT8": "int8", "INT16": "int32", "UINT16": "int32", "INT32": "int32", "UINT32": "int32",
                 "INT64": "int64", "UINT64": "int64", "BOOL": "bool", "INT4": "int4",
                 # a resource handle: one int32 resource id (kernels/read_variable.cc checks kTfLiteInt32, 1 element)
                 "RESOURCE": "int32", "VARIANT": "int32"}
ELEMENTWISE_OPS = {"ADD": "add", "SUB": "sub", "MUL": "mul", "DIV": "div", "MAXIMUM": "max", "MINIMUM": "min",
                   "RELU": "relu", "RELU6": "relu6", "RELU_N1_TO_1": "clamp", "LEAKY_RELU": "leakyrelu",
                   "LOGISTIC": "sigmoid", "TANH": "tanh", "HARD_SWISH": "hardswish", "GELU": "gelu", "EXP": "exp",
                   "LOG": "log", "SQRT": "sqrt", "RSQRT": "rsqrt", "ABS": "abs", "NEG": "neg", "POW": "pow",
                   "SQUARED_DIFFERENCE": "sub", "SQUARE": "square", "CAST": "cast", "PRELU": "prelu",
                   "ELU": "elu", "FLOOR": "floor", "CEIL": "ceil", "SIN": "sin", "COS": "cos", "SELECT": "where",
                   "SELECT_V2": "where", "EQUAL": "eq", "LESS": "lt", "GREATER": "gt", "LOGICAL_AND": "and",
                   "LOGICAL_OR": "or", "LOGICAL_NOT": "not", "ADD_N": "add"}
VIEW_OPS = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS", "SHAPE", "STRIDED_SLICE", "SLICE", "GATHER", "SPLIT", "SPLIT_V",
            "UNPACK", "PACK"}
COPY_OPS = {"CONCATENATION", "PAD", "PADV2", "MIRROR_PAD", "TILE", "BROADCAST_TO", "RESIZE_NEAREST_NEIGHBOR"}
REDUCE_OPS = {"MEAN": "mean", "SUM": "sum", "REDUCE_MAX": "max", "REDUCE_MIN": "min"}
TRANSPOSED_CONV = ("TRANSPOSE_CONV", "CUSTOM:Convolution2DTransposeBias")  # the latter: MediaPipe's, with a bias
LOAD_TIME_OPS = ("DEQUANTIZE", "DENSIFY")  # on a constant input: run once when the interpreter loads the model
PERMUTE_OPS = ("DEPTH_TO_SPACE", "SPACE_TO_DEPTH")  # a block permutation: x read once, y written once
# ops whose constant inputs are parameters (PRELU: its per-channel slopes)
WEIGHTED_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL", "CONV_3D", "PRELU",
                *TRANSPOSED_CONV)
# streaming state (resource variables): VAR_HANDLE only names a variable and CALL_ONCE runs its init subgraph in
# the first invocation and is a no-op after it (kernels/call_once.cc): nothing per step; READ_VARIABLE and
# ASSIGN_VARIABLE memcpy the variable's tensor out / in (kernels/read_variable.cc, assign_variable.cc)
NO_STEP_OPS = ("VAR_HANDLE", "CALL_ONCE")
BILINEAR_FLOPS_PER_DIM = 3.0  # a lerp per interpolated spatial dimension (as the ONNX importer's Resize)


def import_tflite(source: str | Path | bytes, name: str | None = None) -> Graph:
    """Read a .tflite file (path or bytes); map every operator of the first subgraph."""
    try:
        import tflite
    except ImportError as exc:
        raise GraphError("<model>", "reading TFLite needs the 'tflite' package (pip install tflite)") from exc
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    try:
        model = tflite.Model.GetRootAsModel(data, 0)
        sub = model.Subgraphs(0)
        if sub is None:
            raise GraphError("<model>", "the TFLite model has no subgraph")
        reader = _Reader(tflite, model, sub)
        graph = Graph(name=name or (sub.Name() or b"tflite").decode(errors="replace"))
        for index in range(sub.OperatorsLength()):
            for node in reader.nodes(index):
                graph.add(node)
    except GraphError:
        raise
    except Exception as exc:  # flatbuffers raises struct / index errors on truncated or foreign bytes
        raise GraphError("<model>", f"not a readable TFLite flatbuffer: {type(exc).__name__}: {exc}") from exc
    for t, (shape, dtype) in reader.info.items():
        graph.add_tensor(t, shape, storage(dtype))
    graph.meta.update({"kind": "tflite", "phase": "inference", "quantization": reader.quantization})
    return graph


class _Reader:
    """Tensors (shape, dtype, constant or not, quantization) and operators of one subgraph."""

    def __init__(self, tflite: Any, model: Any, sub: Any) -> None:
        self.tfl, self.model, self.sub = tflite, model, sub
        ops = {v: k for k, v in vars(tflite.BuiltinOperator).items() if k.isupper()}
        types = {v: k for k, v in vars(tflite.TensorType).items() if k.isupper()}
        self.codes = []
        for i in range(model.OperatorCodesLength()):
            code = model.OperatorCodes(i)
            number = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
            self.codes.append(ops.get(number, f"CODE_{number}") if number != 32 else _custom(code))
        self.info: dict[str, tuple[tuple[int, ...], str]] = {}
        self.names: list[str] = []
        self.constant: list[bool] = []
        self.scales: list[int] = []
        self.quantization: dict[str, dict[str, Any]] = {}
        for i in range(sub.TensorsLength()):
            t = sub.Tensors(i)
            tname = (t.Name() or f"tensor_{i}".encode()).decode(errors="replace")
            shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
            if any(d < 0 for d in shape):
                raise GraphError(tname, f"dynamic dimension -1 in shape {list(shape)}: give a fixed input size")
            kind = types.get(t.Type(), "FLOAT32")
            if kind not in TFLITE_DTYPES:
                raise GraphError(tname, f"tensor type {kind} is not one the model knows ({', '.join(TFLITE_DTYPES)})")
            self.names.append(tname)
            self.info[tname] = (shape, TFLITE_DTYPES[kind])
            buffer = model.Buffers(t.Buffer()) if t.Buffer() < model.BuffersLength() else None
            self.constant.append(bool(buffer is not None and (buffer.DataLength() > 0 or buffer.Size() > 0)))
            q = t.Quantization()
            count = q.ScaleLength() if q is not None else 0
            self.scales.append(count)
            if count:
                self.quantization[tname] = {"scales": count, "zero_points": [int(z) for z in q.ZeroPointAsNumpy()][:4],
                                            "quantized_dimension": int(q.QuantizedDimension()), "dtype": kind.lower()}
        # a DEQUANTIZE or DENSIFY of a constant (fp16 / int8 / sparse weights stored compressed) runs once, at
        # load: TFLite's kernels keep the output as a persistent tensor and skip later invocations
        # (kernels/dequantize.cc float_dequantized_weights_initialized, kernels/densify.cc
        # dense_weights_initialized), so the output is a weight and the node costs nothing per step
        self.folded: set[int] = set()
        # the stored buffer behind each tensor (a folded output: its constant source's) and those already counted
        self.buffer_of = [int(sub.Tensors(i).Buffer()) for i in range(sub.TensorsLength())]
        self.counted: set[int] = set()
        for k in range(sub.OperatorsLength()):
            op = sub.Operators(k)
            if self.codes[op.OpcodeIndex()] in LOAD_TIME_OPS and op.InputsLength() and op.OutputsLength():
                src, dst = int(op.Inputs(0)), int(op.Outputs(0))
                if 0 <= src < len(self.constant) and self.constant[src] and 0 <= dst < len(self.constant):
                    self.constant[dst] = True
                    self.buffer_of[dst] = self.buffer_of[src]
                    self.folded.add(k)

    def nodes(self, index: int) -> list[Node]:
        """The operator's node (a transposed convolution: its GEMM, col2im and output write, as for ONNX)."""
        op = self.sub.Operators(index)
        code = self.codes[op.OpcodeIndex()]
        ins = [int(i) for i in op.InputsAsNumpy()] if op.InputsLength() else []
        outs = [int(i) for i in op.OutputsAsNumpy()] if op.OutputsLength() else []
        ins = [i for i in ins if i >= 0]  # -1: an optional input left out (a bias)
        label = f"{code.lower()}_{index}" + (f" ({self.names[outs[0]]})" if outs else "")
        in_shapes = [self.info[self.names[i]][0] for i in ins]
        out_shape, out_dtype = self.info[self.names[outs[0]]] if outs else ((1,), "fp32")
        weights = self._new_weights(code, ins) if index not in self.folded else []
        params = sum(math.prod(self.info[self.names[i]][0]) for i in weights)
        weight_bytes = sum(self._bytes(i) for i in weights)
        names_in, names_out = [self.names[i] for i in ins], [self.names[o] for o in outs]
        if index in self.folded:  # weights dequantized / densified at load: nothing per step
            return [Node(label, view(out_shape, out_dtype), names_in, names_out, source_op=code)]
        try:
            built = self._op(code, op, ins, out_shape, out_dtype)
            if built is None:
                raise UnsupportedOp(f"TFLite {code} is not modelled")
            ops = built if isinstance(built, list) else [built]
            for one in ops:
                make_op(one)
        except (UnsupportedOp, OpError, ValueError, IndexError, KeyError) as exc:
            why = str(exc) if isinstance(exc, UnsupportedOp) else f"{code}: {exc}"
            return [Node(label, None, names_in, names_out, source_op=code, unsupported=why,
                         fallback=fallback([tuple(s) for s in in_shapes], [out_shape], out_dtype))]
        if len(ops) == 1:
            return [Node(label, ops[0], names_in, names_out, source_op=code, params=params,
                         weight_bytes=weight_bytes)]
        return [Node(f"{label}/{k}", one, names_in, names_out, source_op=code, params=params if k == 0 else 0,
                     weight_bytes=weight_bytes if k == 0 else 0.0) for k, one in enumerate(ops)]

    def _new_weights(self, code: str, ins: list[int]) -> list[int]:
        """The constant inputs of a weighted op not yet counted: a buffer two ops share (a bias read by two
        convolutions) is one set of parameters, held by the first op that reads it."""
        if code not in WEIGHTED_OPS:
            return []
        found = []
        for i in ins[1:] if code == "TRANSPOSE_CONV" else ins:  # TRANSPOSE_CONV's input 0: the output shape
            if not self.constant[i]:
                continue
            key = self.buffer_of[i]
            if key not in self.counted:
                self.counted.add(key)
                found.append(i)
        return found

    def _bytes(self, i: int) -> float:
        shape, dtype = self.info[self.names[i]]
        return math.prod(shape) * float(parse_dtype(storage(dtype)).bytes) + 4.0 * self.scales[i]

    def _options(self, op: Any, cls_name: str) -> Any:
        table = op.BuiltinOptions()
        if table is None:
            return None
        options = getattr(self.tfl, cls_name)()
        options.Init(table.Bytes, table.Pos)
        return options

    def _op(self, code: str, op: Any, ins: list[int], out_shape: tuple[int, ...],
            out_dtype: str) -> dict[str, Any] | list[dict[str, Any]] | None:
        shape = [self.info[self.names[i]][0] for i in ins]
        dtype = self.info[self.names[ins[0]]][1] if ins else out_dtype
        if code in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            return self._conv(code, op, shape[0], shape[1], dtype)
        if code in TRANSPOSED_CONV:
            at = 2 if code == "TRANSPOSE_CONV" else 0  # TRANSPOSE_CONV: (output shape, weights, x[, bias])
            x, w = shape[at], shape[1]
            has_bias = len(ins) > (3 if code == "TRANSPOSE_CONV" else 2)
            return _transposed_conv(x, w, out_shape, self.info[self.names[ins[at]]][1], has_bias)
        if code == "FULLY_CONNECTED":
            n, k = shape[1]
            return {"kind": "matmul", "m": max(1, math.prod(shape[0]) // k), "n": n, "k": k, "dtype": storage(dtype),
                    "b_batched": False, "out_dtype": storage(out_dtype)}
        if code == "BATCH_MATMUL":
            a, b = shape[0], shape[1]
            return {"kind": "matmul", "m": a[-2], "n": b[-1], "k": a[-1], "batch": max(1, math.prod(a[:-2])),
                    "dtype": storage(dtype), "b_batched": len(b) > 2}
        if code in ELEMENTWISE_OPS:
            return elementwise(ELEMENTWISE_OPS[code], out_shape, out_dtype, full_size_inputs(
                [tuple(s) for s in shape], out_shape) if shape else 1)
        if code == "SOFTMAX":
            return {"kind": "softmax", "shape": list(out_shape) or [1], "dtype": storage(out_dtype)}
        if code in REDUCE_OPS:
            axes = [int(a) % max(len(shape[0]), 1) for a in self._axes(ins)] or list(range(len(shape[0])))
            return {"kind": "reduce", "shape": list(shape[0]) or [1], "axes": axes, "dtype": storage(dtype),
                    "op": REDUCE_OPS[code]}
        if code in ("AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"):
            pool = self._options(op, "Pool2DOptions")
            window = (pool.FilterHeight() * pool.FilterWidth()) if pool is not None else 1
            reads = max(1, round(math.prod(shape[0]) / max(math.prod(out_shape), 1)))
            return {"kind": "elementwise", "shape": list(out_shape), "dtype": storage(dtype), "inputs": reads,
                    "outputs": 1, "flops_per_element": float(window)}
        if code in ("QUANTIZE", "DEQUANTIZE"):
            kind = "quantize" if code == "QUANTIZE" else "dequantize"
            return {"kind": kind, "shape": list(out_shape) or [1], "from_dtype": storage(dtype),
                    "to_dtype": storage(out_dtype)}
        if code == "TRANSPOSE":
            perm = self._axes(ins) or list(range(len(shape[0])))[::-1]
            return {"kind": "transpose", "shape": list(shape[0]) or [1], "perm": perm, "dtype": storage(dtype)}
        if code == "RESIZE_BILINEAR":  # NHWC: each output interpolates from 4 neighbours (in cache)
            dims = sum(1 for a, b in zip(shape[0][1:3], out_shape[1:3], strict=False) if a != b)
            reads = round(math.prod(shape[0]) / max(math.prod(out_shape), 1))
            return {"kind": "elementwise", "shape": list(out_shape), "dtype": storage(dtype), "inputs": reads,
                    "outputs": 1, "flops_per_element": BILINEAR_FLOPS_PER_DIM * dims}
        if code in PERMUTE_OPS or code == "READ_VARIABLE":
            return elementwise("copy", out_shape, out_dtype, 1)
        if code == "ASSIGN_VARIABLE":  # (resource id, value): the value is copied into the variable; no output
            return elementwise("copy", shape[1], self.info[self.names[ins[1]]][1], 1)
        if code in NO_STEP_OPS:
            return view(out_shape, out_dtype)
        if code in VIEW_OPS:
            return view(out_shape, out_dtype)
        if code in COPY_OPS:
            return elementwise("copy", out_shape, out_dtype, max(1, len(ins)))
        return None

    def _axes(self, ins: list[int]) -> list[int]:
        """The constant int tensor of a reduce's axes / a transpose's perm (second input)."""
        if len(ins) < 2 or not self.constant[ins[1]]:
            return []
        t = self.sub.Tensors(ins[1])
        raw = self.model.Buffers(t.Buffer()).DataAsNumpy()
        dtype = np.int64 if self.info[self.names[ins[1]]][1] == "int64" else np.int32
        return [int(v) for v in np.frombuffer(raw.tobytes(), dtype=dtype)]

    def _conv(self, code: str, op: Any, x: tuple[int, ...], w: tuple[int, ...], dtype: str) -> dict[str, Any]:
        depthwise = code == "DEPTHWISE_CONV_2D"
        options = self._options(op, "DepthwiseConv2DOptions" if depthwise else "Conv2DOptions")
        if options is None:
            raise UnsupportedOp(f"{code} without options")
        n, h, wd, c = x
        kh, kw = w[1], w[2]
        out_channels = w[3] if depthwise else w[0]
        dh, dw = options.DilationHFactor() or 1, options.DilationWFactor() or 1
        same = options.Padding() == self.tfl.Padding.SAME
        return {"kind": "conv2d", "batch": n, "in_channels": c, "out_channels": out_channels, "height": h,
                "width": wd, "kernel_h": kh, "kernel_w": kw, "stride": options.StrideH() or 1,
                "stride_w": options.StrideW() or 1, "padding": ((kh - 1) * dh) // 2 if same else 0,
                "padding_w": ((kw - 1) * dw) // 2 if same else 0, "dilation": dh, "dilation_w": dw,
                "groups": c if depthwise else 1, "dtype": storage(dtype), "layout": "nhwc"}


def _transposed_conv(x: tuple[int, ...], w: tuple[int, ...], y: tuple[int, ...], dtype: str,
                     bias: bool) -> list[dict[str, Any]]:
    """A 2-D transposed convolution of NHWC x and OHWI weights (``mapping.transposed_conv``)."""
    if len(x) != 4 or len(w) != 4 or x[3] != w[3]:
        raise UnsupportedOp(f"transposed convolution of input {list(x)} and weight {list(w)}: need NHWC x and "
                            "OHWI weights with the same input channels")
    return transposed_conv(x[0] * x[1] * x[2], x[3], w[0] * w[1] * w[2], 1, y, storage(dtype), bias)


def _custom(code: Any) -> str:
    name = code.CustomCode()
    return f"CUSTOM:{name.decode(errors='replace')}" if name else "CUSTOM"
