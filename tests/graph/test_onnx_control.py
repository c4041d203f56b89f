"""ONNX control flow (issue 26, eleventh pass): If / Loop / Scan subgraphs imported and costed (a Loop's body x its
constant trip count, a Scan's body x its sequence length, an If's taken or more expensive branch), with golden FLOP
counts; a run-time trip count or a missing body falls back, named, and never aborts the estimate. Each model is
checked to run in onnx's ReferenceEvaluator, so the files are real ONNX."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from perfmodel.graph import estimate
from perfmodel.graph.ir import Graph
from perfmodel.graph.onnx_import import import_onnx
from perfmodel.ops import make_op

A100 = "nvidia-a100-sxm4-80gb"
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
ROWS, HID = 4, 64
GEMM = 2 * ROWS * HID * HID  # one [4, 64] x [64, 64] MatMul


def _w(name: str = "W") -> onnx.TensorProto:
    return numpy_helper.from_array(np.full((HID, HID), 0.01, dtype=np.float32), name)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           inits: list[onnx.TensorProto]) -> onnx.ModelProto:
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=inits),
                             opset_imports=[helper.make_opsetid("", 17)])


def _flops(g: Graph) -> float:
    return sum(make_op(n.op).flops for n in g.nodes if n.op is not None)


def _runs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    ReferenceEvaluator(model).run(None, feeds)


def _loop_body() -> onnx.GraphProto:
    """x <- x @ W (W from the enclosing graph's initializers: an outer-scope value)."""
    return helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("MatMul", ["x_in", "W"], ["x_out"])],
        "body", [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
                 helper.make_tensor_value_info("x_in", F, None)],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("x_out", F, None)])


def _loop_model(trip: str, extra: list[onnx.NodeProto], inits: list[onnx.TensorProto],
                inputs: list[onnx.ValueInfoProto] | None = None) -> onnx.ModelProto:
    loop = helper.make_node("Loop", [trip, "c", "x"], ["y"], name="loop", body=_loop_body())
    return _model([*extra, loop], [helper.make_tensor_value_info("x", F, [ROWS, HID]), *(inputs or [])],
                  [helper.make_tensor_value_info("y", F, [ROWS, HID])],
                  [_w(), numpy_helper.from_array(np.array(True), "c"), *inits])


def test_loop_with_a_constant_trip_count_costs_body_times_m() -> None:
    m = numpy_helper.from_array(np.array(5, dtype=np.int64), "M")
    model = _loop_model("M", [], [m])
    _runs(model, {"x": np.ones((ROWS, HID), np.float32)})
    g = import_onnx(model)
    assert g.unsupported() == []
    assert _flops(g) == 5 * GEMM
    gemms = [n for n in g.nodes if n.source_op == "MatMul"]
    assert [n.name for n in gemms] == [f"loop/{i}/body/MatMul_1" for i in range(5)]
    assert g.params == HID * HID  # the outer weight is charged once, by the first copy
    assert gemms[1].inputs == ["loop/1/x_in", "W"]  # copies' own tensors renamed, outer ones kept
    assert g.meta["control_flow"][0]["iterations"] == 5
    assert estimate(g, A100, fusion=False).step_time_s > 0


def test_loop_trip_count_from_a_constant_node() -> None:
    const = helper.make_node("Constant", [], ["M"], value=numpy_helper.from_array(np.array(3, dtype=np.int64)))
    g = import_onnx(_loop_model("M", [const], []))
    assert _flops(g) == 3 * GEMM and g.unsupported() == []


def test_loop_with_a_run_time_trip_count_costs_one_iteration_by_default_naming_the_field() -> None:
    """Twelfth pass: a run-time ``M`` no longer falls back; the body is costed once (the time per iteration) and
    the loop is listed with where its count came from (tests/graph/test_loop_trip_counts.py binds it)."""
    model = _loop_model("M", [], [], [helper.make_tensor_value_info("M", I64, [])])
    _runs(model, {"x": np.ones((ROWS, HID), np.float32), "M": np.array(2, dtype=np.int64)})
    g = import_onnx(model)
    assert g.unsupported() == [] and _flops(g) == GEMM
    (loop,) = g.meta["loops"]
    assert (loop["loop"], loop["iterations"], loop["trip_count"]) == ("loop", 1, "default")
    note = g.meta["control_flow"][0]["note"]
    assert "'M'" in note and "run time" in note
    assert estimate(g, A100, fusion=False).step_time_s > 0


