"""POST /api/v1/graphs/estimate/tflite and /stablehlo: the TFLite and StableHLO files the CLI reads, uploaded
(issue 26 item 2 for REST users): the same graph as the importer's, and bad files named in a 422."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from perfmodel.graph.estimate import estimate
from perfmodel.graph.stablehlo_import import import_stablehlo

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("uploads") / "db.sqlite"
    with TestClient(create_app(Settings(database_url=f"sqlite:///{db}"))) as c:
        yield c


def test_an_int8_tflite_upload_estimates(client: TestClient) -> None:
    """microWakeWord's okay_nabu.tflite (pymicro-wakeword 1.0.0, Apache-2.0): its flatbuffer's 24,577 weights."""
    data = (DATA / "tflite" / "okay_nabu.tflite").read_bytes()
    response = client.post("/api/v1/graphs/estimate/tflite", files={"file": ("okay_nabu.tflite", data)},
                           data={"hardware": "nvidia-a100-sxm4-80gb", "detail": "false"})
    assert response.status_code == 200, response.text
    out = response.json()
    assert out["model"] == "okay_nabu" and out["totals"]["params_per_device"] == 24_577
    assert out["diagnostics"] == [] and out["step_time_s"] > 0


def test_stablehlo_text_upload_counts_xlas_flops(client: TestClient) -> None:
    """The JAX MLP lowering of tests/data/stablehlo: the same FLOPs as the importer's, within 0.1 % of XLA's."""
    path = DATA / "stablehlo" / "mlp_bf16.mlir"
    response = client.post("/api/v1/graphs/estimate/stablehlo", files={"file": ("mlp_bf16.mlir", path.read_bytes())},
                           data={"hardware": "nvidia-h100-sxm5-80gb", "fusion": "false", "detail": "false"})
    assert response.status_code == 200, response.text
    flops = response.json()["totals"]["flops"]
    local = estimate(import_stablehlo(path), "nvidia-h100-sxm5-80gb", fusion=False)
    assert flops == pytest.approx(float(local.batch.flops[local.index].sum()))
    xla = json.loads((DATA / "stablehlo" / "golden.json").read_text())["mlp_bf16"]["xla_flops"]
    assert flops == pytest.approx(xla, rel=0.001)


@pytest.mark.parametrize(("kind", "payload", "message"), [
    ("tflite", b"TFL3 truncated", "not a readable TFLite flatbuffer"),
    ("stablehlo", b"\xff\xfe\x00", "must be UTF-8 text"),
    ("stablehlo", b"module {}", "no func.func found"),
])
def test_bad_uploads_are_422s_naming_the_problem(client: TestClient, kind: str, payload: bytes, message: str) -> None:
    response = client.post(f"/api/v1/graphs/estimate/{kind}", files={"file": ("bad", payload)},
                           data={"hardware": "nvidia-h100-sxm5-80gb"})
    assert response.status_code == 422 and message in response.json()["detail"]
