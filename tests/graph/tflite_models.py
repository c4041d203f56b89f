"""Small TFLite flatbuffers written with the ``tflite`` package's schema builders (no TensorFlow needed).

``int8_mobilenet_block``: a quantized int8 model as the TFLite converter writes one (per-channel weight scales
on axis 0 / 3, int32 biases, per-tensor activation scales): CONV_2D 3x3/2 SAME → DEPTHWISE_CONV_2D 3x3 →
CONV_2D 1x1 → MEAN over H, W → FULLY_CONNECTED → SOFTMAX → DEQUANTIZE to float32.
"""

from __future__ import annotations

from typing import Any

import flatbuffers
import numpy as np
import tflite
from tflite.BuiltinOperator import BuiltinOperator as Op
from tflite.BuiltinOptions import BuiltinOptions as Opt
from tflite.TensorType import TensorType as TT


class _Writer:
    def __init__(self) -> None:
        self.b = flatbuffers.Builder(1024)
        self.buffers: list[bytes] = [b""]  # buffer 0: empty (the schema's convention)
        self.tensors: list[dict[str, Any]] = []
        self.codes: list[int] = []
        self.ops: list[tuple[int, list[int], list[int], int, Any]] = []

    def tensor(self, name: str, shape: list[int], dtype: int, data: bytes | None = None,
               scales: list[float] | None = None, axis: int = 0) -> int:
        buffer = 0
        if data is not None:
            self.buffers.append(data)
            buffer = len(self.buffers) - 1
        self.tensors.append({"name": name, "shape": shape, "type": dtype, "buffer": buffer, "scales": scales,
                             "axis": axis})
        return len(self.tensors) - 1

    def op(self, code: int, inputs: list[int], outputs: list[int], options_type: int = 0,
           options: Any = None) -> None:
        if code not in self.codes:
            self.codes.append(code)
        self.ops.append((self.codes.index(code), inputs, outputs, options_type, options))

    def _ints(self, start: Any, values: list[int]) -> int:
        start(self.b, len(values))
        for v in reversed(values):
            self.b.PrependInt32(v)
        return int(self.b.EndVector())

    def _offsets(self, start: Any, values: list[int]) -> int:
        start(self.b, len(values))
        for v in reversed(values):
            self.b.PrependUOffsetTRelative(v)
        return int(self.b.EndVector())

    def finish(self) -> bytes:
        b = self.b
        buffers = []
        for data in self.buffers:
            vec = b.CreateByteVector(data) if data else None
            tflite.BufferStart(b)
            if vec is not None:
                tflite.BufferAddData(b, vec)
            buffers.append(tflite.BufferEnd(b))
        tensors = []
        for t in self.tensors:
            name = b.CreateString(t["name"])
            shape = self._ints(tflite.TensorStartShapeVector, t["shape"])
            quant = None
            if t["scales"]:
                tflite.QuantizationParametersStartScaleVector(b, len(t["scales"]))
                for s in reversed(t["scales"]):
                    b.PrependFloat32(s)
                scale = b.EndVector()
                tflite.QuantizationParametersStartZeroPointVector(b, len(t["scales"]))
                for _ in t["scales"]:
                    b.PrependInt64(0)
                zero = b.EndVector()
                tflite.QuantizationParametersStart(b)
                tflite.QuantizationParametersAddScale(b, scale)
                tflite.QuantizationParametersAddZeroPoint(b, zero)
                tflite.QuantizationParametersAddQuantizedDimension(b, t["axis"])
                quant = tflite.QuantizationParametersEnd(b)
            tflite.TensorStart(b)
            tflite.TensorAddShape(b, shape)
            tflite.TensorAddType(b, t["type"])
            tflite.TensorAddBuffer(b, t["buffer"])
            tflite.TensorAddName(b, name)
            if quant is not None:
                tflite.TensorAddQuantization(b, quant)
            tensors.append(tflite.TensorEnd(b))
        operators = []
        for code, ins, outs, options_type, options in self.ops:
            built_options = options(b) if options is not None else None
            inputs = self._ints(tflite.OperatorStartInputsVector, ins)
            outputs = self._ints(tflite.OperatorStartOutputsVector, outs)
            tflite.OperatorStart(b)
            tflite.OperatorAddOpcodeIndex(b, code)
            tflite.OperatorAddInputs(b, inputs)
            tflite.OperatorAddOutputs(b, outputs)
            if built_options is not None:
                tflite.OperatorAddBuiltinOptionsType(b, options_type)
                tflite.OperatorAddBuiltinOptions(b, built_options)
            operators.append(tflite.OperatorEnd(b))
        codes = []
        for number in self.codes:
            tflite.OperatorCodeStart(b)
            tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(number, 127))
            tflite.OperatorCodeAddBuiltinCode(b, number)
            tflite.OperatorCodeAddVersion(b, 1)
            codes.append(tflite.OperatorCodeEnd(b))
        name = b.CreateString("main")
        tensor_vec = self._offsets(tflite.SubGraphStartTensorsVector, tensors)
        op_vec = self._offsets(tflite.SubGraphStartOperatorsVector, operators)
        inputs = self._ints(tflite.SubGraphStartInputsVector, [0])
        outputs = self._ints(tflite.SubGraphStartOutputsVector, [len(self.tensors) - 1])
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tensor_vec)
        tflite.SubGraphAddOperators(b, op_vec)
        tflite.SubGraphAddInputs(b, inputs)
        tflite.SubGraphAddOutputs(b, outputs)
        tflite.SubGraphAddName(b, name)
        subgraph = tflite.SubGraphEnd(b)
        subgraphs = self._offsets(tflite.ModelStartSubgraphsVector, [subgraph])
        code_vec = self._offsets(tflite.ModelStartOperatorCodesVector, codes)
        buffer_vec = self._offsets(tflite.ModelStartBuffersVector, buffers)
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, 3)
        tflite.ModelAddOperatorCodes(b, code_vec)
        tflite.ModelAddSubgraphs(b, subgraphs)
        tflite.ModelAddBuffers(b, buffer_vec)
        b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def _conv_options(stride: int, same: bool, depthwise: bool = False) -> Any:
    def build(b: flatbuffers.Builder) -> int:
        prefix = "DepthwiseConv2DOptions" if depthwise else "Conv2DOptions"
        getattr(tflite, f"{prefix}Start")(b)
        getattr(tflite, f"{prefix}AddPadding")(b, tflite.Padding.SAME if same else tflite.Padding.VALID)
        getattr(tflite, f"{prefix}AddStrideW")(b, stride)
        getattr(tflite, f"{prefix}AddStrideH")(b, stride)
        getattr(tflite, f"{prefix}AddDilationWFactor")(b, 1)
        getattr(tflite, f"{prefix}AddDilationHFactor")(b, 1)
        if depthwise:
            tflite.DepthwiseConv2DOptionsAddDepthMultiplier(b, 1)
        return int(getattr(tflite, f"{prefix}End")(b))

    return build


