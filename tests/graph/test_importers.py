"""ONNX and torch.export importers, fusion, diagnostics and the graph JSON format."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from graph_models import torch_transformer, transformer_block
from onnx import TensorProto, helper

from perfmodel.graph import Graph, GraphError, estimate
from perfmodel.graph.onnx_import import import_onnx
from perfmodel.graph.torch_import import export_module

A100 = "nvidia-a100-sxm4-80gb"


def test_onnx_block_imports_every_op() -> None:
    graph = import_onnx(transformer_block(batch=2, seq=128, dim=256))
    assert graph.unsupported() == []
    kinds = {n.source_op: n.op["kind"] for n in graph.nodes if n.op}
    assert kinds["MatMul"] == "matmul" and kinds["Softmax"] == "softmax"
    assert kinds["DequantizeLinear"] == "dequantize" and kinds["LayerNormalization"] == "layernorm"
    # weights: 4 x 256² fp16, int8 fc1, fp16 fc2, LN γ/β, fc1 scale and bias (shape constants excluded)
    assert graph.params == 4 * 256 * 256 + 256 * 1024 * 2 + 4 * 256 + 2 * 1024
    qk = next(n.op for n in graph.nodes if n.name == "/block/attn/qk/MatMul")
    assert qk == {"kind": "matmul", "m": 128, "n": 128, "k": 64, "dtype": "fp16", "batch": 8, "b_batched": True}


def test_onnx_fusion_finds_attention_dequant_epilogue_and_add_norm() -> None:
    graph = import_onnx(transformer_block())
    unfused = estimate(import_onnx(transformer_block()), A100, fusion=False)
    est = estimate(graph, A100)
    rules = est.fusion.to_json()["by_rule"]
    assert set(rules) == {"attention", "dequant_gemm", "gemm_epilogue", "add_norm"}
    fc1 = next(n for n in graph.nodes if n.op and n.op.get("weight_dtype") == "int8")
    assert fc1.op is not None and fc1.op["bias"] is True and len(fc1.fused_from) == 4
    saved = est.fusion.bytes_saved
    before = float(unfused.batch.compulsory_bytes[unfused.index].sum())
    after = float(est.batch.compulsory_bytes[est.index].sum())
    assert saved > 0 and before - after == pytest.approx(saved, rel=1e-6)
    assert est.step_time_s < unfused.step_time_s


def test_unknown_onnx_op_is_listed_with_a_fallback_estimate() -> None:
    extra = helper.make_node("FancyTopK", ["y"], ["z"], name="/block/fancy", domain="custom.ops")
    est = estimate(import_onnx(transformer_block(extra=extra)), A100)
    (diag,) = est.diagnostics()
    assert diag["node"] == "/block/fancy" and "FancyTopK" in diag["reason"]
    assert diag["fallback"]["kind"] == "elementwise" and diag["fallback_time_s"] > 0


def test_symbolic_dims_bind_or_name_the_node() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu0")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    unbound = estimate(import_onnx(model), A100)  # listed with the tensor it misses, the rest still estimates
    (diag,) = unbound.diagnostics()
    assert diag["node"] == "relu0" and "'x'" in diag["reason"] and "--dim" in diag["reason"]
    bound = import_onnx(model, dims={"batch": 32})
    assert bound.nodes[0].op is not None and bound.nodes[0].op["shape"] == [32, 64]


def test_unresolved_shapes_name_the_dim_and_the_rest_estimates() -> None:
    """An unbound symbolic dim is named with the --dim that binds it; a data-dependent axis (NonZero's count)
    is said to be one; the nodes with known shapes keep their own models."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [64, 64], np.ones(64 * 64, dtype=np.float32))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("NonZero", ["h"], ["nz"], name="nonzero"),
             helper.make_node("Cast", ["nz"], ["nzf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Relu", ["h"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("nzf", TensorProto.FLOAT, None)], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    unbound = {d["node"]: d["reason"] for d in estimate(import_onnx(model), A100).diagnostics()}
    assert set(unbound) == {"mm", "nonzero", "cast", "relu"}
    assert "tensor 'x' has unbound symbolic dim 'batch'" in unbound["mm"] and "--dim batch=SIZE" in unbound["mm"]
    assert "tensor 'h' has unbound symbolic dim 'batch'" in unbound["relu"]
    bound = import_onnx(model, dims={"batch": 8})
    est = estimate(bound, A100)
    reasons = {d["node"]: d["reason"] for d in est.diagnostics()}
    assert set(reasons) == {"nonzero", "cast"}  # MatMul and Relu have their own models again
    assert "tensor 'nz' has axis 1 ('unk__0') unknown (data-dependent" in reasons["cast"]
    assert est.step_time_s > 0 and next(n for n in bound.nodes if n.name == "mm").op["m"] == 8


def test_bad_onnx_bytes_are_a_graph_error() -> None:
    with pytest.raises(GraphError, match=r"not a readable ONNX model"):
        import_onnx(b"not a model")


def test_torch_export_imports_without_unknown_ops() -> None:
    module, args = torch_transformer()
    graph = export_module(module, args, "toy")  # type: ignore[arg-type]
    assert graph.unsupported() == []
    assert graph.params == sum(p.numel() for p in module.parameters())  # type: ignore[attr-defined]
    attention = [n.op for n in graph.nodes if n.op and n.op["kind"] == "attention"]
    assert len(attention) == 2 and attention[0]["causal"] is True and attention[0]["seq_q"] == 16
    assert {n.layer for n in graph.nodes} >= {"blocks.0", "blocks.1"}
    est = estimate(graph, A100)
    assert est.step_time_s > 0 and est.diagnostics() == []


def test_torch_unknown_op_gets_a_fallback() -> None:
    class Scan(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cumsum(x, dim=-1) * 2

    graph = export_module(Scan(), (torch.ones(64, 1024),))
    (node,) = graph.unsupported()
    assert node.source_op == "cumsum" and node.fallback is not None
    assert estimate(graph, A100).diagnostics()[0]["fallback_time_s"] > 0


def test_graph_json_round_trip_gives_the_same_estimate() -> None:
    graph = import_onnx(transformer_block())
    again = Graph.from_json(graph.to_json())
    a, b = estimate(graph, A100), estimate(again, A100)
    assert np.allclose(a.node_time_s, b.node_time_s)


def test_graph_json_errors_name_the_node() -> None:
    with pytest.raises(GraphError, match=r"'mm'.*'op' must be"):
        Graph.from_json({"nodes": [{"name": "mm", "op": "matmul"}]})
    bad = {"nodes": [{"name": "mm", "op": {"kind": "matmul", "m": 0, "n": 1, "k": 1, "dtype": "bf16"}}]}
    with pytest.raises(GraphError, match=r"node 'mm'.*'m'.*must be > 0"):
        estimate(Graph.from_json(bad), A100)


def test_dtype_the_device_cannot_run_names_the_node() -> None:
    ok = {"name": "ok", "op": {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "bf16"}}
    fp64 = {"name": "fp64_gemm", "op": {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp64"}}
    with pytest.raises(GraphError, match=r"node 'fp64_gemm'.*fp64 is not supported on google-tpu-v4"):
        estimate(Graph.from_json({"nodes": [ok, fp64]}), "google-tpu-v4")
