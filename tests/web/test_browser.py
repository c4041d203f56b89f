"""The dashboard in a real headless browser: Playwright driving Debian's Chromium (/usr/bin/chromium) against
the app under uvicorn. One browser per session; each test gets a fresh page that records console errors,
uncaught exceptions, dialogs and any request leaving the machine."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.web.conftest import A100, H100, TOKEN, XSS, XSS_DEVICE, real_traces, seed
from web.testing import live_server

playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
CHROMIUM = Path("/usr/bin/chromium")
# CI (.ci/run installs Debian's Chromium) must run these: there a missing browser fails instead of skipping
pytestmark = pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("CI"),
                                reason="apt-get install chromium (Debian's build)")

PAGES = ("/", "/hardware", f"/hardware/{H100}", f"/compare?ids={H100}&ids=amd-mi300x", "/roofline",
         f"/roofline?hardware={H100}&workload=trace&trace=1", f"/runs?hardware={H100}", "/upload",
         "/tiling", "/whatif", "/sweeps")


@dataclass
class Watched:
    page: Any
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, FastAPI]]:
    with live_server(tmp_path_factory.mktemp("browser"), TOKEN) as (base, app):
        seed(app.state.perfmodel.store)
        yield base, app


@pytest.fixture(scope="session")
def server(live: tuple[str, FastAPI]) -> str:
    return live[0]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM),
                                     args=["--enable-unsafe-swiftshader", "--use-angle=swiftshader"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def context(browser: Any) -> Iterator[Any]:
    """One context for the session, so plotly.js comes from the HTTP cache after the first page."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    yield ctx
    ctx.close()


@pytest.fixture
def watched(context: Any, server: str) -> Iterator[Watched]:
    page = context.new_page()
    context.clear_cookies()  # the token cookie; sessionStorage is per page already
    w = Watched(page)
    page.on("console", lambda m: w.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: w.errors.append(f"exception: {e}"))

    def dialog(d: Any) -> None:
        w.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", dialog)

    def request(r: Any) -> None:
        if not r.url.startswith((server, "data:", "blob:")):
            w.external.append(r.url)

    page.on("request", request)
    yield w
    page.close()


def charts_rendered(page: Any) -> None:
    page.wait_for_function("() => Array.from(document.querySelectorAll('.chart[data-figure]'))"
                           ".every(d => d.dataset.rendered === 'true')", timeout=20_000)


@pytest.mark.parametrize("path", PAGES)
def test_page_loads_clean_and_charts_render(watched: Watched, server: str, path: str) -> None:
    page = watched.page
    page.goto(server + path)
    charts_rendered(page)
    charts = page.locator(".chart[data-figure]")
    for i in range(charts.count()):
        chart = charts.nth(i)
        assert chart.locator(".main-svg").count() >= 1  # plotly drew it
        titles = chart.locator(".xtitle, .ytitle").all_text_contents()
        assert len(titles) >= 2 and all(t.strip() for t in titles), titles
    assert watched.errors == [] and watched.dialogs == [] and watched.external == []


def test_roofline_chart_axes_and_points(watched: Watched, server: str) -> None:
    page = watched.page
    page.goto(f"{server}/roofline?hardware={H100}&workload=llama3-8b-prefill")
    charts_rendered(page)
    assert page.locator("#roofline-chart .xtitle").text_content() == "Arithmetic intensity [FLOP/byte]"
    assert page.locator("#roofline-chart .ytitle").text_content() == "Performance [FLOP/s]"
    assert page.locator("#roofline-chart .xaxislayer-above .xtick").count() >= 4
    assert page.locator("#roofline-chart .scatterlayer .point").count() >= 9  # 9 ops at 2+ levels
    assert page.locator("#ops-table tbody tr").count() == 9