def int8_mobilenet_block(size: int = 32, width: int = 32, classes: int = 10) -> bytes:
    w = _Writer()
    rng = np.random.default_rng(0)

    def weights(*shape: int) -> bytes:
        return rng.integers(-127, 127, size=shape, dtype=np.int8).tobytes()

    def bias(n: int) -> bytes:
        return np.zeros(n, dtype=np.int32).tobytes()

    x = w.tensor("input", [1, size, size, 3], TT.INT8, scales=[0.02])
    k1 = w.tensor("conv1/weights", [width, 3, 3, 3], TT.INT8, weights(width, 3, 3, 3), [0.01] * width, 0)
    b1 = w.tensor("conv1/bias", [width], TT.INT32, bias(width), [0.0002] * width, 0)
    h1 = w.tensor("conv1/out", [1, size // 2, size // 2, width], TT.INT8, scales=[0.05])
    w.op(Op.CONV_2D, [x, k1, b1], [h1], Opt.Conv2DOptions, _conv_options(2, True))
    k2 = w.tensor("dw/weights", [1, 3, 3, width], TT.INT8, weights(1, 3, 3, width), [0.01] * width, 3)
    b2 = w.tensor("dw/bias", [width], TT.INT32, bias(width), [0.0005] * width, 0)
    h2 = w.tensor("dw/out", [1, size // 2, size // 2, width], TT.INT8, scales=[0.05])
    w.op(Op.DEPTHWISE_CONV_2D, [h1, k2, b2], [h2], Opt.DepthwiseConv2DOptions, _conv_options(1, True, True))
    k3 = w.tensor("pw/weights", [2 * width, 1, 1, width], TT.INT8, weights(2 * width, 1, 1, width),
                  [0.01] * (2 * width), 0)
    h3 = w.tensor("pw/out", [1, size // 2, size // 2, 2 * width], TT.INT8, scales=[0.05])
    w.op(Op.CONV_2D, [h2, k3, -1], [h3], Opt.Conv2DOptions, _conv_options(1, False))
    axes = w.tensor("mean/axes", [2], TT.INT32, np.array([1, 2], dtype=np.int32).tobytes())
    pooled = w.tensor("mean/out", [1, 2 * width], TT.INT8, scales=[0.05])
    w.op(Op.MEAN, [h3, axes], [pooled])
    k4 = w.tensor("fc/weights", [classes, 2 * width], TT.INT8, weights(classes, 2 * width), [0.01], 0)
    b4 = w.tensor("fc/bias", [classes], TT.INT32, bias(classes), [0.0005], 0)
    logits = w.tensor("fc/out", [1, classes], TT.INT8, scales=[0.1])
    w.op(Op.FULLY_CONNECTED, [pooled, k4, b4], [logits])
    probs = w.tensor("softmax/out", [1, classes], TT.INT8, scales=[1.0 / 256])
    w.op(Op.SOFTMAX, [logits], [probs])
    out = w.tensor("output", [1, classes], TT.FLOAT32)
    w.op(Op.DEQUANTIZE, [probs], [out])
    return w.finish()


def float_with_unmodelled_op(rows: int = 4, cols: int = 64, dynamic: bool = False) -> bytes:
    """FULLY_CONNECTED (float32) then CUMSUM, an operator the importer does not model; ``dynamic``: a -1 batch."""
    w = _Writer()
    x = w.tensor("x", [-1 if dynamic else rows, cols], TT.FLOAT32)
    k = w.tensor("fc/weights", [cols, cols], TT.FLOAT32, np.ones((cols, cols), np.float32).tobytes())
    h = w.tensor("fc/out", [rows, cols], TT.FLOAT32)
    w.op(Op.FULLY_CONNECTED, [x, k, -1], [h])
    axis = w.tensor("cumsum/axis", [], TT.INT32, np.array([1], dtype=np.int32).tobytes())
    y = w.tensor("y", [rows, cols], TT.FLOAT32)
    w.op(Op.CUMSUM, [h, axis], [y])
    return w.finish()


def shared_fp16_bias_prelu(size: int = 8, width: int = 16) -> bytes:
    """As MediaPipe's pose_detection: fp16 weights each behind a DEQUANTIZE, and one dequantized bias read by two
    DEPTHWISE_CONV_2D ops; a PRELU with per-channel slopes between them."""
    w = _Writer()
    rng = np.random.default_rng(1)

    def fp16(*shape: int) -> tuple[list[int], bytes]:
        return list(shape), rng.standard_normal(shape).astype(np.float16).tobytes()

    def dequantized(name: str, *shape: int) -> int:
        dims, data = fp16(*shape)
        raw = w.tensor(f"{name}_fp16", dims, TT.FLOAT16, data)
        out = w.tensor(f"{name}_dequantize", dims, TT.FLOAT32)
        w.op(Op.DEQUANTIZE, [raw], [out])
        return out

    x = w.tensor("input", [1, size, size, width], TT.FLOAT32)
    k1, k2 = dequantized("dw1/weights", 1, 3, 3, width), dequantized("dw2/weights", 1, 3, 3, width)
    bias = dequantized("shared/bias", width)
    alpha = w.tensor("prelu/alpha", [1, 1, width], TT.FLOAT32, np.full(width, 0.25, np.float32).tobytes())
    h1 = w.tensor("dw1/out", [1, size, size, width], TT.FLOAT32)
    w.op(Op.DEPTHWISE_CONV_2D, [x, k1, bias], [h1], Opt.DepthwiseConv2DOptions, _conv_options(1, True, True))
    h2 = w.tensor("prelu/out", [1, size, size, width], TT.FLOAT32)
    w.op(Op.PRELU, [h1, alpha], [h2])
    y = w.tensor("dw2/out", [1, size, size, width], TT.FLOAT32)
    w.op(Op.DEPTHWISE_CONV_2D, [h2, k2, bias], [y], Opt.DepthwiseConv2DOptions, _conv_options(1, True, True))
    return w.finish()
