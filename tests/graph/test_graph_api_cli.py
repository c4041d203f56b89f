"""POST /graphs/estimate (+ /onnx upload) over HTTP, and the estimate/sweep CLI commands."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from graph_models import transformer_block
from onnx import helper
from typer.testing import CliRunner

from api.main import create_app
from api.routers import graphs
from api.settings import Settings
from perfmodel.graph.cli import graph_app
from perfmodel.store import Store

URL = "/api/v1/graphs/estimate"


def _client(tmp_path: Path, **settings: object) -> TestClient:
    app = create_app(Settings(database_url="sqlite:///" + str(tmp_path / "db.sqlite3"), **settings))  # type: ignore[arg-type]
    if not any(getattr(r, "path", "") == URL for r in app.routes):
        app.include_router(graphs.router, prefix="/api/v1")
    return TestClient(app)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with _client(tmp_path) as c:
        yield c


def test_bundled_model_estimate(client: TestClient) -> None:
    r = client.post(URL, json={"hardware": "nvidia-h100-sxm5-80gb", "model": "llama-3-8b", "batch": 4,
                               "prompt_tokens": 1024, "kv_len": 2048})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["summary"]["prefill"]["time_to_first_token_s"] > body["summary"]["decode"]["time_per_output_token_s"]
    decode = body["decode"]
    assert decode["hierarchy"]["children"][0]["children"][0]["value"] >= 0
    ops = decode["ops"]
    assert all(o["end_s"] >= o["start_s"] for o in ops) and ops[-1]["end_s"] == pytest.approx(decode["step_time_s"])
    assert "HBM3-bound weight reads" in decode["bottleneck"]["summary"]


def test_config_and_graph_json(client: TestClient) -> None:
    config = json.loads(Path("perfmodel/graph/configs/gpt2.json").read_text())
    r = client.post(URL, json={"hardware": "nvidia-a100-sxm4-80gb", "config": config, "phase": "decode",
                               "detail": False})
    assert r.status_code == 200, r.text
    assert "ops" not in r.json()["decode"] and r.json()["decode"]["llm"]["tokens_per_s"] > 0
    graph = {"nodes": [{"name": "gemm", "op": {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}},
                       {"name": "weird", "op": None, "unsupported": "custom kernel",
                        "fallback": {"kind": "elementwise", "shape": [1 << 20], "dtype": "bf16"}}]}
    r = client.post(URL, json={"hardware": "nvidia-h100-sxm5-80gb", "graph": graph})
    assert r.status_code == 200, r.text
    assert r.json()["diagnostics"][0]["node"] == "weird"


@pytest.mark.parametrize(("body", "needle"), [
    ({"model": "llama-3-8b", "config": {}}, "exactly one of model, config or graph"),
    ({"model": "no-such-model"}, "unknown model 'no-such-model'"),
    ({"model": "llama-3-70b"}, "needs .* per device"),
    ({"graph": {"nodes": [{"name": "x", "op": {"kind": "matmul", "m": 1}}]}}, "node 'x'.*missing required field"),
])
def test_errors_are_422_naming_the_problem(client: TestClient, body: dict[str, object], needle: str) -> None:
    r = client.post(URL, json={"hardware": "nvidia-h100-sxm5-80gb", **body})
    assert r.status_code == 422
    assert pytest.importorskip("re").search(needle, r.json()["detail"]), r.json()


def test_onnx_upload(client: TestClient) -> None:
    extra = helper.make_node("FancyTopK", ["y"], ["z"], name="/block/fancy", domain="custom.ops")
    data = transformer_block(extra=extra).SerializeToString()
    r = client.post(URL + "/onnx", files={"file": ("block.onnx", data)}, data={"hardware": "nvidia-a100-sxm4-80gb"})
    assert r.status_code == 200, r.text
    assert [d["node"] for d in r.json()["diagnostics"]] == ["/block/fancy"]
    r = client.post(URL + "/onnx", files={"file": ("x.onnx", b"garbage")}, data={"hardware": "nvidia-a100-sxm4-80gb"})
    assert r.status_code == 422 and "not a readable ONNX model" in r.json()["detail"]


def test_onnx_upload_size_limit(tmp_path: Path) -> None:
    with _client(tmp_path, max_upload_bytes=1000) as c:
        data = transformer_block().SerializeToString()
        r = c.post(URL + "/onnx", files={"file": ("block.onnx", data)}, data={"hardware": "nvidia-a100-sxm4-80gb"})
        assert r.status_code == 413


def test_cli_estimate_text_and_json() -> None:
    runner = CliRunner()
    r = runner.invoke(graph_app, ["estimate", "llama-3-70b", "--hardware", "nvidia-h100-sxm5-80gb", "--devices", "8",
                                  "--batch", "8", "--prompt-tokens", "1024", "--compact"])
    assert r.exit_code == 0, r.output
    assert "time to first token" in r.output and "time per output token" in r.output
    r = runner.invoke(graph_app, ["estimate", "llama-3-70b", "--hardware", "nvidia-h100-sxm5-80gb"])
    assert r.exit_code == 2 and "needs" in r.output
    r = runner.invoke(graph_app, ["estimate", "gpt2", "--hardware", "nvidia-a100-sxm4-80gb", "--phase", "decode",
                                  "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["decode"]["llm"]["time_per_output_token_s"] > 0


def test_cli_sweep_stores_results(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    r = CliRunner().invoke(graph_app, ["sweep", "--hardware", "nvidia-h100-sxm5-80gb", "--model", "gpt2",
                                       "--vary", "levels.dram.bandwidth_bytes_per_s=x0.5,x1,x2", "--db", url,
                                       "--name", "bw"])
    assert r.exit_code == 0, r.output
    assert "Pareto front" in r.output and "stored as sweep" in r.output
    (row,) = Store(url).list_sweeps()
    assert row.name == "bw" and len(row.results["rows"]) == 3
