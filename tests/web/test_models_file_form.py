"""The models page's model-file form (issue 26): it renders, its endpoints are the REST upload routes, the byte
limits it states are the server's, and what it sends (file, device, trip counts) estimates the loops."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.routers.graphs import UPLOAD_PATHS
from tests.web.conftest import H100, make_app

STABLEHLO = Path(__file__).resolve().parents[1] / "data" / "stablehlo" / "fori_loop_fp32.mlir"
JS = Path(__file__).resolve().parents[2] / "web" / "static" / "dashboard.js"
PAGE = f"/models?model=gpt2&hardware={H100}&phase=decode"


def _form_attrs(page: str) -> dict[str, str]:
    tag = re.search(r'<form[^>]*id="file-form"[^>]*>', page, re.S)
    assert tag, "no file form on the models page"
    return {k: html.unescape(v) for k, v in re.findall(r'(data-[a-z-]+)="([^"]*)"', tag.group(0))}


def test_models_page_renders_the_file_form(client: TestClient) -> None:
    page = client.get(PAGE)
    assert page.status_code == 200
    text = page.text
    for needle in ('id="model-file" name="file" type="file"', 'id="file-hardware"', 'id="trip-counts"',
                   'id="file-progress"', 'id="file-status" role="status"', 'id="file-result" hidden',
                   'id="file-loops-table"', 'id="file-fallback-table"', 'id="file-ops-table"'):
        assert needle in text, needle
    assert f'<option value="{H100}" selected>' in text.split('id="file-hardware"', 1)[1]  # the page's device
    assert 'id="model-stats"' in text  # the bundled model's estimate is still there


def test_the_form_posts_to_registered_routes_with_the_servers_limits(client: TestClient) -> None:
    attrs = _form_attrs(client.get(PAGE).text)
    schema = client.app.openapi()  # type: ignore[attr-defined]
    posts = {path for path, methods in schema["paths"].items() if "post" in methods}
    endpoints = {k.removeprefix("data-endpoint-"): v for k, v in attrs.items() if k.startswith("data-endpoint-")}
    assert set(endpoints) == {"onnx", "tflite", "stablehlo", "config"}
    assert all(path in posts for path in endpoints.values()), endpoints
    assert endpoints["config"] == "/api/v1/graphs/estimate"
    assert {endpoints[k].removeprefix("/api/v1") for k in ("onnx", "tflite", "stablehlo")} == set(UPLOAD_PATHS)
    settings = client.app.state.perfmodel.settings  # type: ignore[attr-defined]
    assert int(attrs["data-max-upload-bytes"]) == settings.max_upload_bytes
    assert int(attrs["data-max-body-bytes"]) == settings.max_body_bytes
    js = JS.read_text()  # the script picks data-endpoint-<kind> by the file's kind, one of those four
    kinds = re.search(r"function fileKind\(name\) \{(.*?)\n\}", js, re.S)
    assert kinds and set(re.findall(r'"(onnx|tflite|config|stablehlo)"', kinds.group(1))) == set(endpoints)
    assert 'form.dataset["endpoint" + kind[0].toUpperCase() + kind.slice(1)]' in js
    assert "dataset.maxUploadBytes" in js and "dataset.maxBodyBytes" in js


def test_what_the_form_sends_estimates_the_loop_with_the_trip_count(client: TestClient) -> None:
    endpoint = _form_attrs(client.get(PAGE).text)["data-endpoint-stablehlo"]
    r = client.post(endpoint, files={"file": (STABLEHLO.name, STABLEHLO.read_bytes())},
                    data={"hardware": H100, "detail": "false", "trip_counts": "%0=8"})
    assert r.status_code == 200, r.text
    (loop,) = r.json()["loops"]
    assert (loop["loop"], loop["iterations"], loop["trip_count"]) == ("%0", 8, "argument")
    assert {"op_types", "diagnostics", "step_time_s"} <= set(r.json())
    bad = client.post(_form_attrs(client.get(PAGE).text)["data-endpoint-onnx"], files={"file": ("x.onnx", b"junk")},
                      data={"hardware": H100})
    assert bad.status_code == 422 and "not a readable ONNX model" in bad.json()["detail"]


def test_a_config_json_goes_to_the_graph_endpoint(client: TestClient) -> None:
    config = {"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 256, "vocab_size": 1000,
              "n_positions": 512}
    endpoint = _form_attrs(client.get(PAGE).text)["data-endpoint-config"]
    r = client.post(endpoint, content=json.dumps({"hardware": H100, "config": config, "phase": "decode",
                                                  "detail": False}), headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    decode = r.json()["decode"]  # an LLM's answer is per phase: the script shows the one asked for
    assert decode["step_time_s"] > 0 and decode["op_types"] and "loops" not in decode


@pytest.mark.parametrize("kind", ["tflite", "stablehlo"])
def test_file_uploads_take_the_upload_limit_not_the_body_limit(tmp_path: Path, kind: str) -> None:
    """The page states one file limit: the tflite and StableHLO uploads had the (smaller) body limit."""
    with TestClient(make_app(tmp_path, max_body_bytes=4096, max_upload_bytes=64 * 1024)) as c:
        headers = {"Authorization": "Bearer web-test-token"}
        under = c.post(f"/api/v1/graphs/estimate/{kind}", files={"file": ("m", b"\x00" * 20_000)},
                       data={"hardware": H100}, headers=headers)
        assert under.status_code == 422, under.text[:300]  # read and refused as a model, not cut at 4 KiB
        over = c.post(f"/api/v1/graphs/estimate/{kind}", files={"file": ("m", b"\x00" * 70_000)},
                      data={"hardware": H100}, headers=headers)
        assert over.status_code == 413
