"""ONNX vision importers: weights from Constant / ConstantOfShape nodes, conv 1-3 D and transposed,
pooling, LRN, Sum, Dropout, and ops that cannot be costed listed with their fallback (issue 26)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from perfmodel.graph import GraphError, estimate
from perfmodel.graph.onnx_import import import_onnx
from perfmodel.ops import make_op

A100 = "nvidia-a100-sxm4-80gb"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _model(nodes: list[onnx.NodeProto], x_shape: list[int], y_shape: list[int] | None = None,
           inits: list[onnx.TensorProto] | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                              initializer=inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _flops(est: object) -> float:
    batch = est.batch  # type: ignore[attr-defined]
    index = est.index  # type: ignore[attr-defined]
    return float(sum(np.sum(v[index]) for v in batch.flops_by_engine.values()))


def test_constant_of_shape_weights_are_parameters_and_free() -> None:
    # conv weight [8, 3, 3, 3] made by ConstantOfShape from a constant shape; bias by a Constant node
    shape = numpy_helper.from_array(np.array([8, 3, 3, 3], dtype=np.int64), "w_shape")
    nodes = [helper.make_node("ConstantOfShape", ["w_shape"], ["w"], name="make_w",
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.02])),
             helper.make_node("Constant", [], ["b"], name="make_b",
                              value=numpy_helper.from_array(np.zeros(8, dtype=np.float32), "b")),
             helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1])]
    graph = import_onnx(_model(nodes, [1, 3, 32, 32], inits=[shape]))
    conv = next(n for n in graph.nodes if n.name == "conv")
    assert conv.params == 8 * 3 * 3 * 3 + 8 and conv.weight_bytes == 4 * (8 * 27 + 8)
    made = [n for n in graph.nodes if n.source_op in ("ConstantOfShape", "Constant")]
    assert [n.op["kind"] for n in made if n.op] == ["reshape", "reshape"]  # no kernel, no bytes
    est = estimate(graph, A100, fusion=False)
    times = dict(zip((n.name for n in est.graph.nodes), est.node_time_s, strict=True))
    assert times["make_w"] == 0.0 and times["make_b"] == 0.0
    assert _flops(est) == pytest.approx(2 * 8 * 32 * 32 * 27 + 8 * 32 * 32)  # MACs x 2 + bias


@pytest.mark.parametrize(("model", "published_params"), [
    ("light_resnet50.onnx", 25_557_032),  # torchvision / He et al.: 25.6 M
    ("light_vgg19.onnx", 143_667_240),  # Simonyan & Zisserman, torchvision vgg19
    ("light_bvlc_alexnet.onnx", 60_965_224),  # BVLC AlexNet (Caffe)
    ("light_squeezenet.onnx", 1_235_496),  # SqueezeNet 1.1 (torchvision squeezenet1_1)
])
def test_backend_light_models_count_their_weights(model: str, published_params: int) -> None:
    graph = import_onnx(LIGHT / model)
    params = sum(n.params for n in graph.nodes)
    assert params == pytest.approx(published_params, rel=0.01)
    est = estimate(graph, A100)
    assert est.diagnostics() == []  # every op costed by its own model
    made = sum(t for n, t in zip(est.graph.nodes, est.node_time_s, strict=True) if n.source_op == "ConstantOfShape")
    assert made == 0.0


def test_conv3d_is_an_implicit_gemm_with_depth() -> None:
    # x [2, 4, 8, 16, 16], w [16, 4, 3, 3, 3], pads 1: y [2, 16, 8, 16, 16]
    w = numpy_helper.from_array(np.zeros((16, 4, 3, 3, 3), dtype=np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv3d", pads=[1] * 6)]
    graph = import_onnx(_model(nodes, [2, 4, 8, 16, 16], inits=[w]))
    op = graph.nodes[0].op
    assert op is not None and op["depth"] == 8 and op["kernel_d"] == 3
    est = estimate(graph, A100)
    assert _flops(est) == pytest.approx(2 * 2 * 16 * 8 * 16 * 16 * 4 * 27)  # 2 N K O P Q C T R S
    conv = make_op(op)
    x_bytes, y_bytes = 2 * 4 * 8 * 16 * 16 * 4, 2 * 16 * 8 * 16 * 16 * 4
    roles = type(conv).work([conv]).bytes_by_role
    assert roles["activations_in"][0] == x_bytes and roles["activations_out"][0] == y_bytes
    assert roles["weights"][0] == 16 * 4 * 27 * 4


def test_conv3d_strided_depth_and_1d_conv() -> None:
    # strided depth: D 9, T 3, stride 2, no pad -> O 4
    w = numpy_helper.from_array(np.zeros((8, 2, 3, 1, 1), dtype=np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="c", strides=[2, 1, 1])]
    est = estimate(import_onnx(_model(nodes, [1, 2, 9, 4, 4], inits=[w])), A100)
    assert _flops(est) == pytest.approx(2 * 8 * 4 * 4 * 4 * 2 * 3)
    w1 = numpy_helper.from_array(np.zeros((6, 3, 5), dtype=np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="c1", pads=[2, 2])]
    est = estimate(import_onnx(_model(nodes, [1, 3, 100], inits=[w1])), A100)
    assert _flops(est) == pytest.approx(2 * 6 * 100 * 3 * 5)


def test_conv_transpose_flops_are_the_scatter_of_each_input() -> None:
    # x [1, 8, 16, 16], w [8, 4, 4, 4], stride 2 -> y [1, 4, 34, 34]: 2 * N*H*W * C * K*kh*kw FLOPs in the GEMM
    w = numpy_helper.from_array(np.zeros((8, 4, 4, 4), dtype=np.float32), "w")
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[2, 2])]
    graph = import_onnx(_model(nodes, [1, 8, 16, 16], inits=[w]))
    gemm = graph.nodes[0].op
    assert gemm is not None and (gemm["m"], gemm["n"], gemm["k"]) == (256, 64, 8)
    assert graph.nodes[0].params == 8 * 4 * 16
    est = estimate(graph, A100, fusion=False)
    assert est.diagnostics() == []
    assert _flops(est) >= 2 * 256 * 64 * 8


def test_pooling_lrn_sum_dropout_have_their_own_models() -> None:
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("LRN", ["p"], ["l"], name="lrn", size=5),
             helper.make_node("Dropout", ["l"], ["d"], name="drop"),
             helper.make_node("Sum", ["d", "p", "l"], ["s"], name="sum"),
             helper.make_node("GlobalAveragePool", ["s"], ["y"], name="gap")]
    graph = import_onnx(_model(nodes, [2, 64, 32, 32]))
    by_name = {n.name: n for n in graph.nodes}
    assert all(n.op is not None for n in graph.nodes)
    pool = by_name["pool"].op
    assert pool is not None and pool["shape"] == [2, 64, 16, 16] and pool["inputs"] == 4
    assert pool["flops_per_element"] == 4.0
    assert by_name["drop"].op == {"kind": "reshape", "shape": [2, 64, 16, 16], "new_shape": [2, 64, 16, 16],
                                  "dtype": "fp32", "contiguous": True}
    assert by_name["sum"].op is not None and by_name["sum"].op["inputs"] == 3
    assert by_name["gap"].op is not None and by_name["gap"].op["kind"] == "reduce"
    est = estimate(graph, A100, fusion=False)
    # pool 4/out, LRN 2*5+3 per element and a pow (special), Sum 2 per element, GAP 1 per input element
    out = 2 * 64 * 16 * 16
    assert _flops(est) == pytest.approx(out * 4 + out * (13 + 1) + out * 2 + out)


def test_an_op_its_model_rejects_is_listed_not_fatal() -> None:
    # a conv whose kernel is larger than its input: the conv op refuses it; the graph still estimates
    w = numpy_helper.from_array(np.zeros((4, 3, 9, 9), dtype=np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="bad_conv"),
             helper.make_node("Relu", ["x"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4]),
                               helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 4, 1, 1])],
                              initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    est = estimate(import_onnx(model), A100)
    (diag,) = est.diagnostics()
    assert diag["node"] == "bad_conv" and "kernel_h" in diag["reason"] and diag["fallback_time_s"] > 0


def test_truncated_onnx_file_is_a_clear_error(tmp_path: Path) -> None:
    data = (LIGHT / "light_squeezenet.onnx").read_bytes()
    from perfmodel.graph import GraphError
    with pytest.raises(GraphError, match="not a readable ONNX model"):
        import_onnx(data[: len(data) // 3])


@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), [
    ([1, 3, 224, 224], [64, 3, 7, 7], {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ([1, 8, 15, 15], [8, 8, 3, 3], {"pads": [0, 0, 1, 1]}),
    ([2, 4, 9, 10, 11], [6, 2, 3, 3, 3], {"group": 2, "strides": [2, 1, 2], "pads": [1, 1, 1, 1, 1, 1]}),
    ([1, 16, 50], [32, 16, 4], {"dilations": [2], "auto_pad": "VALID"}),
])
def test_conv_output_sizes_match_onnx_shape_inference(x_shape: list[int], w_shape: list[int],
                                                      attrs: dict[str, Any]) -> None:
    w = numpy_helper.from_array(np.zeros(w_shape, dtype=np.float32), "w")
    model = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", **attrs)], x_shape, inits=[w])
    inferred = onnx.shape_inference.infer_shapes(model)
    y = next(v for v in inferred.graph.output if v.name == "y")
    y_dims = [d.dim_value for d in y.type.tensor_type.shape.dim]
    graph = import_onnx(model)
    conv = make_op(graph.nodes[0].op or {})
    spatial = [conv.out_h, conv.out_w]  # type: ignore[attr-defined]
    if len(x_shape) == 5:
        spatial = [conv.out_d, *spatial]  # type: ignore[attr-defined]
    elif len(x_shape) == 3:
        spatial = spatial[1:]
    assert spatial == y_dims[2:]


def test_instance_norm_resize_and_argmax_have_their_own_models() -> None:
    scale = numpy_helper.from_array(np.ones(8, dtype=np.float32), "s")
    bias = numpy_helper.from_array(np.zeros(8, dtype=np.float32), "b")
    sizes = numpy_helper.from_array(np.array([1, 8, 32, 32], dtype=np.int64), "sizes")
    nodes = [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["n"], name="inorm"),
             helper.make_node("GroupNormalization", ["n", "s", "b"], ["g"], name="gnorm", num_groups=2),
             helper.make_node("Resize", ["g", "", "", "sizes"], ["r"], name="up", mode="linear"),
             helper.make_node("ArgMax", ["r"], ["y"], name="argmax", axis=1, keepdims=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
                              initializer=[scale, bias, sizes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    by_name = {n.name: n for n in import_onnx(model).nodes}
    assert all(n.op is not None for n in by_name.values())
    assert by_name["inorm"].op == {"kind": "layernorm", "shape": [8, 256], "dtype": "fp32"}
    assert by_name["inorm"].params == 16
    gnorm = by_name["gnorm"].op
    assert gnorm is not None and gnorm["shape"] == [2, 4 * 256]
    up = by_name["up"].op
    assert up is not None and up["shape"] == [1, 8, 32, 32] and up["flops_per_element"] == 6.0
    argmax = by_name["argmax"].op
    assert argmax is not None and argmax["kind"] == "reduce" and argmax["axes"] == [1]


def test_malformed_attributes_list_the_node_and_the_rest_estimates() -> None:
    """A Conv whose strides is a string attribute (a corrupted file) and one with a stride list of the wrong
    length: each listed with its fallback and the attribute named; the Relu beside them keeps its model."""
    w = numpy_helper.from_array(np.zeros((8, 3, 3, 3), dtype=np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], name="conv", strides="two"),
             helper.make_node("Conv", ["x", "w"], ["h2"], name="conv3", strides=[1, 1, 1]),
             helper.make_node("Relu", ["x"], ["y"], name="relu")]
    graph = import_onnx(_model(nodes, [1, 3, 16, 16], [1, 3, 16, 16], inits=[w]))
    reasons = {n.name: n.unsupported or "" for n in graph.unsupported()}
    assert set(reasons) == {"conv", "conv3"}
    assert "strides: expected 2 positive integers, got b'two'" in reasons["conv"]
    assert "strides: expected 2 positive integers, got [1, 1, 1]" in reasons["conv3"]
    assert estimate(graph, A100).step_time_s > 0


def test_a_node_name_that_is_not_utf8_is_a_graph_error() -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="QQQQ")], [1, 4], [1, 4])
    data = model.SerializeToString().replace(b"QQQQ", b"\xff\xfeQQ")
    with pytest.raises(GraphError, match=r"node #0.*not UTF-8"):
        import_onnx(data)


def test_corrupted_light_models_error_or_estimate_never_crash() -> None:
    """40 copies of SqueezeNet 1.1 with 1-6 random bytes changed (seeded): each a ValueError (GraphError) or an
    estimate; before, 3 of 500 such files raised TypeError (a 500 over REST)."""
    rng = np.random.default_rng(26)
    base = (LIGHT / "light_squeezenet.onnx").read_bytes()
    for _ in range(40):
        data = bytearray(base)
        for pos in rng.integers(0, len(data), size=int(rng.integers(1, 7))):
            data[int(pos)] = int(rng.integers(0, 256))
        with contextlib.suppress(ValueError):  # GraphError and OpError are ValueErrors
            estimate(import_onnx(bytes(data)), A100, check_memory=False)
