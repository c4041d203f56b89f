"""ONNX constant folding of shape arithmetic (issue 26): exporter mask chains resolve, folded weights stay
parameters, mask constants consumed by folding are not."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from perfmodel.graph.onnx_import import import_onnx


def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], x: list[int]) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _i64(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def test_mask_chain_folds_and_the_add_after_it_is_costed() -> None:
    # torch's exporter: shape = Where(Equal(c, -1), ConstantOfShape, c); mask = Expand(ones, shape); y = x + mask
    ones = numpy_helper.from_array(np.ones((1, 16), dtype=np.float32), "ones")
    one = helper.make_tensor("v", TensorProto.INT64, [1], [1])
    nodes = [helper.make_node("ConstantOfShape", ["two"], ["cos"], value=one),
             helper.make_node("Equal", ["target", "minus1"], ["eq"]),
             helper.make_node("Where", ["eq", "cos", "target"], ["shape"]),
             helper.make_node("Expand", ["ones", "shape"], ["mask"], name="expand"),
             helper.make_node("Add", ["x", "mask"], ["y"], name="add")]
    inits = [_i64("two", [2]), _i64("target", [2, 16]), _i64("minus1", [-1, -1]), ones]
    graph = import_onnx(_model(nodes, inits, [2, 16]))
    assert graph.unsupported() == []
    add = next(n for n in graph.nodes if n.name == "add")
    assert add.op is not None and add.op["shape"] == [2, 16]
    assert graph.params == 0  # the mask of ones is folded away, not a weight
    expand = next(n for n in graph.nodes if n.name == "expand")
    assert expand.op is not None and expand.op["kind"] == "reshape"  # free


def test_folded_reshape_of_a_weight_keeps_its_parameters() -> None:
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 8, 4)).astype(np.float32), "w")
    nodes = [helper.make_node("Reshape", ["w", "shape"], ["w2"], name="reshape_w"),
             helper.make_node("MatMul", ["x", "w2"], ["y"], name="mm")]
    graph = import_onnx(_model(nodes, [w, _i64("shape", [32, 4])], [3, 32]))
    assert graph.params == 4 * 8 * 4 and graph.unsupported() == []
    mm = next(n for n in graph.nodes if n.name == "mm")
    assert mm.op is not None and (mm.op["m"], mm.op["k"], mm.op["n"]) == (3, 32, 4)


def test_einsum_is_a_batched_gemm_with_its_flops() -> None:
    # attention scores as an Einsum: bhqd,bhkd->bhqk (batch b·h, m=q, n=k, contracted d)
    node = helper.make_node("Einsum", ["x", "kmat"], ["y"], name="scores", equation="bhqd,bhkd->bhqk")
    kmat = numpy_helper.from_array(np.zeros((2, 4, 32, 16), dtype=np.float32), "kmat")
    graph = import_onnx(_model([node], [kmat], [2, 4, 8, 16]))
    assert graph.unsupported() == []
    op = graph.nodes[0].op
    assert op is not None and (op["batch"], op["m"], op["n"], op["k"]) == (8, 8, 32, 16)
    odd = helper.make_node("Einsum", ["x"], ["y"], name="trace", equation="...ii->...i")
    fell = import_onnx(_model([odd], [], [3, 3])).unsupported()  # listed with a fallback, never an abort
    assert [n.name for n in fell] == ["trace"] and "Einsum" in str(fell[0].unsupported)
