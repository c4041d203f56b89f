"""TFLite parameters as a compiler engineer counts them (issue 26): a PRELU's per-channel slopes are parameters, and
a constant buffer two ops read (MediaPipe pose_detection's dequantized depthwise bias, read by two convolutions) is
counted once. Real files: MediaPipe hand_recrop and face_landmark (mediapipe 0.10.14 wheel, Apache-2.0;
tests/data/tflite/README.md); the golden counts come from the flatbuffers themselves with the ``tflite`` package."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from perfmodel.graph import estimate
from perfmodel.graph.tflite_import import import_tflite

tflite = pytest.importorskip("tflite")

DATA = Path(__file__).resolve().parents[1] / "data" / "tflite"
A100 = "nvidia-a100-sxm4-80gb"
WEIGHTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "PRELU")


def _golden(data: bytes) -> tuple[int, int]:
    """(elements of every distinct stored buffer a conv / FC / PRELU reads, directly or through a DEQUANTIZE of a
    constant; 2·MACs of all CONV_2D / DEPTHWISE_CONV_2D) from the flatbuffer's own tensors."""
    model = tflite.Model.GetRootAsModel(data, 0)
    sub = model.Subgraphs(0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if k.isupper()}

    def kind(op: Any) -> str:
        code = model.OperatorCodes(op.OpcodeIndex())
        return str(names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), ""))

    def shape(i: int) -> list[int]:
        return [int(d) for d in sub.Tensors(i).ShapeAsNumpy()]

    def stored(i: int) -> bool:
        return bool(model.Buffers(sub.Tensors(i).Buffer()).DataLength() > 0)

    source = {}
    for k in range(sub.OperatorsLength()):
        op = sub.Operators(k)
        if kind(op) in ("DEQUANTIZE", "DENSIFY") and stored(int(op.Inputs(0))):
            source[int(op.Outputs(0))] = int(op.Inputs(0))
    buffers: dict[int, int] = {}
    flops = 0
    for k in range(sub.OperatorsLength()):
        op = sub.Operators(k)
        if kind(op) not in WEIGHTED:
            continue
        ins = [int(i) for i in op.InputsAsNumpy() if i >= 0]
        for i in ins[1:]:
            if i in source or stored(i):
                buffers[sub.Tensors(source.get(i, i)).Buffer()] = math.prod(shape(i))
        if kind(op) in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            x, w, y = shape(ins[0]), shape(ins[1]), shape(int(op.Outputs(0)))
            flops += 2 * math.prod(y) * w[1] * w[2] * (1 if kind(op) == "DEPTHWISE_CONV_2D" else x[3])
    return sum(buffers.values()), flops


@pytest.mark.parametrize(("name", "params", "prelus", "conv_flops"), [
    ("hand_recrop.tflite", 27_012, 13, 19_939_456),  # before: 26,676 (PRELU slopes left out)
    ("face_landmark.tflite", 604_685, 23, 69_958_080),  # before: 602,941
])
def test_real_files_count_prelu_slopes_and_exact_conv_flops(name: str, params: int, prelus: int,
                                                           conv_flops: int) -> None:
    data = (DATA / name).read_bytes()
    graph = import_tflite(data)
    assert not [n.name for n in graph.nodes if n.unsupported]
    assert graph.params == _golden(data)[0] == params
    prelu = [n for n in graph.nodes if n.source_op == "PRELU"]
    assert len(prelu) == prelus and all(n.params > 0 and n.weight_bytes > 0 for n in prelu)
    result = estimate(graph, A100, fusion=False, check_memory=False)
    convs = [i for i, n in enumerate(graph.nodes) if n.source_op in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    assert sum(float(result.batch.flops[result.index][i]) for i in convs) == _golden(data)[1] == conv_flops


def test_a_bias_two_convolutions_share_is_counted_once() -> None:
    from tests.graph.tflite_models import shared_fp16_bias_prelu

    data = shared_fp16_bias_prelu(size=8, width=16)
    graph = import_tflite(data)
    dw = [n for n in graph.nodes if n.source_op == "DEPTHWISE_CONV_2D"]
    assert [n.params for n in dw] == [9 * 16 + 16, 9 * 16]  # the second reads the bias the first holds
    assert graph.params == _golden(data)[0] == 2 * 9 * 16 + 16 + 16  # before: 352 (the bias twice)
