"""TFLite import: an int8 model written with the tflite schema builders (tests/graph/tflite_models.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("tflite")

from perfmodel.graph.estimate import estimate
from perfmodel.graph.ir import GraphError
from perfmodel.graph.tflite_import import import_tflite
from tests.graph.tflite_models import float_with_unmodelled_op, int8_mobilenet_block

H100 = "nvidia-h100-sxm5-80gb"


def test_int8_block_maps_every_operator_with_paper_flops() -> None:
    graph = import_tflite(int8_mobilenet_block())
    assert [n.source_op for n in graph.nodes] == ["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D", "MEAN",
                                                  "FULLY_CONNECTED", "SOFTMAX", "DEQUANTIZE"]
    assert not graph.unsupported()
    conv, dw, pw, _, fc = (n.op or {} for n in graph.nodes[:5])
    assert (conv["layout"], conv["stride"], conv["padding"], conv["dtype"]) == ("nhwc", 2, 1, "int8")
    assert (dw["groups"], dw["out_channels"]) == (32, 32) and pw["padding"] == 0
    assert (fc["m"], fc["n"], fc["k"]) == (1, 10, 64)
    result = estimate(graph, H100, fusion=False)
    flops = result.batch.flops[result.index]
    # 16x16 outputs: conv 32 x 3x3x3, depthwise 32 x 3x3, pointwise 64 x 32, FC 10 x 64 (2 FLOPs per MAC)
    assert flops[:3].tolist() == [2 * 16 * 16 * 32 * 27, 2 * 16 * 16 * 32 * 9, 2 * 16 * 16 * 64 * 32]
    assert flops[4] == 2 * 10 * 64


def test_weights_carry_their_int8_bytes_and_scales() -> None:
    graph = import_tflite(int8_mobilenet_block())
    conv = graph.nodes[0]
    assert conv.params == 32 * 27 + 32  # weights and the int32 bias
    # int8 weights + int32 bias, plus an fp32 scale per output channel on each
    assert conv.weight_bytes == 32 * 27 * 1 + 32 * 4 + 32 * 4 + 32 * 4
    assert graph.params == 896 + 320 + 2048 + 650
    q = graph.meta["quantization"]
    assert q["conv1/weights"]["scales"] == 32 and q["conv1/weights"]["quantized_dimension"] == 0
    assert q["dw/weights"]["quantized_dimension"] == 3 and q["input"]["scales"] == 1


def test_an_unmodelled_operator_is_listed_and_the_rest_estimates() -> None:
    graph = import_tflite(float_with_unmodelled_op())
    assert [n.source_op for n in graph.unsupported()] == ["CUMSUM"]
    assert "not modelled" in (graph.nodes[1].unsupported or "") and graph.nodes[1].fallback is not None
    assert graph.nodes[0].op is not None and graph.nodes[0].op["dtype"] == "fp32"
    assert estimate(graph, H100).step_time_s > 0


def test_bad_files_are_named() -> None:
    data = int8_mobilenet_block()
    with pytest.raises(GraphError, match="not a readable TFLite flatbuffer"):
        import_tflite(data[: len(data) // 3])
    with pytest.raises(GraphError, match="dynamic dimension -1") as dynamic:
        import_tflite(float_with_unmodelled_op(dynamic=True))
    assert dynamic.value.node == "x"