def test_loop_without_a_body_falls_back() -> None:
    loop = helper.make_node("Loop", ["M", "c", "x"], ["y"], name="loop")
    model = _model([loop], [helper.make_tensor_value_info("x", F, [ROWS, HID])],
                   [helper.make_tensor_value_info("y", F, [ROWS, HID])],
                   [numpy_helper.from_array(np.array(2, dtype=np.int64), "M"),
                    numpy_helper.from_array(np.array(True), "c")])
    g = import_onnx(model)
    (bad,) = g.unsupported()
    assert "'body'" in (bad.unsupported or "")
    assert estimate(g, A100, fusion=False).step_time_s > 0


def _branch(name: str, heavy: bool) -> onnx.GraphProto:
    node = (helper.make_node("MatMul", ["x", "W"], [f"{name}_y"]) if heavy
            else helper.make_node("Relu", ["x"], [f"{name}_y"]))
    return helper.make_graph([node], name, [], [helper.make_tensor_value_info(f"{name}_y", F, [ROWS, HID])])


def _if_model(cond_input: bool) -> onnx.ModelProto:
    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=_branch("then", True),
                            else_branch=_branch("else", False))
    inputs = [helper.make_tensor_value_info("x", F, [ROWS, HID])]
    inits = [_w()]
    if cond_input:
        inputs.append(helper.make_tensor_value_info("c", B, []))
    else:
        inits.append(numpy_helper.from_array(np.array(False), "c"))
    return _model([node], inputs, [helper.make_tensor_value_info("y", F, [ROWS, HID])], inits)


def test_if_with_a_run_time_condition_costs_the_more_expensive_branch() -> None:
    model = _if_model(cond_input=True)
    _runs(model, {"x": np.ones((ROWS, HID), np.float32), "c": np.array(True)})
    g = import_onnx(model)
    assert g.unsupported() == [] and _flops(g) == GEMM
    note = g.meta["control_flow"][0]
    assert note["branch"] == "then_branch" and "more expensive" in note["note"]
    assert g.params == HID * HID


def test_if_with_a_constant_condition_costs_the_taken_branch() -> None:
    g = import_onnx(_if_model(cond_input=False))
    assert g.meta["control_flow"][0]["branch"] == "else_branch"
    assert _flops(g) == ROWS * HID  # one Relu, the MatMul branch is not taken
    assert g.params == 0


def test_scan_costs_body_times_sequence_length() -> None:
    seq = 10
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h", "W"], ["hw"]), helper.make_node("Add", ["hw", "xt"], ["h2"]),
         helper.make_node("Identity", ["h2"], ["yt"])],
        "body", [helper.make_tensor_value_info("h", F, None), helper.make_tensor_value_info("xt", F, None)],
        [helper.make_tensor_value_info("h2", F, None), helper.make_tensor_value_info("yt", F, None)])
    scan = helper.make_node("Scan", ["h0", "xs"], ["hT", "ys"], name="rnn", body=body, num_scan_inputs=1)
    model = _model([scan], [helper.make_tensor_value_info("h0", F, [ROWS, HID]),
                            helper.make_tensor_value_info("xs", F, [seq, ROWS, HID])],
                   [helper.make_tensor_value_info("hT", F, [ROWS, HID]),
                    helper.make_tensor_value_info("ys", F, [seq, ROWS, HID])], [_w()])
    _runs(model, {"h0": np.zeros((ROWS, HID), np.float32), "xs": np.ones((seq, ROWS, HID), np.float32)})
    g = import_onnx(model)
    assert g.unsupported() == []
    assert _flops(g) == seq * (GEMM + ROWS * HID)
    assert g.meta["control_flow"][0]["iterations"] == seq


