"""The whole-model page (/models) and the stored sweeps (/sweeps, /sweeps/{id}) over HTTP (TestClient)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from perfmodel.graph import Graph, LlmWorkload, Parallelism, estimate
from perfmodel.graph.loader import estimate_model
from perfmodel.graph.sweep import SweepSpec, run_sweep
from perfmodel.units import format_time_s
from tests.web.conftest import H100, TOKEN, XSS, make_app
from web.models_view import ModelQuery, build_view
from web.templating import templates

ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"
SPEC = {"base": H100, "axes": {"levels.dram.bandwidth_bytes_per_s": ["x0.5", "x1", "x2"],
                               "engines.*.peak_flops_per_s": ["x1", "x2"], "devices": [1, 2]},
        "workloads": [{"model": "gpt2", "phase": "decode", "batch": 8, "kv_len": 1024},
                      {"model": "llama-3-8b", "phase": "prefill", "batch": 1, "prompt_tokens": 256}]}


def figure(html: str, chart_id: str) -> dict[str, Any]:
    found = re.search(rf'id="{chart_id}-json">(.*?)</script>', html, re.S)
    assert found is not None, f"no {chart_id} figure"
    data: dict[str, Any] = orjson.loads(found.group(1))
    return data


def text_of(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)<', html, re.S)
    assert found is not None, element_id
    return found.group(1).strip()


def no_cdn(html: str) -> None:
    for url in re.findall(r"""(?:src|href)=["']([^"']+)["']""", html):
        assert not url.startswith(("http:", "https:", "//")), url
    assert "<img" not in html


@pytest.fixture(scope="module")
def sweep(client: TestClient) -> tuple[int, dict[str, Any]]:
    """A tiny real sweep (12 variants × 2 workloads) stored under a name that is markup."""
    results = run_sweep(SweepSpec.from_json(SPEC))
    store = client.app.state.perfmodel.store  # type: ignore[attr-defined]
    return store.add_sweep(XSS, SweepSpec.from_json(SPEC).to_json(), results), results


# ---- /models ----------------------------------------------------------------------------------------------------

def test_models_page_shows_the_estimate(client: TestClient) -> None:
    response = client.get(f"/models?model=llama-3-8b&hardware={H100}&batch=8&prompt_tokens=2048&phase=decode")
    assert response.status_code == 200, response.text[:2000]
    html = response.text
    no_cdn(html)
    assert 'href="/models" aria-current="page"' in html and 'href="/sweeps"' in html  # in the nav
    workload = LlmWorkload(batch=8, prompt_tokens=2048, kv_len=2049)
    expected = estimate_model("llama-3-8b", H100, workload, Parallelism(), "both", detail=False)
    decode, prefill = expected["decode"], expected["prefill"]
    assert text_of(html, "step-time") == format_time_s(decode["step_time_s"])
    assert text_of(html, "tpot") == format_time_s(decode["llm"]["time_per_output_token_s"])
    assert text_of(html, "ttft") == format_time_s(prefill["llm"]["time_to_first_token_s"])
    assert text_of(html, "tokens-per-s") == f"{decode['llm']['tokens_per_s']:,.0f}"
    assert text_of(html, "bottleneck") == decode["bottleneck"]["summary"].replace("'", "&#39;")
    assert html.count("<tr><th scope=\"row\" class=\"name\"><span class=\"swatch\"") == len(decode["op_types"])
    assert 'id="memory-table"' in html and "Weights" in html and "KV cache" in html
    assert 'id="no-diagnostics"' in html  # a bundled config is fully modelled


def test_models_figures_follow_the_estimate(client: TestClient) -> None:
    html = client.get(f"/models?model=gpt2&hardware={H100}&batch=4&prompt_tokens=512&phase=prefill").text
    detail = estimate_model("gpt2", H100, LlmWorkload(batch=4, prompt_tokens=512), Parallelism(), "prefill")["prefill"]
    ops, layers = detail["ops"], {r["layer"] for r in detail["ops"]}
    sunburst = figure(html, "model-breakdown")["data"][0]
    assert sunburst["type"] == "sunburst" and sunburst["branchvalues"] == "remainder"
    assert len(sunburst["ids"]) == 1 + len(layers) + len(ops) == len(set(sunburst["ids"]))
    assert sum(sunburst["values"]) == pytest.approx(sum(r["time_s"] for r in ops))
    timeline = figure(html, "model-timeline")
    bars = [t for t in timeline["data"] if t["type"] == "bar"]
    assert sum(len(t["base"]) for t in bars) == len(ops)
    assert all(t["orientation"] == "h" for t in bars) and timeline["layout"]["barmode"] == "overlay"
    ends = [b + x for t in bars for b, x in zip(t["base"], t["x"], strict=True)]
    assert max(ends) == pytest.approx(detail["step_time_s"])
    treemap = figure(client.get(f"/models?model=gpt2&hardware={H100}&chart=treemap").text, "model-breakdown")
    assert treemap["data"][0]["type"] == "treemap"


def test_models_timeline_has_a_lane_per_stage_and_stream(client: TestClient) -> None:
    html = client.get(f"/models?model=llama-3-8b&hardware={H100}&devices=4&tp=2&pp=2&phase=decode").text
    lanes = {y for t in figure(html, "model-timeline")["data"] for y in t["y"]}
    assert lanes == {"stage 0 · compute", "stage 0 · comm (blocking)", "stage 1 · compute",
                     "stage 1 · comm (blocking)"}
    assert "Pipeline bubble" in html and "TP 2 · PP 2 · DP 1" in html


@pytest.mark.parametrize(("query", "status", "reason"), [
    ("batch=abc", 422, "batch: expected a whole number"),
    ("batch=0", 422, "batch: expected a whole number"),
    ("devices=-1", 422, "devices: expected a whole number"),
    ("model=no-such-model", 422, "model: &#39;no-such-model&#39; is not one of"),
    ("phase=train", 422, "phase: &#39;train&#39; is not one of"),
    ("dtype=int3", 422, "dtype: &#39;int3&#39; is not one of"),
    ("devices=3&tp=2", 422, "does not make 3 devices"),
    ("model=llama-3-70b&devices=1", 422, "GB per device"),  # does not fit: the reason, not a 500
    ("hardware=no-such-device", 404, "unknown hardware"),
])
def test_models_bad_input_is_a_page_with_the_reason(client: TestClient, query: str, status: int, reason: str) -> None:
    response = client.get(f"/models?{query}")
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    alert = re.search(r'<p class="notice error" role="alert" id="model-error">(.*?)</p>', response.text, re.S)
    assert alert is not None and reason in alert.group(1), response.text[-3000:]
    assert '<form class="filters compact"' in response.text  # the form is still there to fix it


def test_models_markup_in_the_query_is_escaped(client: TestClient) -> None:
    response = client.get("/models", params={"model": XSS, "hardware": XSS})
    assert response.status_code == 404 and XSS not in response.text and ESCAPED in response.text
    response = client.get("/models", params={"batch": XSS})
    assert response.status_code == 422 and XSS not in response.text


def test_models_view_is_cached_by_its_inputs(client: TestClient) -> None:
    cache = client.app.state.dashboard_cache  # type: ignore[attr-defined]
    path = f"/models?model=gpt2&hardware={H100}&batch=3&phase=decode"
    client.get(path)
    hits, misses = cache.hits, cache.misses
    assert client.get(path).status_code == 200
    assert cache.hits == hits + 1 and cache.misses == misses
    client.get(path.replace("batch=3", "batch=5"))
    assert cache.misses == misses + 1


def test_unmodelled_ops_are_listed_with_reason_and_fallback() -> None:
    """Imported graphs may hold ops the model does not cover: the page lists each with its fallback."""
    graph = Graph.from_json({"name": "imported", "tensors": [], "nodes": [
        {"name": "proj", "op": {"kind": "matmul", "m": 512, "n": 4096, "k": 4096, "dtype": "bf16"},
         "layer": "block0", "source_op": "MatMul"},
        {"name": XSS, "op": None, "layer": "block0", "source_op": "FancyOp", "unsupported": f"no model for {XSS}",
         "fallback": {"kind": "elementwise", "shape": [512, 4096], "dtype": "bf16", "inputs": 1,
                      "flops_per_element": 0.0}}]})
    data = estimate(graph, H100).to_json(detail=True)
    view = build_view(ModelQuery(), data, {"tp": 1, "pp": 1, "dp": 1, "devices": 1})
    assert set(view.figures) == {"breakdown", "timeline"}
    html = templates.env.get_template("models.html").render(
        view=view, nav="/models", devices=[], hardware=H100, form={}, models=[], phases=(), charts=(), dtypes=(),
        weight_dtypes=(), hw=type("Hw", (), {"id": H100})(),
        file_form={"endpoints": dict.fromkeys(("onnx", "tflite", "stablehlo", "config"), "/api/v1/graphs/estimate"),
                   "max_upload_bytes": 1, "max_body_bytes": 1})
    table = re.search(r'id="diagnostics-table">(.*?)</table>', html, re.S)
    assert table is not None
    assert "FancyOp" in table.group(1) and f"no model for {ESCAPED}" in table.group(1)
    assert "elementwise" in table.group(1) and format_time_s(data["diagnostics"][0]["fallback_time_s"]) in html
    assert XSS not in html and "1 ops are not modelled" in html
    hover = " ".join(t for trace in orjson.loads(str(view.figures["timeline"]))["data"] for t in trace["hovertext"])
    assert ESCAPED in hover and XSS not in hover


# ---- /sweeps ----------------------------------------------------------------------------------------------------

def test_empty_sweep_list_explains_how_to_run_one(tmp_path: Path) -> None:
    with TestClient(make_app(tmp_path)) as fresh:
        response = fresh.get("/sweeps")
        assert response.status_code == 200
        assert 'id="no-sweeps"' in response.text and "perfmodel sweep --hardware" in response.text
        assert "--vary" in response.text and "--name" in response.text and "--no-store" in response.text
        no_cdn(response.text)


def test_sweep_list_and_page(client: TestClient, sweep: tuple[int, dict[str, Any]]) -> None:
    sweep_id, results = sweep
    listing = client.get("/sweeps")
    assert listing.status_code == 200 and 'id="no-sweeps"' not in listing.text
    assert f'<a href="/sweeps/{sweep_id}">{ESCAPED}</a>' in listing.text and XSS not in listing.text
    row = re.search(rf'<a href="/sweeps/{sweep_id}">.*?</tr>', listing.text, re.S)
    assert row is not None
    assert f">{results['variants']}<" in row.group(0) and f">{len(results['rows'])}<" in row.group(0)
    page = client.get(f"/sweeps/{sweep_id}")
    assert page.status_code == 200
    html = page.text
    no_cdn(html)
    assert f'id="sweep-name">{ESCAPED}<' in html and XSS not in html
    assert 'href="/sweeps" aria-current="page"' in html
    assert text_of(html, "sweep-estimates") == str(len(results["rows"]))
    front = sorted({i for idx in results["pareto"].values() for i in idx})
    assert text_of(html, "sweep-pareto") == str(len(front))
    assert html.count('<tr class="pareto">') == len(front)
    assert html.count("<tr") - 1 == len(results["rows"])  # every row in the table, plus the heading
    fig = figure(html, "sweep-pareto-chart")
    for label, idx in results["pareto"].items():
        trace = next(t for t in fig["data"] if t["name"] == f"{label} · Pareto front")
        expected = sorted((results["rows"][i]["cost_proxy"], results["rows"][i]["time_s"]) for i in idx)
        assert trace["x"] == pytest.approx([x for x, _ in expected])
        assert trace["y"] == pytest.approx([y for _, y in expected])
        assert trace["line"]["shape"] == "hv"
        assert any("levels.dram.bandwidth_bytes_per_s = x" in h for h in trace["hovertext"])  # the overrides


def test_sweep_page_is_cached(client: TestClient, sweep: tuple[int, dict[str, Any]]) -> None:
    cache = client.app.state.dashboard_cache  # type: ignore[attr-defined]
    client.get(f"/sweeps/{sweep[0]}")
    hits, misses = cache.hits, cache.misses
    client.get(f"/sweeps/{sweep[0]}")
    assert cache.hits == hits + 1 and cache.misses == misses


def test_sweep_markup_in_rows_is_escaped_and_bad_rows_are_skipped(client: TestClient) -> None:
    store = client.app.state.perfmodel.store  # type: ignore[attr-defined]
    rows = [{"variant": 0, "label": XSS, "overrides": {XSS: XSS}, "time_s": 1e-3, "cost_proxy": 1.0, "fits": True},
            {"variant": 1, "label": XSS, "overrides": {XSS: "x2"}, "time_s": 2e-3, "cost_proxy": 2.0, "fits": True},
            {"variant": 2, "label": XSS, "overrides": {}, "time_s": "slow", "cost_proxy": 2.0},
            "not a row"]
    sweep_id = store.add_sweep("hand-made", {"base": XSS, "axes": {XSS: [XSS]}}, {"rows": rows})
    html = client.get(f"/sweeps/{sweep_id}").text
    assert XSS not in html and ESCAPED in html
    assert "2 stored rows have no finite time or cost proxy" in html
    fig = figure(html, "sweep-pareto-chart")
    hover = " ".join(h for t in fig["data"] for h in t.get("hovertext") or [])
    assert ESCAPED in hover and XSS not in hover
    # no stored front: computed here; variant 1 is slower and dearer than variant 0
    front = next(t for t in fig["data"] if t["name"].endswith("· Pareto front"))
    assert front["x"] == [1.0] and front["y"] == [1e-3]


def test_sweep_with_no_rows_or_odd_results_is_a_page(client: TestClient) -> None:
    store = client.app.state.perfmodel.store  # type: ignore[attr-defined]
    for results in ({}, {"rows": "nope", "pareto": [1, 2], "variants": True}, {"rows": [], "pareto": {"a": [7]}}):
        sweep_id = store.add_sweep("odd", {"workloads": "x"}, results)
        response = client.get(f"/sweeps/{sweep_id}")
        assert response.status_code == 200 and "this sweep stored no rows to draw" in response.text
    assert client.get("/sweeps").status_code == 200


@pytest.mark.parametrize("path", ["/sweeps/999999", "/sweeps/abc", "/sweeps/-1"])
def test_missing_sweep_is_a_404_page(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404 and 'role="alert"' in response.text and "There is no sweep" in response.text


def test_sweep_list_pages(client: TestClient) -> None:
    assert client.get("/sweeps?offset=100000").status_code == 200
    assert "No sweeps this far back" in client.get("/sweeps?offset=100000").text
    assert client.get("/sweeps?offset=abc").status_code == 200


def test_sweeps_need_the_token_when_reads_do(tmp_path: Path) -> None:
    app = make_app(tmp_path, read_requires_token=True)
    with TestClient(app) as c:
        sweep_id = app.state.perfmodel.store.add_sweep("s", {}, {"rows": []})
        assert c.get("/sweeps").status_code == 401
        assert c.get(f"/sweeps/{sweep_id}").status_code == 401
        assert c.get("/models?model=gpt2").status_code == 200  # bundled configs: no stored data
        c.cookies.set("perfmodel_token", TOKEN)
        assert c.get("/sweeps").status_code == 200 and c.get(f"/sweeps/{sweep_id}").status_code == 200
