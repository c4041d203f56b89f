"""ONNX operators that fell back before the tenth pass (issue 26): GatherElements, GatherND, TopK, CumSum,
DepthToSpace / SpaceToDepth, Lp / mean-variance normalization, GlobalLpPool, the other reductions, and Einsum
with an ellipsis — each costed by its own model, with the op it builds checked against the ONNX definition."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from perfmodel.graph import estimate
from perfmodel.graph.onnx_fold import einsum_dims
from perfmodel.graph.onnx_import import import_onnx

A100 = "nvidia-a100-sxm4-80gb"
F = TensorProto.FLOAT


def _one(node: onnx.NodeProto, x_shape: list[int], inits: list[onnx.TensorProto] | None = None,
         outputs: int = 1) -> dict[str, Any]:
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in node.output[:outputs]]
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, x_shape)], outs,
                              initializer=inits or [])
    g = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    assert g.unsupported() == [], [n.unsupported for n in g.unsupported()]
    assert estimate(g, A100, fusion=False).step_time_s > 0
    (n,) = [n for n in g.nodes if n.op is not None and n.name == node.name]
    assert n.op is not None
    return n.op


def _ints(name: str, values: list[Any]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def test_gathers_move_what_they_pick() -> None:
    elements = _one(helper.make_node("GatherElements", ["x", "i"], ["y"], name="ge", axis=1), [4, 16],
                    [_ints("i", np.zeros((4, 3), dtype=np.int64).tolist())])
    assert elements["shape"] == [4, 3] and elements["inputs"] == 2  # indices and picked values, per output
    nd = _one(helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd"), [4, 5, 6], [_ints("i", [[0, 1]] * 3)])
    assert nd["kind"] == "gather" and nd["table_shape"] == [20, 6] and nd["num_indices"] == 3  # y [3, 6]
    batched = _one(helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd", batch_dims=1), [4, 5, 6],
                   [_ints("i", [[[1]]] * 4)])
    assert batched["table_shape"] == [20, 6] and batched["num_indices"] == 4  # y [4, 1, 6]


def test_topk_cumsum_and_reductions_read_x_once() -> None:
    topk = _one(helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk", axis=1), [8, 1000], [_ints("k", [5])])
    assert topk == {"kind": "reduce", "shape": [8, 1000], "axes": [1], "dtype": "fp32", "op": "max"}
    scan = _one(helper.make_node("CumSum", ["x", "a"], ["y"], name="scan"), [2, 64],
                [numpy_helper.from_array(np.array(1, dtype=np.int64), "a")])
    assert scan["shape"] == [2, 64] and scan["flops_per_element"] == 1.0
    for op_type in ("ReduceProd", "ReduceL1", "ReduceLogSum", "ReduceLogSumExp"):
        red = _one(helper.make_node(op_type, ["x", "ax"], ["y"], name="r"), [4, 32], [_ints("ax", [1])])
        assert red["kind"] == "reduce" and red["axes"] == [1]
    pool = _one(helper.make_node("GlobalLpPool", ["x"], ["y"], name="lp"), [1, 8, 7, 7])
    assert pool["kind"] == "reduce" and pool["axes"] == [2, 3]


def test_block_permutations_are_the_onnx_transposes() -> None:
    d2s = _one(helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=2), [1, 16, 5, 7])
    assert d2s == {"kind": "transpose", "shape": [1, 2, 2, 4, 5, 7], "perm": [0, 3, 4, 1, 5, 2], "dtype": "fp32"}
    s2d = _one(helper.make_node("SpaceToDepth", ["x"], ["y"], name="s2d", blocksize=2), [1, 3, 8, 6])
    assert s2d["shape"] == [1, 3, 4, 2, 3, 2] and s2d["perm"] == [0, 3, 5, 1, 2, 4]
    # the permutation reproduces ONNX's DepthToSpace (DCR) on real numbers
    x = np.arange(16 * 5 * 7, dtype=np.float32).reshape(1, 16, 5, 7)
    ref = ReferenceEvaluator(helper.make_model(helper.make_graph(
        [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2)], "g",
        [helper.make_tensor_value_info("x", F, [1, 16, 5, 7])], [helper.make_tensor_value_info("y", F, None)]),
        opset_imports=[helper.make_opsetid("", 18)])).run(None, {"x": x})[0]
    ours = x.reshape(d2s["shape"]).transpose(d2s["perm"]).reshape(1, 4, 10, 14)
    assert np.array_equal(ours, ref)
    x2 = np.arange(3 * 8 * 6, dtype=np.float32).reshape(1, 3, 8, 6)
    ref2 = ReferenceEvaluator(helper.make_model(helper.make_graph(
        [helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2)], "g",
        [helper.make_tensor_value_info("x", F, [1, 3, 8, 6])], [helper.make_tensor_value_info("y", F, None)]),
        opset_imports=[helper.make_opsetid("", 18)])).run(None, {"x": x2})[0]
    assert np.array_equal(x2.reshape(s2d["shape"]).transpose(s2d["perm"]).reshape(1, 12, 4, 3), ref2)
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], name="bad", blocksize=3)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [1, 3, 8, 6])],
                              [helper.make_tensor_value_info("y", F, [1, 27, 2, 2])])
    (bad,) = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])).unsupported()
    assert "blocksize" in (bad.unsupported or "")


def test_lp_and_mean_variance_normalization_are_norm_passes() -> None:
    lp = _one(helper.make_node("LpNormalization", ["x"], ["y"], name="lp", axis=1), [6, 512])
    assert lp == {"kind": "layernorm", "shape": [6, 512], "dtype": "fp32"}
    mvn = _one(helper.make_node("MeanVarianceNormalization", ["x"], ["y"], name="mvn"), [2, 3, 4, 5])
    assert mvn["shape"] == [3, 40]  # per channel over N, H, W


@pytest.mark.parametrize(("equation", "shapes", "dims"), [
    ("...ij,...jk->...ik", [(2, 16, 8, 4), (2, 16, 4, 8)], (32, 8, 8, 4)),
    ("abij,abjk->abik", [(2, 16, 8, 4), (2, 16, 4, 8)], (32, 8, 8, 4)),
    ("...ij,jk->...ik", [(4, 5, 8, 3), (3, 6)], (1, 160, 6, 3)),  # broadcast dims only on A: rows of the GEMM
    ("...ij,...jk", [(3, 8, 4), (3, 4, 8)], (3, 8, 8, 4)),  # implicit output keeps the ellipsis first
    ("bhqd,bhkd->bhqk", [(2, 4, 8, 16), (2, 4, 32, 16)], (8, 8, 32, 16)),
])
def test_einsum_with_an_ellipsis_is_a_batched_gemm(equation: str, shapes: list[tuple[int, ...]],
                                                   dims: tuple[int, int, int, int]) -> None:
    assert einsum_dims(equation, shapes) == dims
    a = np.ones(shapes[0], dtype=np.float32)
    b = np.ones(shapes[1], dtype=np.float32)
    batch, m, n, k = dims
    out = np.einsum(equation, a, b)
    assert out.size == batch * m * n and np.all(out == k)  # the GEMM's output, each a sum of k products of ones


def test_gather_nd_indices_that_do_not_fit_are_named() -> None:
    node = helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [4, 5])],
                              [helper.make_tensor_value_info("y", F, [2])], initializer=[_ints("i", [[0, 1, 2]] * 2)])
    (bad,) = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])).unsupported()
    assert bad.name == "gnd" and "GatherND" in (bad.unsupported or "") and "do not index" in (bad.unsupported or "")


@pytest.mark.parametrize("cls_name", ["LSTM", "GRU"])
def test_recurrent_layers_exported_by_torch_match_the_module(cls_name: str) -> None:
    """A 2-layer bidirectional torch LSTM / GRU (16 -> 8) exported to ONNX: no fallback, parameters equal to the
    module's (W, R and the two biases per direction), and per layer one input GEMM plus a recurrent GEMM and a
    gate pass per step (5 steps)."""
    import io
    import warnings

    torch = pytest.importorskip("torch")
    module = getattr(torch.nn, cls_name)(16, 8, num_layers=2, bidirectional=True)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(5, 2, 16),), buf, opset_version=17, dynamo=False)
    graph = import_onnx(buf.getvalue())
    assert graph.unsupported() == []
    assert graph.params == sum(p.numel() for p in module.parameters())
    rnn = [n for n in graph.nodes if n.source_op == cls_name]
    assert len(rnn) == 2 * (1 + 2 * 5)
    gates = {"LSTM": 4, "GRU": 3}[cls_name]
    first = rnn[0].op
    assert first is not None and (first["m"], first["n"], first["k"], first["batch"]) == (10, gates * 8, 16, 2)
    recurrent = rnn[1].op
    assert recurrent is not None and (recurrent["m"], recurrent["n"], recurrent["k"]) == (2, gates * 8, 8)
    assert estimate(graph, A100).step_time_s > 0


def test_detection_ops_roi_align_and_nms() -> None:
    """RoiAlign 7x7 with 2x2 samples on 10 ROIs of a 256-channel map: 8 FLOPs per bilinear sample of each output
    element; NonMaxSuppression of 100 boxes and 3 classes: the score read and a 100 x 2-word IoU mask per class."""
    f = helper.make_tensor_value_info
    roi = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], name="roi", output_height=7, output_width=7,
                           sampling_ratio=2)
    graph = helper.make_graph([roi], "g", [f("x", F, [1, 256, 50, 50]), f("rois", F, [10, 4]),
                                           f("idx", TensorProto.INT64, [10])], [f("y", F, None)])
    op = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])).nodes[0].op
    assert op is not None and op["shape"] == [10, 256, 7, 7] and op["flops_per_element"] == 8.0 * 4
    nms = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["sel"], name="nms")
    graph = helper.make_graph([nms], "g", [f("boxes", F, [1, 100, 4]), f("scores", F, [1, 3, 100])],
                              [f("sel", TensorProto.INT64, None)])
    g = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    assert g.unsupported() == []
    sort, mask = (n.op for n in g.nodes)
    assert sort is not None and sort["shape"] == [1, 3, 100] and sort["axes"] == [2]
    assert mask is not None and mask["shape"] == [3, 100, 2] and mask["flops_per_element"] == 640.0
    assert estimate(g, A100).step_time_s > 0
