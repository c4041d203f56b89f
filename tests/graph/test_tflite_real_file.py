"""A real TFLite file (MediaPipe's BlazeFace short-range detector, tests/data/tflite/README.md): every operator
maps, the fp16 weights behind DEQUANTIZE count as parameters, and each convolution's FLOPs equal a count taken
from the flatbuffer's own tensor shapes (issue 26)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from perfmodel.graph import estimate
from perfmodel.graph.tflite_import import import_tflite

tflite = pytest.importorskip("tflite")

FILE = Path(__file__).resolve().parents[1] / "data" / "tflite" / "face_detection_short_range.tflite"


def _golden() -> tuple[int, list[int]]:
    """(elements of the constant fp16 tensors, 2·MACs of each CONV_2D / DEPTHWISE_CONV_2D in order) straight from
    the flatbuffer: output elements × kernel window × input channels per group."""
    model = tflite.Model.GetRootAsModel(FILE.read_bytes(), 0)
    sub = model.Subgraphs(0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if k.isupper()}
    weights = 0
    for i in range(sub.TensorsLength()):
        t = sub.Tensors(i)
        if t.Type() == tflite.TensorType.FLOAT16 and model.Buffers(t.Buffer()).DataLength() > 0:
            weights += math.prod(int(d) for d in t.ShapeAsNumpy())  # Python ints: no int32 overflow
    flops = []
    for k in range(sub.OperatorsLength()):
        op = sub.Operators(k)
        code = names[max(model.OperatorCodes(op.OpcodeIndex()).BuiltinCode(),
                         model.OperatorCodes(op.OpcodeIndex()).DeprecatedBuiltinCode())]
        if code not in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            continue
        x, w, y = ([int(d) for d in sub.Tensors(int(j)).ShapeAsNumpy()] for j in (op.Inputs(0), op.Inputs(1),
                                                                                  op.Outputs(0)))
        per_output = w[1] * w[2] * (1 if code == "DEPTHWISE_CONV_2D" else x[3])  # OHWI / 1HWO kernels
        flops.append(2 * math.prod(y) * per_output)
    return weights, flops


def test_blazeface_imports_whole_with_its_weights_and_conv_flops() -> None:
    graph = import_tflite(FILE)
    assert len(graph.nodes) == 164
    assert not [n.name for n in graph.nodes if n.unsupported]
    weights, conv_flops = _golden()
    assert graph.params == weights == 101_390  # before: 0 (the weights sit behind DEQUANTIZE ops)
    result = estimate(graph, "nvidia-a100-sxm4-80gb", fusion=False, check_memory=False)
    flops = result.batch.flops[result.index]
    convs = [i for i, n in enumerate(graph.nodes) if n.source_op in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    assert len(convs) == 37 and [float(flops[i]) for i in convs] == [float(f) for f in conv_flops]
    assert sum(conv_flops) == 61_521_920  # 30.8 M multiply-adds for one 128 x 128 image


def test_weight_dequantize_runs_at_load_not_per_step() -> None:
    """TFLite keeps a constant DEQUANTIZE's output as a persistent tensor and skips it after the first run
    (tensorflow/lite/kernels/dequantize.cc), so the 74 weight DEQUANTIZE nodes cost no FLOPs and move no bytes."""
    graph = import_tflite(FILE)
    result = estimate(graph, "nvidia-a100-sxm4-80gb", fusion=False, check_memory=False)
    deq = [i for i, n in enumerate(graph.nodes) if n.source_op == "DEQUANTIZE"]
    assert len(deq) == 74
    assert all(float(result.batch.flops[result.index][i]) == 0.0 for i in deq)
    assert all(float(result.batch.compulsory_bytes[result.index][i]) == 0.0 for i in deq)
    assert all(float(result.batch.time_s[result.index][i]) <= 1e-9 for i in deq)
