"""The trace-diff page in headless Chromium (like tests/web/test_browser.py): pick two stored traces in the form,
the charts render under the strict CSP, no console error, no request leaves the machine."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.compare.conftest import HTA_0, HTA_1, trace_path
from web.testing import live_server

playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("CI"),
                                reason="apt-get install chromium (Debian's build)")
TOKEN = "browser-diff-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_server(tmp_path_factory.mktemp("diffbrowser"), TOKEN) as (base, _app):
        for name in (HTA_0, HTA_1):
            path = trace_path(name)
            response = httpx.post(f"{base}/api/v1/traces", files={"file": (path.name, path.read_bytes())},
                                  data={"hardware": "nvidia-a100-sxm4-80gb"},
                                  headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
            assert response.status_code == 201, response.text
        yield base


def test_compare_two_traces_in_the_browser(server: str) -> None:
    errors: list[str] = []
    external: list[str] = []
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                    args=["--enable-unsafe-swiftshader", "--use-angle=swiftshader"])
        page: Any = browser.new_page(viewport={"width": 1440, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: None if r.url.startswith((server, "data:", "blob:")) else external.append(r.url))
        page.goto(f"{server}/trace-diff")
        page.select_option("#base-select", "1")
        page.select_option("#new-select", "2")
        page.locator("form.filters button[type=submit]").click()
        page.wait_for_url("**/trace-diff?base=1&new=2*")
        page.wait_for_function("() => Array.from(document.querySelectorAll('.chart[data-figure]'))"
                               ".every(d => d.dataset.rendered === 'true')", timeout=30_000)
        assert page.locator(".chart[data-figure] .main-svg").count() >= 2
        assert page.locator("#diff-roofline .annotation").count() >= 1  # the before -> after arrows
        bars = page.locator("#diff-waterfall .point path")  # base, one bar per op kind, new
        boxes = [bars.nth(i).bounding_box() for i in range(bars.count())]
        assert all(b is not None and b["width"] > 2 for b in boxes), boxes  # 0 x 0 on a linear x axis
        assert sum(b is not None and b["height"] > 0 for b in boxes) >= 3, boxes
        assert page.locator("#diff-table tbody tr").count() > 20
        assert page.locator("#regressions-count").inner_text() == "0"
        browser.close()
    assert errors == [] and external == []
