"""Real TFLite files (MediaPipe models from the mediapipe 0.10.14 wheel, tests/data/tflite/README.md): every
builtin operator maps, the weights behind DEQUANTIZE / DENSIFY count as parameters and cost nothing per step, each
convolution's FLOPs equal a count taken from the flatbuffer's own tensor shapes, and MediaPipe's transposed
convolution (a CUSTOM operator) maps as ONNX's ConvTranspose does (issue 26)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from perfmodel.graph import estimate
from perfmodel.graph.tflite_import import import_tflite

tflite = pytest.importorskip("tflite")

DATA = Path(__file__).resolve().parents[1] / "data" / "tflite"
A100 = "nvidia-a100-sxm4-80gb"
WEIGHTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def _golden(name: str) -> tuple[int, list[int]]:
    """(weight + bias elements of every conv / FC, 2·MACs of each CONV_2D / DEPTHWISE_CONV_2D in order) straight
    from the flatbuffer's tensor shapes: output elements × kernel window × input channels per group."""
    model = tflite.Model.GetRootAsModel((DATA / name).read_bytes(), 0)
    sub = model.Subgraphs(0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if k.isupper()}

    def shape(index: int) -> list[int]:
        return [int(d) for d in sub.Tensors(index).ShapeAsNumpy()]  # Python ints: no int32 overflow

    weights, flops = 0, []
    for k in range(sub.OperatorsLength()):
        op = sub.Operators(k)
        code = model.OperatorCodes(op.OpcodeIndex())
        kind = names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "")
        if kind not in WEIGHTED:
            continue
        ins = [int(i) for i in op.InputsAsNumpy() if i >= 0]
        weights += sum(math.prod(shape(i)) for i in ins[1:])
        if kind != "FULLY_CONNECTED":
            x, w, y = shape(ins[0]), shape(ins[1]), shape(int(op.Outputs(0)))
            flops.append(2 * math.prod(y) * w[1] * w[2] * (1 if kind == "DEPTHWISE_CONV_2D" else x[3]))
    return weights, flops


@pytest.mark.parametrize(("name", "nodes", "params", "total_conv_flops"), [
    ("face_detection_short_range.tflite", 164, 101_390, 61_521_920),  # fp16 weights behind 74 DEQUANTIZE
    ("face_detection_full_range_sparse.tflite", 388, 508_308, 234_376_704),  # sparse: DENSIFY, then DEQUANTIZE
])
def test_real_files_import_whole_with_their_weights_and_conv_flops(name: str, nodes: int, params: int,
                                                                   total_conv_flops: int) -> None:
    graph = import_tflite(DATA / name)
    assert len(graph.nodes) == nodes
    assert not [n.name for n in graph.nodes if n.unsupported]  # RESIZE_BILINEAR, DEPTH_TO_SPACE included
    weights, conv_flops = _golden(name)
    assert graph.params == weights == params  # before: 101,390 -> 0 and 508,308 -> 45,716 (compressed in the file)
    result = estimate(graph, A100, fusion=False, check_memory=False)
    flops = result.batch.flops[result.index]
    convs = [i for i, n in enumerate(graph.nodes) if n.source_op in ("CONV_2D", "DEPTHWISE_CONV_2D")]
    assert [float(flops[i]) for i in convs] == [float(f) for f in conv_flops]
    assert sum(conv_flops) == total_conv_flops


def test_weight_dequantize_and_densify_run_at_load_not_per_step() -> None:
    """TFLite keeps a constant DEQUANTIZE's or DENSIFY's output as a persistent tensor and skips the op after the
    first run (tensorflow/lite/kernels/dequantize.cc, densify.cc): those nodes cost no FLOPs, bytes or time."""
    for name in ("face_detection_short_range.tflite", "face_detection_full_range_sparse.tflite"):
        graph = import_tflite(DATA / name)
        result = estimate(graph, A100, fusion=False, check_memory=False)
        folded = [i for i, n in enumerate(graph.nodes) if n.source_op in ("DEQUANTIZE", "DENSIFY")]
        assert folded
        assert all(float(result.batch.flops[result.index][i]) == 0.0 for i in folded)
        assert all(float(result.batch.compulsory_bytes[result.index][i]) == 0.0 for i in folded)
        assert all(float(result.batch.time_s[result.index][i]) <= 1e-9 for i in folded)


