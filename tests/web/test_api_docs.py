"""/docs and /redoc work offline: Swagger UI and Redoc from the installed fastapi-offline package, no CDN
request, no inline script (the dashboard's Content-Security-Policy), and they render the API's operations in
Chromium."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.web.conftest import TOKEN
from web.testing import live_server

CHROMIUM = Path("/usr/bin/chromium")


def test_docs_page_uses_local_assets_and_a_strict_policy(client: TestClient) -> None:
    for path in ("/docs", "/redoc"):
        page = client.get(path)
        assert page.status_code == 200
        assert "//" not in page.text  # no absolute URL: nothing from another host
        assert "<script>" not in page.text  # only <script src=...>: allowed by script-src 'self'
        policy = page.headers["content-security-policy"]
        assert "script-src 'self';" in policy
        for asset in re.findall(r'(?:src|href)="([^"]+)"', page.text):
            response = client.get(asset)
            assert response.status_code == 200 and len(response.content) > 100, asset
    assert all(not path.startswith(("/docs", "/redoc")) for path in client.get("/openapi.json").json()["paths"])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_server(tmp_path_factory.mktemp("docs"), TOKEN) as (base, _):
        yield base


@pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("CI"),
                    reason="apt-get install chromium (Debian's build)")
def test_docs_render_operations_offline_in_chromium(server: str) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    external: list[str] = []
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM))
        try:
            page = browser.new_page()

            def offline(route: Any) -> None:  # the machine is "offline": any other host fails
                if route.request.url.startswith(server):
                    route.continue_()
                else:
                    external.append(route.request.url)
                    route.abort()

            page.route("**/*", offline)
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{server}/docs")
            page.wait_for_selector(".opblock", timeout=30_000)
            summaries = page.locator(".opblock-summary-path").all_text_contents()
            assert any("/api/v1/predict" in s for s in summaries), summaries[:10]
            assert any("/api/v1/hardware" in s for s in summaries)
            assert page.locator(".opblock-tag").count() >= 3
            swagger_errors = list(errors)
            errors.clear()
            page.goto(f"{server}/redoc")
            page.wait_for_selector("[data-section-id^='tag/']", timeout=30_000)
            assert "/api/v1/predict" in page.locator("body").inner_text()
        finally:
            browser.close()
    assert external == [] and swagger_errors == []
    # Redoc's sidebar links its logo from cdn.redoc.ly: the page's policy blocks it before any request is made
    assert all("Content Security Policy" in e and "img-src" in e for e in errors), errors