def test_nested_if_inside_a_loop() -> None:
    inner = helper.make_node("If", ["cond_in"], ["x_out"], then_branch=_branch("then", True),
                             else_branch=_branch("else", False))
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", ["x_in"], ["x"]), inner],
        "body", [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
                 helper.make_tensor_value_info("x_in", F, None)],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("x_out", F, None)])
    loop = helper.make_node("Loop", ["M", "c", "x0"], ["y"], name="loop", body=body)
    model = _model([loop], [helper.make_tensor_value_info("x0", F, [ROWS, HID]),
                            helper.make_tensor_value_info("c", B, [])],
                   [helper.make_tensor_value_info("y", F, [ROWS, HID])],
                   [_w(), numpy_helper.from_array(np.array(4, dtype=np.int64), "M")])
    _runs(model, {"x0": np.ones((ROWS, HID), np.float32), "c": np.array(True)})
    g = import_onnx(model)
    assert g.unsupported() == [] and _flops(g) == 4 * GEMM
    assert len({n.name for n in g.nodes}) == len(g.nodes)  # every copy named apart


def _backend_case(module: str, name: str) -> onnx.ModelProto:
    """A model of the ONNX backend node tests (onnx/onnx, onnx/backend/test/case/node/<module>.py): importing the
    module runs its export functions, which register their models."""
    import importlib

    from onnx.backend.test.case import node as cases

    importlib.import_module(f"onnx.backend.test.case.node.{module}")
    model: onnx.ModelProto = next(c.model for c in cases._NodeTestCases if c.name == name)
    return model


def test_onnx_backend_scan_and_loop_models() -> None:
    # test_scan9_sum: x [3, 2] scanned on axis 0, body sum += x_t (an Add of 2 elements): 3 steps
    g = import_onnx(_backend_case("scan", "test_scan9_sum"))
    assert g.unsupported() == [] and _flops(g) == 3 * 2
    # test_scan_sum (opset 8): x [1, 3, 2], batch axis 0 and scan axis 1: 1 x 3 steps of the same body
    g8 = import_onnx(_backend_case("scan", "test_scan_sum"))
    assert g8.unsupported() == [] and _flops(g8) == 3 * 2 and g8.meta["control_flow"][0]["iterations"] == 3
    # test_loop11: the trip count is a graph input (a run-time value): one iteration by default, the field named
    loop = import_onnx(_backend_case("loop", "test_loop11"))
    assert loop.meta["loops"][0]["trip_count"] == "default"  # the body's Slice by iteration_num: named fallbacks
    assert [n.name for n in loop.unsupported()] == ["Loop_0/0/body/Slice_6", "Loop_0/0/body/Add_7"]
    note = loop.meta["control_flow"][0]["note"]
    assert "field 'M'" in note and "'trip_count'" in note


def test_exporters_while_loop_with_int64_max_trip_count_takes_the_default_naming_the_count() -> None:
    # torch.onnx exports a data-dependent `while` as Loop(M = INT64_MAX, cond computed in the body): no count in
    # the file, so the default (one iteration, the time per iteration) or the user's count, never 2^63 copies
    m = numpy_helper.from_array(np.array(np.iinfo(np.int64).max, dtype=np.int64), "M")
    g = import_onnx(_loop_model("M", [], [m]))
    assert g.unsupported() == [] and _flops(g) == GEMM
    assert "INT64_MAX" in g.meta["control_flow"][0]["note"] and g.meta["loops"][0]["trip_count"] == "default"
    assert _flops(import_onnx(_loop_model("M", [], [m]), trip_counts={"loop": 6})) == 6 * GEMM
    assert estimate(g, A100, fusion=False).step_time_s > 0


def test_if_with_a_constant_condition_and_no_taken_branch_falls_back() -> None:
    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=_branch("then", True))
    model = _model([node], [helper.make_tensor_value_info("x", F, [ROWS, HID])],
                   [helper.make_tensor_value_info("y", F, [ROWS, HID])],
                   [_w(), numpy_helper.from_array(np.array(False), "c")])
    g = import_onnx(model)
    (bad,) = g.unsupported()
    assert "'else_branch'" in (bad.unsupported or "")