def test_mediapipes_transposed_convolution_maps_as_a_gemm_and_col2im() -> None:
    """Selfie segmentation ends in MediaPipe's CUSTOM Convolution2DTransposeBias (x 128x128x16 -> y 256x256x1,
    OHWI weights 1x2x2x16 and a bias; before: listed as unmodelled, 0.9 % of the time on a fallback): now the
    GEMM x[N·H·W, C] x w[C, O·kh·kw] (2·16384·16·4 FLOPs, the input elements times the kernel's outputs), col2im
    and the biased output write, its 65 weights counted; its RESIZE_BILINEAR upsamplings map (6 FLOPs per output)."""
    graph = import_tflite(DATA / "selfie_segmentation.tflite")
    assert not [n.name for n in graph.nodes if n.unsupported]
    parts = [n for n in graph.nodes if n.source_op == "CUSTOM:Convolution2DTransposeBias"]
    assert [n.op["kind"] for n in parts if n.op] == ["matmul", "elementwise", "elementwise"]
    assert parts[0].params == 1 * 2 * 2 * 16 + 1
    assert parts[2].op is not None and parts[2].op["shape"] == [1, 256, 256, 1]
    result = estimate(graph, A100, fusion=False, check_memory=False)
    first = graph.nodes.index(parts[0])
    assert float(result.batch.flops[result.index][first]) == 2 * 128 * 128 * 16 * (1 * 2 * 2)
    assert graph.params == 106_336 + 65
    resize = [n for n in graph.nodes if n.source_op == "RESIZE_BILINEAR"]
    assert len(resize) == 3 and all(n.op is not None and n.op["flops_per_element"] == 6.0 for n in resize)


def test_builtin_transpose_conv_maps_without_counting_its_output_shape_input() -> None:
    """TRANSPOSE_CONV (inputs: int32 output shape, OHWI weights, x): x 1x8x8x16 -> y 1x16x16x4, 3x3 kernel: the GEMM
    is x[64, 16] x w[16, 4·3·3], 2·64·16·36 FLOPs; 576 weights, the 4-element output shape not among them."""
    import numpy as np
    from tflite.BuiltinOperator import BuiltinOperator
    from tflite.TensorType import TensorType

    from tests.graph.tflite_models import _Writer

    w = _Writer()
    x = w.tensor("x", [1, 8, 8, 16], TensorType.FLOAT32)
    shape = w.tensor("output_shape", [4], TensorType.INT32, np.array([1, 16, 16, 4], np.int32).tobytes())
    kernel = w.tensor("kernel", [4, 3, 3, 16], TensorType.FLOAT32, np.zeros(4 * 3 * 3 * 16, np.float32).tobytes())
    y = w.tensor("y", [1, 16, 16, 4], TensorType.FLOAT32)
    w.op(BuiltinOperator.TRANSPOSE_CONV, [shape, kernel, x], [y])
    graph = import_tflite(w.finish())
    assert [n.op["kind"] for n in graph.nodes if n.op] == ["matmul", "elementwise", "elementwise"]
    assert graph.nodes[0].op is not None and (graph.nodes[0].op["m"], graph.nodes[0].op["n"],
                                              graph.nodes[0].op["k"]) == (64, 36, 16)
    assert graph.params == 4 * 3 * 3 * 16
    result = estimate(graph, A100, fusion=False, check_memory=False)
    assert float(result.batch.flops[result.index][0]) == 2 * 64 * 16 * 36
