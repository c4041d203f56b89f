"""Loops whose trip count the importer cannot see (issue 26, twelfth pass): an ONNX Loop with a run-time ``M`` (a
graph input) and a computed ``cond``, a StableHLO ``while`` from ``jax.lax.fori_loop`` over a traced bound and from
``jax.lax.while_loop``. The count is user-suppliable in Python (``trip_counts``), the CLI (``--trip-count``) and the
REST uploads (``trip_counts``); without one the body is costed once (the time per iteration) and the estimate's
``loops`` lists every loop with the count used, where it came from, and the time and share it carries. The files
are built here: the ONNX ones with onnx.helper (each run in onnx's ReferenceEvaluator), the StableHLO ones by
``jax.jit(...).lower(...)``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from fastapi.testclient import TestClient
from loop_models import A100, GEMM, H100, HID, I64, ROWS, B, F, graph_flops
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from typer.testing import CliRunner

from api.main import create_app
from api.settings import Settings
from perfmodel.graph import GraphError, estimate
from perfmodel.graph.cli import graph_app
from perfmodel.graph.loader import estimate_model
from perfmodel.graph.loops import DEFAULT_TRIP_COUNT, loop_shares, parse_trip_counts
from perfmodel.graph.onnx_control import MAX_UNROLLED_NODES
from perfmodel.graph.onnx_import import import_onnx
from perfmodel.graph.stablehlo_import import import_stablehlo


def _while_body() -> onnx.GraphProto:
    """x <- relu(x @ W); cond <- sum(x) < 1e6 (computed: a while-loop as torch exports one)."""
    limit = numpy_helper.from_array(np.array(1e6, dtype=np.float32), "limit")
    return helper.make_graph(
        [helper.make_node("MatMul", ["x_in", "W"], ["h"]), helper.make_node("Relu", ["h"], ["x_out"]),
         helper.make_node("ReduceSum", ["x_out"], ["s"], keepdims=0),
         helper.make_node("Less", ["s", "limit"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
                 helper.make_tensor_value_info("x_in", F, [ROWS, HID])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("x_out", F, [ROWS, HID])],
        initializer=[limit])


def _onnx_while(with_head: bool = False) -> onnx.ModelProto:
    """Loop(M = graph input 'steps', cond = graph input 'go', x) with a computed cond; optionally a MatMul
    before it (outside the loop) to share the time with."""
    nodes = [helper.make_node("MatMul", ["x0", "W"], ["x"], name="head")] if with_head else []
    nodes.append(helper.make_node("Loop", ["steps", "go", "x0" if not with_head else "x"], ["y"], name="decode",
                                  body=_while_body()))
    w = numpy_helper.from_array(np.full((HID, HID), 1e-3, dtype=np.float32), "W")
    graph = helper.make_graph(nodes, "while_model",
                              [helper.make_tensor_value_info("x0", F, [ROWS, HID]),
                               helper.make_tensor_value_info("steps", I64, []),
                               helper.make_tensor_value_info("go", B, [])],
                              [helper.make_tensor_value_info("y", F, [ROWS, HID])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ReferenceEvaluator(model).run(None, {"x0": np.ones((ROWS, HID), np.float32), "steps": np.array(4, np.int64),
                                         "go": np.array(True)})
    return model


def _nested() -> onnx.ModelProto:
    """outer: Loop M = 3 (constant) whose body holds inner: Loop with M = the graph input 'n' (run time)."""
    inner = helper.make_node("Loop", ["n", "", "y_in"], ["y_out"], name="inner", body=helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("MatMul", ["z_in", "W"], ["z_out"])],
        "inner_body", [helper.make_tensor_value_info("j", I64, []), helper.make_tensor_value_info("c_in", B, []),
                       helper.make_tensor_value_info("z_in", F, [ROWS, HID])],
        [helper.make_tensor_value_info("c_out", B, []), helper.make_tensor_value_info("z_out", F, [ROWS, HID])]))
    outer_body = helper.make_graph(
        [helper.make_node("Identity", ["oc_in"], ["oc_out"]), inner],
        "outer_body", [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("oc_in", B, []),
                       helper.make_tensor_value_info("y_in", F, [ROWS, HID])],
        [helper.make_tensor_value_info("oc_out", B, []), helper.make_tensor_value_info("y_out", F, [ROWS, HID])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["three", "", "x"], ["y"], name="outer", body=outer_body)], "nested",
        [helper.make_tensor_value_info("x", F, [ROWS, HID]), helper.make_tensor_value_info("n", I64, [])],
        [helper.make_tensor_value_info("y", F, [ROWS, HID])],
        initializer=[numpy_helper.from_array(np.full((HID, HID), 1e-3, dtype=np.float32), "W"),
                     numpy_helper.from_array(np.array(3, dtype=np.int64), "three")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ReferenceEvaluator(model).run(None, {"x": np.ones((ROWS, HID), np.float32), "n": np.array(2, np.int64)})
    return model


# ---- ONNX --------------------------------------------------------------------------------------------------------

def test_an_onnx_while_loop_without_a_count_costs_one_iteration_and_says_so() -> None:
    g = import_onnx(_onnx_while())
    assert g.unsupported() == [] and graph_flops(g, "MatMul") == DEFAULT_TRIP_COUNT * GEMM == GEMM
    (loop,) = g.meta["loops"]
    assert (loop["loop"], loop["op"], loop["iterations"], loop["trip_count"]) == ("decode", "Loop", 1, "default")
    assert "per iteration" in loop["note"] and "trip_counts" in loop["note"]
    assert any("'M'" in n["note"] and "run time" in n["note"] for n in g.meta["control_flow"])


@pytest.mark.parametrize("trips", [{"decode": 16}, {"*": 16}, {"decode": 16, "*": 3}])
def test_the_users_trip_count_unrolls_the_body_that_many_times(trips: dict[str, int]) -> None:
    g = import_onnx(_onnx_while(), trip_counts=trips)
    assert g.unsupported() == [] and graph_flops(g, "MatMul") == 16 * GEMM
    assert g.params == HID * HID  # the outer weight charged once, not per iteration
    (loop,) = g.meta["loops"]
    assert loop["iterations"] == 16 and loop["trip_count"] == ("argument" if "decode" in trips else "argument '*'")


def test_a_users_count_replaces_a_constant_m_and_an_unknown_name_is_reported() -> None:
    model = _onnx_while()
    model.graph.initializer.append(numpy_helper.from_array(np.array(50, dtype=np.int64), "steps"))
    del model.graph.input[1]  # 'steps' is now a constant M = 50 (with a computed cond: an upper bound)
    upper = import_onnx(model)
    assert upper.meta["loops"][0]["iterations"] == 50 and "upper bound" in upper.meta["loops"][0]["trip_count"]
    early = import_onnx(model, trip_counts={"decode": 7, "decoder": 2})
    assert graph_flops(early, "MatMul") == 7 * GEMM and early.meta["loops"][0]["trip_count"] == "argument"
    assert early.meta["trip_counts_unmatched"] == ["decoder"]


def test_nested_loops_are_named_by_path_and_multiply() -> None:
    default = import_onnx(_nested())
    names = {entry["loop"]: entry for entry in default.meta["loops"]}
    assert names["outer/body/inner"]["trip_count"] == "default" and names["outer"]["trip_count"] == "constant M"
    assert graph_flops(default, "MatMul") == 3 * 1 * GEMM
    bound = import_onnx(_nested(), trip_counts={"outer/body/inner": 4})
    assert graph_flops(bound, "MatMul") == 3 * 4 * GEMM
    assert graph_flops(import_onnx(_nested(), trip_counts={"inner": 5}), "MatMul") == 3 * 5 * GEMM  # the bare name
    shares = {entry["loop"]: entry for entry in estimate(bound, A100, fusion=False).to_json(detail=False)["loops"]}
    assert shares["outer/body/inner"]["nodes"] == 3 * 4 * 2  # every copy of the inner loop, in each outer copy
    assert shares["outer/body/inner"]["share"] == pytest.approx(shares["outer"]["share"])
    assert shares["outer"]["share"] > 0.99


def test_a_count_past_the_unrolled_node_cap_falls_back_named_and_bounded() -> None:
    big = MAX_UNROLLED_NODES  # x 4 body nodes: past the cap
    g = import_onnx(_onnx_while(), trip_counts={"decode": big})
    (bad,) = g.unsupported()
    assert bad.name == "decode" and f"{big} iterations (argument)" in (bad.unsupported or "")
    assert str(MAX_UNROLLED_NODES) in (bad.unsupported or "")
    assert estimate(g, A100, fusion=False).step_time_s > 0
    # still listed in 'loops', saying it was not unrolled and that its time leaves out the iterations' work
    (loop,) = estimate_model(_onnx_while().SerializeToString(), A100, fusion=False,
                             trip_counts={"decode": big})["loops"]
    assert (loop["loop"], loop["iterations"], loop["unrolled"], loop["nodes"]) == ("decode", big, False, 1)
    assert "not unrolled" in loop["note"] and loop["share"] == pytest.approx(1.0)


def test_a_stablehlo_while_past_the_cap_is_listed_not_unrolled() -> None:
    from perfmodel.graph.stablehlo_import import MAX_UNROLLED_NODES as HLO_CAP

    g = import_stablehlo(_jax_fori(bound_traced=True), trip_counts={"%0": HLO_CAP})
    (bad,) = g.unsupported()
    assert str(HLO_CAP) in (bad.unsupported or "")
    (loop,) = g.meta["loops"]
    assert (loop["loop"], loop["iterations"], loop["unrolled"]) == ("%0", HLO_CAP, False)
    (listed,) = estimate_model(g, H100, fusion=False)["loops"]
    assert listed["nodes"] == 1 and listed["time_s"] > 0 and "not unrolled" in listed["note"]


def test_the_estimate_lists_each_loop_with_the_time_and_share_it_carries() -> None:
    one = estimate_model(_onnx_while(with_head=True).SerializeToString(), A100, fusion=False)
    many = estimate_model(_onnx_while(with_head=True).SerializeToString(), A100, fusion=False,
                          trip_counts={"decode": 10})
    (l1,), (l10,) = one["loops"], many["loops"]
    assert (l1["iterations"], l10["iterations"]) == (1, 10)
    assert l10["time_s"] == pytest.approx(10 * l1["time_s"], rel=1e-9)  # identical copies, costed the same
    rows = many["ops"]
    inside = sum(r["time_s"] for r in rows if r["name"].startswith("decode/"))
    total = sum(r["time_s"] for r in rows if r["stream"] != "comm_overlap")
    assert l10["time_s"] == pytest.approx(inside) and l10["share"] == pytest.approx(inside / total)
    assert 0 < l1["share"] < l10["share"] < 1  # the head MatMul outside the loop keeps the rest
    assert l10["nodes"] == 10 * 4  # ten copies of the 4-node body (the Loop's own output view is 'decode')


# ---- StableHLO from jax ------------------------------------------------------------------------------------------

def _jax_fori(bound_traced: bool) -> str:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    def f(x: Any, w: Any, n: Any) -> Any:
        return jax.lax.fori_loop(0, n if bound_traced else 5, lambda i, h: jnp.tanh(h @ w), x)

    args = (jnp.ones((ROWS, HID), jnp.float32), jnp.ones((HID, HID), jnp.float32), 5)
    return str(jax.jit(f).lower(*args).as_text())


def test_a_jax_fori_loop_over_a_traced_bound_takes_the_users_count() -> None:
    text = _jax_fori(bound_traced=True)
    default = import_stablehlo(text)
    (loop,) = default.meta["loops"]
    assert (loop["loop"], loop["iterations"], loop["trip_count"]) == ("%0", 1, "default")
    assert graph_flops(default, "stablehlo.dot_general") == GEMM and not default.unsupported()
    for trips in ({"%0": 5}, {"*": 5}):
        bound = import_stablehlo(text, trip_counts=trips)
        assert graph_flops(bound, "stablehlo.dot_general") == 5 * GEMM
    # the same loop with its bound a constant: the importer reads 5 itself, and it costs the same
    static = import_stablehlo(_jax_fori(bound_traced=False))
    assert static.meta["loops"][0]["trip_count"] == "constant bound"
    assert graph_flops(static) == pytest.approx(graph_flops(import_stablehlo(text, trip_counts={"%0": 5})), rel=1e-3)


def test_a_jax_while_loop_with_a_data_dependent_exit_is_costed_per_iteration_or_bound() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    lowered = jax.jit(lambda x, w: jax.lax.while_loop(lambda h: jnp.sum(h) < 1e6, lambda h: h @ w + 1.0, x)).lower(
        jnp.ones((ROWS, HID), jnp.float32), jnp.ones((HID, HID), jnp.float32))
    text = lowered.as_text()
    one = estimate(import_stablehlo(text), H100, fusion=False)
    bound = import_stablehlo(text, trip_counts={"%0": 12})
    assert graph_flops(bound, "stablehlo.dot_general") == 12 * GEMM
    # the exit test sum(h) < 1e6 runs on the device every iteration: its reduce over the state is costed each time
    reduces = [n for n in bound.nodes if n.source_op == "stablehlo.reduce"]
    assert len(reduces) == 12 and all("/cond/" in n.name for n in reduces)
    assert graph_flops(bound, "stablehlo.reduce") == 12 * ROWS * HID and bound.meta["loops"][0]["cond_costed"]
    twelve = estimate(bound, H100, fusion=False)
    assert twelve.step_time_s == pytest.approx(12 * one.step_time_s, rel=1e-6)
    (loop,) = twelve.to_json(detail=False)["loops"]
    assert loop["iterations"] == 12 and loop["share"] == pytest.approx(1.0)


# ---- the CLI, REST and argument checks ---------------------------------------------------------------------------

def test_the_cli_flag_binds_the_loop_and_the_report_lists_it(tmp_path: Path) -> None:
    path = tmp_path / "while.onnx"
    path.write_bytes(_onnx_while(with_head=True).SerializeToString())
    runner = CliRunner()
    r = runner.invoke(graph_app, ["estimate", str(path), "-H", A100, "--trip-count", "decode=9", "--json"])
    assert r.exit_code == 0, r.output
    (loop,) = json.loads(r.output)["loops"]
    assert loop["iterations"] == 9 and loop["trip_count"] == "argument"
    text = runner.invoke(graph_app, ["estimate", str(path), "-H", A100])
    assert text.exit_code == 0, text.output
    assert "loop decode (Loop): 1 iteration(s) from default" in text.output
    assert "pass --trip-count decode=N" in text.output
    typo = runner.invoke(graph_app, ["estimate", str(path), "-H", A100, "--trip-count", "decod=4"])
    assert "--trip-count decod: no loop of this name" in typo.output
    bad = runner.invoke(graph_app, ["estimate", str(path), "-H", A100, "--trip-count", "decode=many"])
    assert bad.exit_code != 0 and "--trip-count" in bad.output


def test_the_advise_cli_takes_the_flag_and_notes_a_default_loop(tmp_path: Path) -> None:
    from perfmodel.advice.cli import advise_app

    path = tmp_path / "while.onnx"
    path.write_bytes(_onnx_while().SerializeToString())
    runner = CliRunner()
    default = runner.invoke(advise_app, ["precision", str(path), "-H", A100])
    assert default.exit_code == 0, default.output
    assert "Loop 'decode': 1 iteration(s), trip count from default" in default.output
    bound = runner.invoke(advise_app, ["partition", str(path), "-H", A100, "--trip-count", "decode=5", "--json"])
    assert bound.exit_code == 0, bound.output
    bad = runner.invoke(advise_app, ["partition", str(path), "-H", A100, "--trip-count", "decode"])
    assert bad.exit_code != 0 and "--trip-count" in bad.output


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("loops") / "db.sqlite"
    with TestClient(create_app(Settings(database_url=f"sqlite:///{db}"))) as c:
        yield c


def test_rest_uploads_take_trip_counts(client: TestClient) -> None:
    onnx_bytes = _onnx_while().SerializeToString()
    r = client.post("/api/v1/graphs/estimate/onnx", files={"file": ("w.onnx", onnx_bytes)},
                    data={"hardware": A100, "detail": "false", "trip_counts": "decode=6"})
    assert r.status_code == 200, r.text
    assert r.json()["loops"][0]["iterations"] == 6
    r = client.post("/api/v1/graphs/estimate/stablehlo", files={"file": ("f.mlir", _jax_fori(True).encode())},
                    data={"hardware": H100, "detail": "false", "trip_counts": '{"*": 3}'})
    assert r.status_code == 200, r.text
    assert (r.json()["loops"][0]["iterations"], r.json()["loops"][0]["trip_count"]) == (3, "argument '*'")
    r = client.post("/api/v1/advice/partition/onnx", files={"file": ("w.onnx", onnx_bytes)},
                    data={"hardware": A100, "trip_counts": "decode=6"})
    assert r.status_code == 200, r.text
    bad = client.post("/api/v1/graphs/estimate/onnx", files={"file": ("w.onnx", onnx_bytes)},
                      data={"hardware": A100, "trip_counts": "decode=-2"})
    assert bad.status_code == 422 and "trip_counts" in bad.json()["detail"]


def test_trip_count_arguments_are_parsed_and_checked() -> None:
    assert parse_trip_counts("decode=8, *=2") == {"decode": 8, "*": 2}
    assert parse_trip_counts(["a=b=3"]) == {"a=b": 3}  # the count is after the last '='
    assert parse_trip_counts('{"%0": 4}') == {"%0": 4}
    for bad in ("decode", "decode=x", "=3", '{"a": -1}', '{"a": 1.5}', '["a"]', "{oops", "a=1,a=2"):
        with pytest.raises(GraphError, match="trip_counts"):
            parse_trip_counts(bad)
    with pytest.raises(GraphError, match="trip count of 'decode'"):
        import_onnx(_onnx_while(), trip_counts={"decode": True})  # a bool is not a count


def test_loop_shares_reads_the_nodes_under_each_prefix() -> None:
    loops = [{"loop": "a", "prefix": "a/"}, {"loop": "b", "prefix": "b."}, {"loop": "a/body/c", "prefix": "a/body/c/"}]
    names = ["a/0/x", "head", "a/1/body/c/0/body/y", "b.0/y", "ab/z"]
    out = loop_shares(loops, names, [1.0, 2.0, 3.0, 4.0, 10.0])
    assert [(o["nodes"], o["time_s"], o["share"]) for o in out] == [(2, 4.0, 0.2), (1, 4.0, 0.2), (1, 3.0, 0.15)]
    assert "prefix" not in out[0] and loop_shares(None, names, [0.0] * 5) == []