def test_runs_scatter_uses_webgl_for_many_points(watched: Watched, server: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from web import runs_view

    monkeypatch.setattr(runs_view, "GL_THRESHOLD", 3)  # the server runs in this process
    page = watched.page
    page.goto(f"{server}/runs?hardware={A100}&source=web-test")
    charts_rendered(page)
    assert '"type":"scattergl"' in page.content()
    # drawn: on WebGL canvases, or (a browser without WebGL, e.g. a loaded headless one) as SVG points,
    # never plotly's "WebGL is not supported" box
    assert page.locator("#runs-scatter .no-webgl").count() == 0
    if page.locator("#runs-scatter").get_attribute("data-webgl") == "missing":
        assert page.locator("#runs-scatter .scatterlayer .point").count() >= 3
    else:
        assert page.locator("#runs-scatter canvas").count() >= 1
    assert watched.errors == []


def test_markup_names_render_as_text(watched: Watched, server: str) -> None:
    page = watched.page
    for path in (f"/runs?hardware={H100}", "/upload", f"/hardware/{XSS_DEVICE}", "/hardware",
                 f"/roofline?hardware={H100}&workload=runs", f"/roofline?hardware={H100}&workload=trace&trace=1",
                 f"/whatif?hardware={H100}&workload=trace&trace=1"):  # stored runs: one name per distinct op
        page.goto(server + path)
        charts_rendered(page)
        assert page.get_by_text(XSS, exact=False).count() >= 1, path  # shown, as text
        assert page.locator("img").count() == 0, path
        if page.locator("#runs-scatter").count():  # hover a point: plotly's label shows the name as text
            box = page.locator("#runs-scatter .nsewdrag").first.bounding_box()
            assert box is not None
            for fx in range(5, 100, 10):
                page.mouse.move(box["x"] + box["width"] * fx / 100, box["y"] + box["height"] * (100 - fx) / 100)
            assert page.locator("img").count() == 0
    assert watched.dialogs == [] and watched.errors == []


def test_whatif_slider_changes_the_number(watched: Watched, server: str) -> None:
    page = watched.page
    page.goto(f"{server}/whatif?hardware={H100}&workload=llama3-8b-decode")
    page.wait_for_function("() => document.getElementById('whatif-chart').dataset.rendered === 'true'")
    before = page.locator("#variant-total").text_content()
    assert before == page.locator("#base-total").text_content()
    slider = page.locator("#knob-hbm")
    slider.focus()
    page.keyboard.press("End")  # keyboard only: ×10 HBM bandwidth
    page.wait_for_function(f"() => document.getElementById('variant-total').textContent !== {before!r}")
    assert page.locator("#knob-hbm-value").text_content() == "×10.00"
    speedup = float((page.locator("#speedup").text_content() or "×0").lstrip("×"))
    assert speedup > 1.5  # decode is HBM-bound
    assert watched.errors == []


def test_whatif_variant_saved_with_the_token(watched: Watched, server: str) -> None:
    page = watched.page
    page.goto(f"{server}/whatif?hardware={H100}")
    page.wait_for_function("() => document.getElementById('whatif-chart').dataset.rendered === 'true'")
    page.locator("#knob-sram").fill("0.3")
    page.wait_for_function("() => document.getElementById('speedup').textContent !== '×1.00' || "
                           "document.getElementById('whatif-status').textContent.includes('overrides')")
    page.locator("#variant-id").fill("h100-browser-test")
    page.locator("#save-variant button").click()
    page.wait_for_function("() => document.getElementById('save-status').textContent.length > 0")
    assert "token" in (page.locator("#save-status").text_content() or "")  # no token yet: refused
    _save_token(page)
    page.locator("#save-variant button").click()
    page.wait_for_function("() => document.getElementById('save-status').textContent.startsWith('Saved')")
    spec = httpx.get(f"{server}/api/v1/hardware/h100-browser-test").json()["spec"]
    assert spec["derived_from"] == H100 and "levels.sram.capacity_bytes" in spec["overrides"]
    assert [e for e in watched.errors if "401" not in e] == []  # the refused attempt logs its 401


def test_keyboard_skip_link_and_focus(watched: Watched, server: str) -> None:
    page = watched.page
    page.goto(f"{server}/hardware")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    page.keyboard.press("Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"


def _save_token(page: Any) -> None:
    page.locator("#token-input").fill(TOKEN)
    page.locator("#token-form button[type=submit]").click()


def _upload(page: Any, server: str, trace: Path) -> None:
    """Save the token on the upload page, choose the A100, and send ``trace``."""
    page.goto(f"{server}/upload")
    _save_token(page)
    page.locator("#upload-hardware").select_option(A100)
    page.locator("#trace-file").set_input_files(str(trace))
    page.locator("#upload-button").click()


def test_upload_flow_end_to_end(watched: Watched, server: str) -> None:
    traces = real_traces()
    assert traces, "no Kineto trace in tests/data/traces or ../shared/data/traces/pytorch_kineto"
    trace = min(traces, key=lambda p: p.stat().st_size)
    page = watched.page
    _upload(page, server, trace)
    page.wait_for_selector("#upload-result:not([hidden])", timeout=60_000)
    assert page.locator("#result-summary dd").count() >= 5
    assert "Matched by source" in page.locator("#result-summary").inner_text()  # the summary's shares by source
    assert page.locator("#upload-progress").get_attribute("value") == "100"
    page.wait_for_selector("#recent-uploads #uploads-table")  # the list shows the new upload without a reload
    assert trace.name in page.locator("#uploads-table").inner_text()
    page.locator("#link-runs").click()
    page.wait_for_load_state()
    assert page.url.startswith(f"{server}/runs?hardware={A100}&trace=")
    page.goto(page.url.replace("/runs?", "/roofline?workload=trace&"))
    charts_rendered(page)
    assert watched.errors == [] and watched.dialogs == []


def test_upload_then_fit_a_calibration_on_its_runs(watched: Watched, server: str) -> None:
    trace = Path(__file__).resolve().parents[1] / "data" / "traces" / "host_cpu_conv_train.pt.trace.json.gz"
    page = watched.page
    _upload(page, server, trace)
    page.wait_for_selector("#calibrate-button", timeout=60_000)
    assert page.locator("#calibrate-button").inner_text().startswith("Fit a calibration on its ")
    page.locator("#calibrate-button").click()
    # the job's progress, polled while the page stays usable: the bar and the stage, then the report
    page.wait_for_selector("#calibrate-progress:not([hidden])", timeout=30_000)
    page.wait_for_function("() => document.getElementById('calibrate-status').textContent.startsWith('Fitting: ')",
                           timeout=60_000)
    assert page.locator("#calibrate-button").is_disabled() and page.locator("#calibrate-cancel").is_visible()
    page.wait_for_selector("#link-calibrated", timeout=120_000)
    assert "stored: the latest of " + A100 in page.locator("#calibrate-status").inner_text()
    assert page.locator("#calibrate-progress").is_hidden() and not page.locator("#calibrate-button").is_disabled()
    assert page.locator("#calibration-result-table tbody tr").count() >= 1
    assert page.locator("#calibration-trees").inner_text().startswith("Residual trees over the fitted classes: ")
    page.locator("#link-calibrated").click()
    page.wait_for_load_state()
    assert page.locator("table.calibration").count() >= 1  # the runs page lists the new calibration
    assert watched.errors == [] and watched.dialogs == []


def test_runs_page_fits_a_calibration_on_the_runs_it_shows(watched: Watched, live: tuple[str, FastAPI]) -> None:
    server, app = live
    page = watched.page
    page.goto(f"{server}/runs?hardware={H100}&op_kind=matmul")
    _save_token(page)
    button = page.locator("#fit-calibration #calibrate-button")
    assert button.inner_text().startswith("Fit a calibration on these ")
    # the one fit slot is held by another job: this one waits in the queue, is cancelled there, says so
    store, pool = app.state.perfmodel.store, app.state.perfmodel.jobs
    blocker = store.add_job("calibration", {"hardware": H100}, pool.owner)
    assert store.claim_job(blocker, pool.owner, pool.workers)
    button.click()
    page.wait_for_function("() => document.getElementById('calibrate-status').textContent.startsWith('Queued (job ')",
                           timeout=30_000)
    page.locator("#calibrate-cancel").click()
    page.wait_for_function("() => / cancelled/.test(document.getElementById('calibrate-status').textContent)",
                           timeout=60_000)
    assert page.locator("#link-calibrated").count() == 0 and not button.is_disabled()
    assert store.finish_job(blocker, "failed", "the test's slot holder")
    button.click()
    page.wait_for_selector("#link-calibrated", timeout=120_000)
    classes = page.locator("#calibration-result-table tbody th").all_inner_texts()
    assert classes and all(c.startswith("gemm") for c in classes)  # only the matmul runs were fitted
    page.locator("#link-calibrated").click()
    page.wait_for_load_state()
    assert page.locator("table.calibration").count() >= 1
    assert watched.errors == [] and watched.dialogs == []


def test_models_page_draws_the_breakdown_and_the_timeline(watched: Watched, server: str) -> None:
    page = watched.page
    page.goto(f"{server}/models?model=llama-3-8b&hardware={H100}&devices=2&batch=8&phase=decode")
    charts_rendered(page)
    assert page.locator("#model-breakdown .sunburstlayer path.surface").count() > 32 * 8  # every layer's ops
    assert page.locator("#model-timeline .barlayer .point").count() > 32 * 8
    lanes = page.locator("#model-timeline .ytick text").all_text_contents()
    assert set(lanes) == {"compute", "comm (blocking)"}  # TP 2: the all-reduces have their lane
    assert page.locator("#model-timeline .xtitle").text_content() == "Time since the step started [s]"
    assert "% of decode time is" in (page.locator("#bottleneck").text_content() or "")
    page.goto(f"{server}/models?model=gpt2&hardware={H100}&phase=prefill&chart=treemap")
    charts_rendered(page)
    assert page.locator("#model-breakdown .treemaplayer path.surface").count() > 12
    assert watched.errors == [] and watched.dialogs == [] and watched.external == []


def test_models_error_and_sorting_by_keyboard(watched: Watched, server: str) -> None:
    page = watched.page
    response = page.goto(f"{server}/models?model=llama-3-70b&hardware={H100}&devices=1")
    assert response is not None and response.status == 422
    assert "GB per device" in (page.locator("#model-error").text_content() or "")
    page.goto(f"{server}/models?model=gpt2&hardware={H100}")
    charts_rendered(page)
    button = page.locator("#op-types-table thead th:nth-child(4) button")
    button.focus()
    page.keyboard.press("Enter")  # sort by time, ascending
    assert page.locator("#op-types-table thead th:nth-child(4)").get_attribute("aria-sort") == "ascending"
    column = "#op-types-table tbody td:nth-child(4)"
    times = page.eval_on_selector_all(column, "cells => cells.map(c => +c.dataset.sort)")
    assert times == sorted(times) and len(times) > 3
    page.keyboard.press("Enter")
    times = page.eval_on_selector_all(column, "cells => cells.map(c => +c.dataset.sort)")
    assert times == sorted(times, reverse=True)
    assert [e for e in watched.errors if "422" not in e] == []  # the refused estimate logs its status


def test_stored_sweep_draws_its_pareto_chart(watched: Watched, live: tuple[str, FastAPI]) -> None:
    from perfmodel.graph.sweep import SweepSpec, run_sweep

    server, app = live
    spec = SweepSpec.from_json({"base": H100, "axes": {"levels.dram.bandwidth_bytes_per_s": ["x0.5", "x1", "x2"],
                                                       "devices": [1, 2]},
                                "workloads": [{"model": "gpt2", "phase": "decode", "batch": 8, "kv_len": 1024}]})
    results = run_sweep(spec)
    sweep_id = app.state.perfmodel.store.add_sweep(XSS, spec.to_json(), results)
    page = watched.page
    page.goto(f"{server}/sweeps")
    page.locator(f"a[href='/sweeps/{sweep_id}']").click()
    page.wait_for_load_state()
    charts_rendered(page)
    assert page.locator("#sweep-name").text_content() == XSS and page.locator("img").count() == 0
    chart = page.locator("#sweep-pareto-chart")
    assert chart.locator(".scatterlayer .point").count() == len(results["rows"])
    assert chart.locator(".legendtext").filter(has_text="Pareto front").count() == 1
    front = chart.locator(".scatterlayer .trace").filter(has=page.locator(".js-line")).locator(".point").first
    box = front.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_selector("#sweep-pareto-chart .hoverlayer .hovertext")
    hover = chart.locator(".hoverlayer").text_content() or ""
    assert "levels.dram.bandwidth_bytes_per_s = x" in hover and "Pareto" in hover
    assert page.locator("#sweep-table tbody tr").count() == len(results["rows"])
    assert watched.errors == [] and watched.dialogs == [] and watched.external == []


def test_models_page_estimates_an_uploaded_file_with_trip_counts(watched: Watched, server: str) -> None:
    """The models page's file form (issue 26): StableHLO with a while loop and its trip count, then a bad ONNX."""
    mlir = Path(__file__).resolve().parents[1] / "data" / "stablehlo" / "fori_loop_fp32.mlir"
    page = watched.page
    page.goto(f"{server}/models?model=gpt2&hardware={H100}&phase=decode")
    charts_rendered(page)
    assert page.locator("#file-result").is_hidden()
    page.locator("#model-file").set_input_files(str(mlir))
    page.locator("#trip-counts").fill("%0=8, nope=2")
    page.locator("#file-button").click()
    page.wait_for_selector("#file-result:not([hidden])", timeout=60_000)
    assert page.locator("#file-progress").get_attribute("value") == "100"
    assert (page.locator("#file-step-time").text_content() or "").endswith("s")
    loop = page.locator("#file-loops-table tbody tr").first.locator("th, td").all_text_contents()
    assert loop[:4] == ["%0", "stablehlo.while", "8", "argument"] and loop[5] == "100.0 %"
    assert page.locator("#file-ops-table tbody tr").count() >= 2
    assert "every op is modelled" in page.locator("#file-fallback-table").inner_text()
    assert "trip count nope: no loop of this name" in page.locator("#file-notes").inner_text()
    if os.environ.get("PERFMODEL_SHOTS"):  # look at it: PERFMODEL_SHOTS=/tmp/shots
        page.screenshot(path=str(Path(os.environ["PERFMODEL_SHOTS"]) / "models-file.png"), full_page=True)
    custom = ("func.func public @main(%arg0: tensor<64x64xf32>) -> tensor<64x64xf32> {\n"
              "  %0 = stablehlo.custom_call @Sharding(%arg0) {backend_config = \"\"} : (tensor<64x64xf32>) -> "
              "tensor<64x64xf32>\n  %1 = stablehlo.dot_general %0, %arg0, contracting_dims = [1] x [0] : "
              "(tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n  return %1 : tensor<64x64xf32>\n}\n")
    page.locator("#trip-counts").fill("")
    page.locator("#model-file").set_input_files(files=[{"name": "sharded.mlir", "mimeType": "text/plain",
                                                       "buffer": custom.encode()}])
    page.locator("#file-button").click()
    page.wait_for_selector("#file-result:not([hidden])", timeout=60_000)
    row = page.locator("#file-fallback-table tbody tr").first.locator("th, td").all_text_contents()
    assert row[1] == "stablehlo.custom_call" and "custom_call is not modelled" in row[2], row
    assert row[5].endswith(" %") and 0 < float(row[5].split()[0]) < 100, row  # its share of the step
    assert "no loops in this model" in page.locator("#file-loops-table").inner_text()
    page.locator("#model-file").set_input_files(files=[{"name": "broken.onnx", "mimeType": "application/octet-stream",
                                                       "buffer": b"not a protobuf"}])
    page.locator("#file-button").click()
    page.wait_for_function("() => document.getElementById('file-status').classList.contains('error')")
    status = page.locator("#file-status").text_content() or ""
    assert status.startswith("Not estimated (422)") and "not a readable ONNX model" in status, status
    assert page.locator("#file-result").is_hidden()  # the last file's answer is not left under the error
    if os.environ.get("PERFMODEL_SHOTS"):  # look at it: PERFMODEL_SHOTS=/tmp/shots
        page.screenshot(path=str(Path(os.environ["PERFMODEL_SHOTS"]) / "models-file-error.png"), full_page=True)
    assert [e for e in watched.errors if "422" not in e] == [] and watched.external == []


def test_a_refused_trace_upload_says_why(watched: Watched, server: str) -> None:
    """The upload's errorText(xhr) was shadowed by the calibration's errorText(response, answer) (two function
    declarations of one name in one script: the last wins), so a refused upload threw instead of saying why."""
    page = watched.page
    page.goto(f"{server}/upload")
    _save_token(page)
    page.locator("#trace-file").set_input_files(files=[{"name": "junk.json", "mimeType": "application/json",
                                                       "buffer": b"{not json"}])
    page.locator("#upload-button").click()
    page.wait_for_function("() => document.getElementById('upload-status').textContent.startsWith('Upload failed')")
    status = page.locator("#upload-status").text_content() or ""
    assert "Not fitted" not in status and len(status) > len("Upload failed (422): "), status
    assert [e for e in watched.errors if "422" not in e and "400" not in e] == [], watched.errors
