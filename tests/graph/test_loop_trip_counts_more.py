"""Loop trip counts, the remaining cases (issue 26, branch compiler15): an ONNX Scan whose sequence axis the file
leaves open takes the same ``trip_counts`` key as a Loop; a StableHLO while nested in another is listed once with
its total iterations and share; a loop inside an ONNX If branch the estimate does not cost is marked not taken.
The files are built here: the ONNX ones with onnx.helper (each run in onnx's ReferenceEvaluator), the StableHLO one
by ``jax.jit(...).lower(...)``."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from loop_models import A100, GEMM, H100, HID, I64, ROWS, B, F, graph_flops
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from perfmodel.graph import estimate
from perfmodel.graph.onnx_import import import_onnx
from perfmodel.graph.report import text_report
from perfmodel.graph.stablehlo_import import import_stablehlo


def _weight(name: str = "W") -> onnx.TensorProto:
    return numpy_helper.from_array(np.full((HID, HID), 1e-3, dtype=np.float32), name)


# ---- (1) Scan over a sequence axis the file does not fix ----------------------------------------------------------

def _scan(seq: int | str | None, batch: int | None = ROWS) -> onnx.ModelProto:
    """s <- s + x_t @ W over the axis 0 of xs[seq, batch, HID] (an RNN-like Scan, opset 17); ``seq`` None is an
    unnamed dynamic axis, a string a named one."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "W"], ["h"]), helper.make_node("Add", ["s_in", "h"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y_t"])],
        "scan_body", [helper.make_tensor_value_info("s_in", F, [batch, HID]),
                      helper.make_tensor_value_info("x_t", F, [batch, HID])],
        [helper.make_tensor_value_info("s_out", F, [batch, HID]),
         helper.make_tensor_value_info("y_t", F, [batch, HID])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], name="rnn", body=body, num_scan_inputs=1)], "scan",
        [helper.make_tensor_value_info("s0", F, [batch, HID]),
         helper.make_tensor_value_info("xs", F, [seq, batch, HID])],
        [helper.make_tensor_value_info("s", F, [batch, HID])], initializer=[_weight()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ReferenceEvaluator(model).run(None, {"s0": np.zeros((ROWS, HID), np.float32),
                                         "xs": np.ones((5, ROWS, HID), np.float32)})
    return model


@pytest.mark.parametrize("seq", [None, "seq"])
def test_a_scan_over_an_open_sequence_axis_takes_the_trip_count_key(seq: str | None) -> None:
    default = import_onnx(_scan(seq))
    assert default.unsupported() == [] and graph_flops(default, "MatMul") == GEMM  # one step: the time per iteration
    (loop,) = default.meta["loops"]
    assert (loop["loop"], loop["op"], loop["iterations"], loop["trip_count"]) == ("rnn", "Scan", 1, "default")
    assert "per iteration" in loop["note"]
    assert any(n["op"] == "Scan" and "not fixed in the file" in n["note"] for n in default.meta["control_flow"])
    for trips, source in (({"rnn": 12}, "argument"), ({"*": 12}, "argument '*'")):
        g = import_onnx(_scan(seq), trip_counts=trips)
        assert g.unsupported() == [] and graph_flops(g, "MatMul") == 12 * GEMM and g.params == HID * HID
        assert (g.meta["loops"][0]["iterations"], g.meta["loops"][0]["trip_count"]) == (12, source)
        assert "trip_counts_unmatched" not in g.meta
    shares = estimate(import_onnx(_scan(seq), trip_counts={"rnn": 12}), A100, fusion=False).to_json(False)["loops"]
    assert shares[0]["nodes"] == 12 * 3 and shares[0]["share"] == pytest.approx(1.0)


def test_a_fixed_scan_length_is_read_and_a_users_count_replaces_it() -> None:
    fixed = import_onnx(_scan(5))
    assert fixed.meta["loops"][0]["trip_count"] == "constant (scanned axis)"
    assert graph_flops(fixed, "MatMul") == 5 * GEMM
    assert graph_flops(import_onnx(_scan(5), trip_counts={"*": 9}), "MatMul") == 5 * GEMM  # '*' is for unseen counts
    early = import_onnx(_scan(5), trip_counts={"rnn": 2})
    assert graph_flops(early, "MatMul") == 2 * GEMM and early.meta["loops"][0]["trip_count"] == "argument"


def test_a_scan_whose_element_shape_is_open_still_falls_back_named() -> None:
    g = import_onnx(_scan(None, batch=None), trip_counts={"rnn": 4})
    (bad,) = g.unsupported()
    why = bad.unsupported or ""
    assert bad.name == "rnn" and "'xs'" in why and "past the scanned axis" in why


# ---- (2) a StableHLO while nested in another ---------------------------------------------------------------------

def _jax_nested() -> str:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    def f(x: Any, w: Any, n: Any) -> Any:
        return jax.lax.fori_loop(0, 3, lambda i, h: jax.lax.fori_loop(0, n, lambda j, g: jnp.tanh(g @ w), h), x)

    args = (jnp.ones((ROWS, HID), jnp.float32), jnp.ones((HID, HID), jnp.float32), 5)
    return str(jax.jit(f).lower(*args).as_text())


def test_a_nested_stablehlo_while_is_listed_once_with_its_total_iterations() -> None:
    text = _jax_nested()
    default = import_stablehlo(text)
    outer, inner = sorted(default.meta["loops"], key=lambda loop: loop["prefix"].count("/"))
    assert (outer["iterations"], outer["trip_count"]) == (3, "constant bound")
    # one entry for the inner loop, entered once per outer iteration: 3 x 1 (the default) iterations in all
    assert (inner["iterations"], inner["entered"], inner["trip_count"]) == (3, 3, "default")
    assert "/" in inner["loop"] and "." not in inner["loop"].split("/")[0]  # its template name, 'whileN/.../%k'
    bound = import_stablehlo(text, trip_counts={inner["loop"]: 4})  # the template name binds every copy
    assert graph_flops(bound, "stablehlo.dot_general") == 3 * 4 * GEMM
    (loop,) = [entry for entry in bound.meta["loops"] if entry["loop"] == inner["loop"]]
    assert (loop["iterations"], loop["entered"], loop["trip_count"]) == (12, 3, "argument")
    assert "12 iteration(s) in all, over the 3 times it is entered" in loop["note"]
    est = estimate(bound, H100, fusion=False)
    shares = {entry["loop"]: entry for entry in est.to_json(detail=False)["loops"]}
    assert len(shares) == 2
    copies = [t for n, t in zip(bound.nodes, est.node_time_s, strict=True)
              if n.name.count("/while") == 1 and "/" in n.name.split("/while", 1)[1]]
    assert shares[inner["loop"]]["nodes"] == len(copies) == 12 * inner["body_nodes"]
    assert shares[inner["loop"]]["time_s"] == pytest.approx(float(sum(copies)))
    assert 0.5 < shares[inner["loop"]]["share"] < shares[outer["loop"]]["share"] == pytest.approx(1.0)


# ---- (3) a loop inside an If branch that is not costed -----------------------------------------------------------

def _if_with_loop() -> onnx.ModelProto:
    """If(c computed): then_branch = Loop 'inner' (M = graph input 'n') of one MatMul; else_branch = two MatMuls."""
    loop_body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("MatMul", ["z_in", "W"], ["z_out"])],
        "loop_body", [helper.make_tensor_value_info("j", I64, []), helper.make_tensor_value_info("c_in", B, []),
                      helper.make_tensor_value_info("z_in", F, [ROWS, HID])],
        [helper.make_tensor_value_info("c_out", B, []), helper.make_tensor_value_info("z_out", F, [ROWS, HID])])
    then = helper.make_graph([helper.make_node("Loop", ["n", "", "x"], ["t"], name="inner", body=loop_body)], "then",
                             [], [helper.make_tensor_value_info("t", F, [ROWS, HID])])
    other = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["e1"]), helper.make_node("MatMul", ["e1", "W"],
                                                                                                ["e"])],
                              "else", [], [helper.make_tensor_value_info("e", F, [ROWS, HID])])
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)], "if_loop",
        [helper.make_tensor_value_info("x", F, [ROWS, HID]), helper.make_tensor_value_info("n", I64, [])],
        [helper.make_tensor_value_info("y", F, [ROWS, HID])],
        initializer=[_weight(), numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ReferenceEvaluator(model).run(None, {"x": np.ones((ROWS, HID), np.float32), "n": np.array(3, np.int64)})
    return model


def test_a_loop_in_the_if_branch_not_costed_is_marked_not_taken() -> None:
    g = import_onnx(_if_with_loop())  # the loop's default 1 MatMul < the else branch's 2: else is costed
    assert graph_flops(g, "MatMul") == 2 * GEMM
    assert any(n["op"] == "If" and n["branch"] == "else_branch" for n in g.meta["control_flow"])
    (loop,) = g.meta["loops"]
    assert loop["loop"] == "branch/then_branch/inner" and loop["taken"] is False and "not taken" in loop["note"]
    data = estimate(g, A100, fusion=False).to_json(detail=False)
    assert (data["loops"][0]["nodes"], data["loops"][0]["time_s"]) == (0, 0.0)
    report = text_report(data)
    assert "loop branch/then_branch/inner (Loop): in an If branch not taken, not costed" in report
    assert "--trip-count branch/then_branch/inner=N" not in report  # no count asked for a loop that is not costed


def test_a_loop_in_the_costed_branch_is_listed_as_before() -> None:
    g = import_onnx(_if_with_loop(), trip_counts={"inner": 5})  # 5 MatMuls > 2: the then branch is costed
    assert graph_flops(g, "MatMul") == 5 * GEMM
    (loop,) = g.meta["loops"]
    assert "taken" not in loop and loop["iterations"] == 5
    (entry,) = estimate(g, A100, fusion=False).to_json(detail=False)["loops"]
    assert entry["nodes"] == 5 * 2 and 0.5 < entry["share"] < 1  # the ReduceSum and Greater outside keep the rest
