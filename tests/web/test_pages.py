"""Every dashboard page over HTTP (TestClient): status, escaping, no CDN, caching, graceful degradation."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient
from job_client import calibrate

from perfmodel.store import RunIn
from tests.web.conftest import A100, H100, TOKEN, XSS, XSS_DEVICE, make_app, seed
from web.templating import script_json

PAGES = ("/", "/hardware", "/hardware?vendor=nvidia&kind=gpu", f"/hardware/{H100}", f"/hardware/{XSS_DEVICE}",
         "/compare", f"/compare?ids={H100}&ids={XSS_DEVICE}&dtype=bf16", "/roofline",
         f"/roofline?hardware={A100}&workload=resnet50-stage2", f"/roofline?hardware={H100}&workload=runs",
         f"/roofline?hardware={H100}&workload=trace&trace=1", "/runs", f"/runs?hardware={H100}", "/runs?trace=1",
         "/upload", "/tiling", "/tiling?hardware=google-tpu-v5e&m=512&n=1024&k=2048&dtype=bf16", "/whatif",
         f"/whatif?hardware={H100}&workload=runs", "/models", f"/models?model=mixtral-8x7b&hardware={A100}&devices=2",
         "/sweeps")
ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"


@pytest.mark.parametrize("path", PAGES)
def test_page_renders_without_cdn(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200, response.text[:2000]
    html = response.text
    assert response.headers["content-type"].startswith("text/html")
    assert "<main id=\"main\"" in html and "Skip to main content" in html
    for url in re.findall(r"""(?:src|href)=["']([^"']+)["']""", html):
        assert not url.startswith(("http:", "https:", "//")), url
    assert not re.search(r"(https?:)?//[\w.-]*(cdn|plot\.ly|unpkg|jsdelivr|googleapis)", html, re.I)
    assert "<img" not in html  # no page draws images; a markup name must never become one


def test_plotly_served_from_the_installed_package(client: TestClient) -> None:
    response = client.get("/static/plotly.min.js")
    assert response.status_code == 200
    assert "javascript" in response.headers["content-type"]
    assert len(response.content) > 1_000_000 and b"plotly" in response.content[:2000].lower()
    assert client.get("/static/dashboard.js").status_code == 200
    assert client.get("/static/style.css").status_code == 200


def test_pages_are_not_in_the_openapi_schema(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert paths and all(p.startswith("/api/") for p in paths)


@pytest.mark.parametrize("path", ["/runs", f"/runs?hardware={H100}", "/upload", "/hardware", f"/hardware/{XSS_DEVICE}",
                                  f"/roofline?hardware={H100}&workload=runs", f"/compare?ids={XSS_DEVICE}"])
def test_markup_in_user_strings_is_escaped(client: TestClient, path: str) -> None:
    html = client.get(path).text
    assert ESCAPED in html or "\\u003cimg src=x onerror=alert(1)\\u003e" in html or "&amp;lt;img" in html
    assert XSS not in html


def test_figure_json_cannot_close_its_script_block() -> None:
    text = str(script_json({"name": "</script><script>alert(1)</script>", "x": [1.0, float("nan")]}))
    assert "</script>" not in text and "<" not in text
    assert orjson.loads(text) == {"name": "</script><script>alert(1)</script>", "x": [1.0, None]}


def test_plotly_labels_get_markup_as_entities(client: TestClient) -> None:
    html = client.get(f"/runs?hardware={H100}").text
    blob = re.search(r'id="runs-scatter-json">(.*?)</script>', html, re.S)
    assert blob is not None
    figure = orjson.loads(blob.group(1))
    assert XSS not in orjson.dumps(figure).decode()  # run names stay out of the scatter (hover: run id, error)
    assert ESCAPED in html.split('id="kernel-table"')[1]  # ... and are escaped in the kernel table
    roofline = client.get(f"/roofline?hardware={H100}&workload=trace&trace=1").text
    blob = re.search(r'id="roofline-chart-json">(.*?)</script>', roofline, re.S)
    assert blob is not None
    hover = " ".join(t for trace in orjson.loads(blob.group(1))["data"] for t in (trace.get("hovertext") or []))
    assert ESCAPED in hover and XSS not in hover
    axes = figure["layout"]
    assert axes["xaxis"]["type"] == "log" and axes["yaxis"]["type"] == "log"


def test_roofline_axes_follow_the_convention(client: TestClient) -> None:
    html = client.get(f"/roofline?hardware={H100}").text
    figure = orjson.loads(re.search(r'id="roofline-chart-json">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    layout = figure["layout"]
    assert layout["xaxis"]["title"]["text"] == "Arithmetic intensity [FLOP/byte]"
    assert layout["yaxis"]["title"]["text"] == "Performance [FLOP/s]"
    names = [t.get("name", "") for t in figure["data"]]
    assert any("HBM3" in n for n in names) and any("bf16 tensor" in n for n in names)
    assert any(n.endswith("· predicted") for n in names)


def test_runs_page_numbers(client: TestClient) -> None:
    html = client.get(f"/runs?hardware={A100}").text
    assert 'id="runs-count">10<' in html  # the ten A100 runs, all predictable
    assert "matmul" in html and "rmsnorm" in html and "softmax" in html
    trace = client.get("/runs?trace=1").text
    assert 'id="unmodelled">16.7 %' in trace  # 2e-5 s of 1.2e-4 s of kernel time matched no op


def test_runs_page_uses_webgl_above_the_threshold(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from web import runs_view

    monkeypatch.setattr(runs_view, "GL_THRESHOLD", 5)
    html = client.get(f"/runs?hardware={H100}&source=web-test").text
    assert '"type":"scattergl"' in html


def test_runs_view_is_cached_until_the_data_changes(client: TestClient) -> None:
    cache = client.app.state.dashboard_cache  # type: ignore[attr-defined]
    client.get(f"/runs?hardware={A100}")
    hits, misses = cache.hits, cache.misses
    client.get(f"/runs?hardware={A100}")
    assert cache.hits > hits and cache.misses == misses
    store = client.app.state.perfmodel.store  # type: ignore[attr-defined]
    store.add_run(RunIn(hardware_id=A100, op={"kind": "rmsnorm", "shape": [8, 4096], "dtype": "bf16"},
                        measured_time_s=4e-6, source="web-test"))
    assert 'id="runs-count">11<' in client.get(f"/runs?hardware={A100}").text
    assert cache.misses > misses


def test_calibrations_show_or_explain(client: TestClient) -> None:
    """Each calibration's per-class table; one this version cannot read: a message, never a 500."""
    fitted = calibrate(client, {"hardware": A100, "notes": "dashboard test"}, {"Authorization": f"Bearer {TOKEN}"})
    html = client.get(f"/runs?hardware={A100}").text
    assert f"Calibration {fitted['id']}" in html and "dashboard test" in html
    assert html.count('class="data calibration"') == 1
    store = client.app.state.perfmodel.store  # type: ignore[attr-defined]
    store.add_calibration(A100, {"format": "not one this version reads"}, {}, notes="foreign")
    response = client.get(f"/runs?hardware={A100}")
    assert response.status_code == 200
    assert "Calibrated errors are not available yet" in response.text


