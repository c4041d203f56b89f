"""Partition advice: declared op support places nodes; crossings are host copies; totals add up."""

from __future__ import annotations

import pytest

from perfmodel.advice.partition import partition, supports
from perfmodel.advice.source import with_supported_ops
from perfmodel.graph.ir import Graph, Node
from perfmodel.roofline import predict_many
from perfmodel.specs import library

GPU = "nvidia-h100-pcie-80gb"
CPU = "intel-xeon-platinum-8480"
ROWS, WIDTH = 2048, 4096


def mlp() -> Graph:
    """x -> up (matmul) -> Gelu (elementwise, ONNX type Gelu) -> down (matmul) -> y; bf16."""
    g = Graph("mlp")
    for name in ("x", "h", "a", "y"):
        g.add_tensor(name, (ROWS, WIDTH), "bf16")
    matmul = {"kind": "matmul", "m": ROWS, "n": WIDTH, "k": WIDTH, "dtype": "bf16", "b_batched": False}
    g.add(Node("up", dict(matmul), ["x"], ["h"], layer="mlp", source_op="MatMul", params=WIDTH * WIDTH,
               weight_bytes=2.0 * WIDTH * WIDTH))
    g.add(Node("gelu", {"kind": "elementwise", "shape": [ROWS, WIDTH], "dtype": "bf16", "flops_per_element": 8},
               ["h"], ["a"], layer="mlp", source_op="Gelu"))
    g.add(Node("down", dict(matmul), ["a", "h"], ["y"], layer="mlp", source_op="MatMul", params=WIDTH * WIDTH,
               weight_bytes=2.0 * WIDTH * WIDTH))
    return g


def test_everything_stays_on_a_device_without_declared_support() -> None:
    report = partition(mlp(), GPU, CPU)
    assert report.fallback_ops == [] and report.boundaries == []
    assert report.totals["step_s"] == pytest.approx(report.totals["all_on_device_s"])


def test_an_unsupported_op_falls_back_and_its_crossings_are_host_copies() -> None:
    hw = with_supported_ops(GPU, ["matmul"])  # the ONNX type 'Gelu' and the kind 'elementwise' are not declared
    report = partition(mlp(), hw, CPU)
    assert [f["node"] for f in report.fallback_ops] == ["gelu"]
    assert "not among" in report.fallback_ops[0]["reason"]
    # h goes to the host once (gelu reads it), a comes back; 'down' also reads h, which never left the device
    crossings = [(b["tensor"], b["direction"]) for b in report.boundaries]
    assert crossings == [("h", "d2h"), ("a", "h2d")]
    size = ROWS * WIDTH * 2.0
    assert all(b["bytes"] == size for b in report.boundaries)
    copy = predict_many(library()[GPU], [{"kind": "hostcopy", "size_bytes": size, "direction": "d2h"}],
                        space="compact").time_s[0]
    assert report.boundaries[0]["time_s"] == pytest.approx(copy)
    assert copy >= size / 63e9  # PCIe 5.0 x16 per direction (the spec's host link)
    t = report.totals
    assert t["step_s"] == pytest.approx(t["device_s"] + t["fallback_s"] + t["transfer_s"] + t["launch_s"])
    assert t["launch_s"] > 0 and t["transfer_bytes"] == 2 * size
    assert t["step_s"] > t["all_on_device_s"]  # the round trip over PCIe costs more than the GELU saves


def test_support_matches_op_kinds_or_importer_types_case_insensitively() -> None:
    hw = with_supported_ops(GPU, ["MATMUL", "gelu"])
    graph = mlp()
    assert all(supports(hw, node) for node in graph.nodes)
    assert partition(graph, hw, CPU).fallback_ops == []


def test_an_onnx_block_partitions_by_onnx_op_types() -> None:
    from perfmodel.graph.onnx_import import import_onnx
    from tests.graph.graph_models import transformer_block

    graph = import_onnx(transformer_block().SerializeToString())
    # an NPU compiler that takes the GEMMs, the reshapes and the adds but not Softmax, Gelu or LayerNormalization
    hw = with_supported_ops(GPU, ["MatMul", "Reshape", "Transpose", "Add", "Div", "DequantizeLinear"])
    report = partition(graph, hw, CPU)
    fallen = sorted({f["source_op"] for f in report.fallback_ops})
    assert fallen == ["Gelu", "LayerNormalization", "Softmax"]
    assert len(report.fallback_ops) == 4  # two LayerNormalizations
    # each fallback op's input comes from the device and its output goes back, except the first LayerNorm's
    # input: the graph input x, which is taken to be where its first reader runs
    directions = {b["direction"] for b in report.boundaries}
    assert directions == {"d2h", "h2d"} and report.totals["crossings"] == 2 * len(report.fallback_ops) - 1
    assert report.totals["step_s"] > report.totals["all_on_device_s"]


def test_weights_made_at_load_and_views_make_no_crossings() -> None:
    """SqueezeNet 1.1 from the onnx wheel's backend tests (Apache-2.0) makes 39 of its weights with ConstantOfShape
    nodes, free views; on a device declared without GlobalAveragePool only that op falls back, with one copy each
    way (its input down, its output up), not one per weight (before: 40 'fallback ops', 41 copies)."""
    from pathlib import Path

    import onnx

    from perfmodel.graph.onnx_import import import_onnx

    graph = import_onnx(Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx")
    device = with_supported_ops(library().get("nvidia-h100-pcie-80gb"),
                                ["Conv", "Relu", "Concat", "MaxPool", "Dropout", "Softmax"])
    report = partition(graph, device, "intel-xeon-platinum-8480")
    assert [f["source_op"] for f in report.fallback_ops] == ["GlobalAveragePool"]
    assert [b["direction"] for b in report.boundaries] == ["d2h", "h2d"]
    pool = next(n for n in graph.nodes if n.source_op == "GlobalAveragePool")
    (down,) = [b for b in report.boundaries if b["direction"] == "d2h"]
    assert down["to_node"] == pool.name and down["bytes"] == graph.tensors[pool.inputs[0]].size_bytes
    made = [i for i, n in enumerate(graph.nodes) if n.source_op == "ConstantOfShape"]
    assert len(made) == 39 and all(report.placement[i] == "device" for i in made)
