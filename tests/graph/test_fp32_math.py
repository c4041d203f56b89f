"""The ``fp32_math`` estimate option: which fp32 convolutions / matmuls run on TF32 tensor cores (framework | tf32 |
ieee), on the ONNX backend-test light ResNet-50 (the ``onnx`` wheel, Apache-2.0) and small graphs; CLI, REST and
the precision advice's baseline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.main import create_app
from api.settings import Settings
from perfmodel.advice.precision import precision_advice
from perfmodel.dtypes import DType
from perfmodel.graph.cli import graph_app
from perfmodel.graph.estimate import compile_graph, estimate
from perfmodel.graph.ir import Graph, Node
from perfmodel.graph.math_mode import check, retyped, tf32_kinds
from perfmodel.graph.onnx_import import import_onnx
from perfmodel.roofline import resolve_hardware

RESNET = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"
A100, H100, V100, MI325X = "nvidia-a100-sxm4-80gb", "nvidia-h100-sxm5-80gb", "nvidia-v100-sxm2-32gb", "amd-mi325x"
CONV = {"kind": "conv2d", "batch": 8, "in_channels": 64, "out_channels": 64, "height": 56, "width": 56,
        "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp32"}
GEMM = {"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp32"}


@pytest.fixture(scope="module")
def resnet() -> Graph:
    return import_onnx(RESNET)


def small(producer: str | None = None, kind: str = "onnx") -> Graph:
    g = Graph("small", meta={"kind": kind, **({"producer": producer} if producer else {})})
    g.add(Node("conv", dict(CONV)))
    g.add(Node("fc", dict(GEMM)))
    g.add(Node("half", {**GEMM, "dtype": "bf16"}))
    return g


def _compute(graph: Graph, device: str, mode: str) -> dict[str, DType | None]:
    compiled = compile_graph(graph, tf32_kinds(graph, resolve_hardware(device), mode))
    return {n.name: getattr(compiled.ops[int(i)], "compute_dtype", None)
            for n, i in zip(graph.nodes, compiled.index, strict=True)}


def test_framework_puts_convolutions_on_tf32_only_where_the_device_has_it(resnet: Graph) -> None:
    for device in (A100, H100):
        compiled = compile_graph(resnet, tf32_kinds(resnet, resolve_hardware(device), "framework"))
        kinds = {op.kind: getattr(op, "compute_dtype", None) for op in compiled.ops if op.kind in ("conv2d", "matmul")}
        assert kinds == {"conv2d": DType.TF32, "matmul": None}  # a Caffe2 export: its Gemm stays IEEE fp32
        assert compiled.tf32_nodes == 53  # ResNet-50's 53 convolutions
    for device in (V100, MI325X):  # no TF32 tensor cores / not CUDA's TF32 switch: nothing changes
        assert tf32_kinds(resnet, resolve_hardware(device), "framework") == ()
    assert tf32_kinds(resnet, resolve_hardware(MI325X), "tf32") == ("conv2d", "matmul")  # XF32 asked for
    assert tf32_kinds(resnet, resolve_hardware(V100), "tf32") == ()
    assert tf32_kinds(resnet, resolve_hardware(A100), "ieee") == ()


def test_tensorflow_graphs_put_matmuls_on_tf32_too() -> None:
    assert _compute(small(), A100, "framework") == {"conv": DType.TF32, "fc": None, "half": None}
    for graph in (small("tf2onnx"), small(kind="tflite")):
        assert _compute(graph, A100, "framework") == {"conv": DType.TF32, "fc": DType.TF32, "half": None}
    assert _compute(small(), A100, "tf32") == {"conv": DType.TF32, "fc": DType.TF32, "half": None}
    assert _compute(small("tf2onnx"), V100, "tf32") == {"conv": None, "fc": None, "half": None}
    explicit = {**GEMM, "compute_dtype": "fp32"}  # a trace said IEEE: kept
    assert retyped(explicit, ("matmul",)) is explicit and retyped(CONV, ()) is CONV


def test_ieee_is_the_op_models_default_and_framework_equals_explicit_tf32(resnet: Graph) -> None:
    hw = resolve_hardware(A100)
    ieee = estimate(resnet, hw, fp32_math="ieee")
    assert ieee.fp32_math == {"mode": "ieee", "tf32_kinds": [], "tf32_nodes": 0}
    same = estimate(resnet, resolve_hardware(V100), fp32_math="framework").node_time_s
    assert np.array_equal(estimate(resnet, resolve_hardware(V100), fp32_math="ieee").node_time_s, same)
    framework = estimate(resnet, hw)  # the default
    assert framework.fp32_math == {"mode": "framework", "tf32_kinds": ["conv2d"], "tf32_nodes": 53}
    # the reference path: the same graph with compute_dtype tf32 written on every conv, costed as given
    written = Graph.from_json(resnet.to_json())
    for node in written.nodes:
        if node.op and node.op.get("kind") == "conv2d":
            node.op = {**node.op, "compute_dtype": "tf32"}
    reference = estimate(written, hw, fp32_math="ieee")
    assert np.array_equal(framework.node_time_s, reference.node_time_s)
    assert framework.step_time_s == reference.step_time_s < ieee.step_time_s
    convs = [i for i, n in enumerate(resnet.nodes) if n.op and n.op.get("kind") == "conv2d"]
    others = [i for i in range(len(resnet.nodes)) if i not in set(convs)]
    assert np.array_equal(framework.node_time_s[others], ieee.node_time_s[others])  # only convolutions move
    assert (framework.node_time_s[convs] < ieee.node_time_s[convs]).all()


def test_bad_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="framework, tf32, ieee"):
        check("fp16")
    with pytest.raises(ValueError, match="fp32_math"):
        estimate(small(), A100, fp32_math="TF32")


def test_precision_baseline_follows_the_mode(resnet: Graph) -> None:
    framework, ieee = precision_advice(resnet, A100), precision_advice(resnet, A100, "ieee")
    assert framework.fp32_math == {"mode": "framework", "tf32_kinds": ["conv2d"], "tf32_nodes": 53}
    assert framework.graph_time_s == pytest.approx(float(estimate(resnet, A100, fusion=False).node_time_s.sum()))
    assert ieee.graph_time_s == pytest.approx(float(estimate(resnet, A100, fusion=False, fp32_math="ieee")
                                                    .node_time_s.sum()))
    assert framework.graph_time_s < ieee.graph_time_s
    fp8 = "fp8 full"  # the quantized convs run in the narrow dtype, whatever the baseline's mode
    assert framework.totals[fp8]["graph_time_s"] == pytest.approx(ieee.totals[fp8]["graph_time_s"])


def test_cli_and_api_accept_and_validate_the_option(tmp_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(graph_app, ["estimate", str(RESNET), "-H", A100, "--fp32-math", "ieee"])
    assert r.exit_code == 0, r.output
    assert "fp32 math ieee: no fp32 op on TF32 tensor cores" in r.output
    r = runner.invoke(graph_app, ["estimate", str(RESNET), "-H", A100])
    assert "fp32 math framework: 53 fp32 conv2d nodes on TF32 tensor cores" in r.output
    r = runner.invoke(graph_app, ["estimate", str(RESNET), "-H", A100, "--fp32-math", "half"])
    assert r.exit_code == 2 and "--fp32-math 'half'" in r.output
    app = create_app(Settings(database_url="sqlite:///" + str(tmp_path / "db.sqlite3")))
    with TestClient(app) as client:
        graph = small().to_json()
        url = "/api/v1/graphs/estimate"
        times = {}
        for mode in ("framework", "tf32", "ieee"):
            r = client.post(url, json={"hardware": A100, "graph": graph, "fp32_math": mode})
            assert r.status_code == 200, r.text
            assert r.json()["fp32_math"]["mode"] == mode
            times[mode] = r.json()["step_time_s"]
        assert times["tf32"] < times["framework"] < times["ieee"]
        assert client.post(url, json={"hardware": A100, "graph": graph, "fp32_math": "x"}).status_code == 422
        r = client.post(url + "/onnx", files={"file": ("r.onnx", RESNET.read_bytes())},
                        data={"hardware": A100, "fp32_math": "ieee", "detail": "false"})
        assert r.status_code == 200 and r.json()["fp32_math"]["tf32_nodes"] == 0, r.text
        r = client.post("/api/v1/advice/precision", json={"hardware": A100, "graph": graph, "fp32_math": "tf32"})
        assert r.status_code == 200 and r.json()["fp32_math"]["tf32_kinds"] == ["conv2d", "matmul"], r.text
        assert client.post("/api/v1/advice/precision",
                           json={"hardware": A100, "graph": graph, "fp32_math": "x"}).status_code == 422