def test_bad_input_is_a_message_not_a_500(client: TestClient) -> None:
    assert client.get("/hardware/no-such-device").status_code == 404
    assert client.get("/roofline?hardware=no-such-device").status_code == 404
    bad = client.get("/tiling?op=%7Bnot%20json")
    assert bad.status_code == 422 and 'role="alert"' in bad.text
    wrong = client.get('/tiling?op={"kind":"matmul","m":-1,"n":1,"k":1,"dtype":"bf16"}')
    assert wrong.status_code == 422
    pasted = client.get('/roofline?workload=custom&ops=[{"kind":"nope"}]')
    assert pasted.status_code == 200 and "nope" in pasted.text
    assert client.get("/runs?trace=abc").status_code == 200


def test_whatif_endpoint_changes_the_time(client: TestClient) -> None:
    base = client.post("/ui/api/whatif", json={"hardware": H100, "workload": "llama3-8b-decode", "factors": {}})
    faster = client.post("/ui/api/whatif", json={"hardware": H100, "workload": "llama3-8b-decode",
                                                 "factors": {"hbm": 2.0}})
    assert base.status_code == faster.status_code == 200
    b, f = base.json(), faster.json()
    assert f["overrides"] == {"levels.dram.bandwidth_bytes_per_s": "x2"}
    assert b["variant_total_s"] == pytest.approx(b["base_total_s"])
    assert f["variant_total_s"] < 0.8 * f["base_total_s"]  # decode is HBM-bound
    assert len(f["rows"]) == 9
    assert client.post("/ui/api/whatif", json={"hardware": "nope"}).status_code == 404
    assert client.post("/ui/api/whatif", json={"hardware": H100, "factors": {"hbm": "fast"}}).status_code == 422
    assert client.post("/ui/api/whatif", json={"hardware": H100, "factors": []}).status_code == 422


