"""POST /api/v1/advice/partition and /advice/precision over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from perfmodel.graph.onnx_import import import_onnx

GPU = "nvidia-h100-pcie-80gb"
GRAPH = {
    "name": "mlp",
    "tensors": [{"name": n, "shape": [512, 1024], "dtype": "bf16"} for n in ("x", "h", "a", "y")],
    "nodes": [
        {"name": "up", "op": {"kind": "matmul", "m": 512, "n": 1024, "k": 1024, "dtype": "bf16", "b_batched": False},
         "inputs": ["x"], "outputs": ["h"], "source_op": "MatMul", "params": 1024 * 1024, "weight_bytes": 2097152.0},
        {"name": "gelu", "op": {"kind": "elementwise", "shape": [512, 1024], "dtype": "bf16"},
         "inputs": ["h"], "outputs": ["a"], "source_op": "Gelu"},
        {"name": "down", "op": {"kind": "matmul", "m": 512, "n": 1024, "k": 1024, "dtype": "bf16",
                                "b_batched": False},
         "inputs": ["a"], "outputs": ["y"], "source_op": "MatMul", "params": 1024 * 1024, "weight_bytes": 2097152.0},
    ],
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("advice") / "db.sqlite"
    with TestClient(create_app(Settings(database_url=f"sqlite:///{Path(db)}"))) as c:
        yield c


def test_partition_of_a_graph_with_declared_support(client: TestClient) -> None:
    response = client.post("/api/v1/advice/partition",
                           json={"hardware": GPU, "graph": GRAPH, "supported_ops": ["MatMul"]})
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["model_version"] and out["fallback"] == "intel-xeon-platinum-8480"
    assert out["placement"] == {"device": 2, "fallback": 1}
    assert [b["direction"] for b in out["boundaries"]] == ["d2h", "h2d"]
    assert out["totals"]["step_s"] > out["totals"]["all_on_device_s"] > 0


def test_precision_of_a_bundled_llm(client: TestClient) -> None:
    response = client.post("/api/v1/advice/precision",
                           json={"hardware": GPU, "model": "gpt2", "phase": "decode", "prompt_tokens": 128})
    assert response.status_code == 200, response.text
    out = response.json()
    assert "int4 weight-only" in out["schemes"] and out["ops"] and out["layers"]
    assert out["totals"]["int8 weight-only"]["gain_s"] > 0  # decode reads every weight once per token


def test_advice_errors_name_the_problem(client: TestClient) -> None:
    both = client.post("/api/v1/advice/precision", json={"hardware": GPU, "model": "gpt2", "graph": GRAPH})
    assert both.status_code == 422 and "exactly one" in both.json()["detail"]
    unknown = client.post("/api/v1/advice/partition", json={"hardware": GPU, "graph": GRAPH, "fallback": "nope"})
    assert unknown.status_code == 404 and unknown.json()["field"] == "hardware"
    bad_node = {**GRAPH, "nodes": [{"name": "broken", "op": {"kind": "matmul", "m": 0, "n": 1, "k": 1,
                                                              "dtype": "bf16"}}]}
    broken = client.post("/api/v1/advice/precision", json={"hardware": GPU, "graph": bad_node})
    assert broken.status_code == 422 and "broken" in broken.json()["detail"]


LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"  # the onnx wheel's models, Apache-2.0


def test_partition_of_an_uploaded_onnx_model(client: TestClient) -> None:
    """BVLC AlexNet (the onnx wheel's backend-test file) on a device without LRN: its two LRNs run on the host,
    each one copy down and one up."""
    data = (LIGHT / "light_bvlc_alexnet.onnx").read_bytes()
    ops = "Conv,Gemm,Relu,MaxPool,Softmax,Dropout,Reshape,Flatten"
    response = client.post("/api/v1/advice/partition/onnx", files={"file": ("alexnet.onnx", data)},
                           data={"hardware": GPU, "supported_ops": ops})
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["model_version"] and out["fallback"] == "intel-xeon-platinum-8480"
    assert out["placement"]["fallback"] == 2 and all("LRN" in f["reason"] for f in out["fallback_ops"])
    assert [b["direction"] for b in out["boundaries"]] == ["d2h", "h2d", "d2h", "h2d"]
    totals = out["totals"]
    assert totals["crossings"] == 4 and totals["step_s"] > totals["all_on_device_s"] > 0
    # the same graph as graph JSON through /advice/partition gives the same answer
    as_json = client.post("/api/v1/advice/partition", json={"hardware": GPU, "supported_ops": ops.split(","),
                                                              "graph": import_onnx(data).to_json()})
    assert as_json.status_code == 200 and as_json.json()["totals"] == totals


def test_precision_of_an_uploaded_onnx_model_and_its_errors(client: TestClient) -> None:
    data = (LIGHT / "light_resnet50.onnx").read_bytes()
    # against IEEE fp32 convolutions (CUDA cores); the default TF32 baseline leaves batch-1 fp8 full at 0.99x
    response = client.post("/api/v1/advice/precision/onnx", files={"file": ("resnet50.onnx", data)},
                           data={"hardware": "nvidia-h100-sxm5-80gb", "fp32_math": "ieee"})
    assert response.status_code == 200, response.text
    out = response.json()
    assert len(out["ops"]) == 54  # 53 convolutions and the classifier Gemm hold weights
    full = out["totals"]["fp8 full"]
    assert full["ops"] == 54 and full["quantize_time_s"] > 0 and full["speedup"] > 1
    assert out["totals"]["fp8 weight-only"]["ops"] == 1  # weight-only is modelled for the GEMM only
    truncated = client.post("/api/v1/advice/precision/onnx", files={"file": ("r.onnx", data[: len(data) // 2])},
                            data={"hardware": "nvidia-h100-sxm5-80gb"})
    assert truncated.status_code == 422 and "not a readable ONNX model" in truncated.json()["detail"]
    bad_dims = client.post("/api/v1/advice/partition/onnx", files={"file": ("r.onnx", data)},
                           data={"hardware": GPU, "dims": "batch"})
    assert bad_dims.status_code == 422 and "name=size" in bad_dims.json()["detail"]