def test_reads_need_the_token_when_configured(tmp_path: Path) -> None:
    app = make_app(tmp_path, read_requires_token=True)
    with TestClient(app) as c:
        seed(app.state.perfmodel.store)
        assert c.get("/runs").status_code == 401
        assert c.get(f"/roofline?hardware={H100}&workload=runs").status_code == 401
        assert c.get("/").status_code == 200 and "Measured runs" not in c.get("/").text
        c.cookies.set("perfmodel_token", TOKEN)
        assert c.get("/runs").status_code == 200
        c.cookies.set("perfmodel_token", "wrong")
        assert c.get("/runs").status_code == 401


def test_best_sixteen_bit_peak_is_one_number_on_the_pages_and_in_the_cli(client: TestClient) -> None:
    """MI100: fp16 184.6, bf16 92.3 TFLOP/s. The catalog and device page said 'Peak bf16/fp16' 92.3 while
    `perfmodel hardware list` said 'best 16-bit matrix' 185: both now show the larger, under one name."""
    from typer.testing import CliRunner

    from perfmodel.cli import app
    from perfmodel.specs import load_hardware
    from perfmodel.units import format_rate

    best = load_hardware("amd-mi100").best_sixteen_bit_flops_per_s()
    assert best == pytest.approx(184.6e12)
    shown = format_rate(best, "FLOP/s")
    listed = CliRunner().invoke(app, ["hardware", "list"]).output
    assert any(line.startswith("amd-mi100 ") and shown in line for line in listed.splitlines())
    for path in ("/hardware", "/hardware/amd-mi100"):
        html = client.get(path).text
        assert "Best 16-bit matrix" in html and "Peak bf16/fp16" not in html
    device = client.get("/hardware/amd-mi100").text
    assert shown in device.split("Best 16-bit matrix", 1)[1][:200]


def test_roofline_workload_time_is_the_models_and_measured_is_apart() -> None:
    """'Workload time (model)' showed the measured total where ops had measurements (issue 25): it is the
    model's time of every op; the measured total stands beside it."""
    from perfmodel.ops import make_op
    from perfmodel.roofline import predict_many
    from perfmodel.specs import load_hardware
    from web.explorer import explorer
    from web.workloads import Workload

    hw = load_hardware("nvidia-a100-sxm4-80gb")
    op = {"kind": "matmul", "m": 2048, "n": 2048, "k": 2048, "dtype": "bf16"}
    predicted_s = float(predict_many(hw, [make_op(op)]).time_s[0])
    work = Workload("one GEMM measured 3x slower")
    work.add("gemm", op, count=2, measured_s=3 * predicted_s)
    view = explorer(hw, work)
    assert view.predicted_total_s == pytest.approx(2 * predicted_s)
    assert view.measured_total_s == pytest.approx(6 * predicted_s)


def test_head_of_the_home_page_answers_like_get(client: TestClient) -> None:
    """Uptime checks and `curl -I` send HEAD; the home page answers it (no 405)."""
    response = client.head("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.content == b""
