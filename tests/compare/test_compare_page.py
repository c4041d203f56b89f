"""The dashboard's trace-diff page: two stored traces picked, a table, a waterfall and a roofline with arrows;
strict CSP (no inline script but JSON data blocks)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from tests.compare.conftest import HTA_0, HTA_1, RESNET_0, trace_path

TRITON = "triton_example__triton_example.json.gz"  # one Triton kernel: nothing in common with HTA's ranks

TOKEN = "page-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    tmp = tmp_path_factory.mktemp("diffpage")
    app = create_app(Settings(database_url=f"sqlite:///{tmp / 'p.sqlite3'}", data_dir=tmp, api_token=TOKEN))
    with TestClient(app) as c:
        for name, hw in ((HTA_0, "nvidia-a100-sxm4-80gb"), (HTA_1, "nvidia-a100-sxm4-80gb"),
                         (RESNET_0, "nvidia-v100-sxm2-32gb"), (TRITON, "nvidia-a100-sxm4-80gb")):
            path: Path = trace_path(name)
            response = c.post("/api/v1/traces", files={"file": (path.name, path.read_bytes(), "application/gzip")},
                              data={"hardware": hw}, headers=AUTH)
            assert response.status_code == 201, response.text
        yield c


def test_pick_two_traces_and_compare(client: TestClient) -> None:
    form = client.get("/trace-diff")
    assert form.status_code == 200 and 'id="base-select"' in form.text and HTA_0 in form.text
    page = client.get("/trace-diff?base=1&new=2&threshold=5")
    assert page.status_code == 200, page.text
    html = page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    scripts = re.findall(r"<script([^>]*)>", html)
    assert all("src=" in attrs or 'type="application/json"' in attrs for attrs in scripts)
    api = client.post("/api/v1/trace-diffs", json={"base_trace": 1, "new_trace": 2}).json()
    assert f'id="groups-count">{len(api["groups"])}<' in html and 'id="regressions-count">0<' in html
    assert html.count("<tr class=\"verdict-") == min(len(api["groups"]), 200)
    waterfall = json.loads(re.search(r'id="diff-waterfall-json">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    assert waterfall["data"][0]["type"] == "waterfall" and waterfall["data"][0]["measure"][-1] == "total"
    assert waterfall["data"][0]["y"][-1] == pytest.approx(api["new_total_s"] * 1e3)
    assert re.search(r'class="op-params">[a-z_]+=', html)  # which conv / matmul: the op's parameters under its name
    assert waterfall["layout"]["xaxis"]["type"] == "category"  # a linear axis plots no bar at 'base', 'conv2d'...
    roofline = json.loads(re.search(r'id="diff-roofline-json">(.*?)</script>', html, re.S).group(1))  # type: ignore[union-attr]
    arrows = [a for a in roofline["layout"]["annotations"] if a.get("showarrow") and a.get("axref") == "x"]
    assert 0 < len(arrows) <= 12


def test_bad_choices_say_why(client: TestClient) -> None:
    missing = client.get("/trace-diff?base=1&new=99")
    assert missing.status_code == 404 and "no stored trace 99" in missing.text
    disjoint = client.get("/trace-diff?base=1&new=4")  # an HTA rank against a lone Triton kernel: nothing shared
    assert disjoint.status_code == 422 and 'id="diff-error"' in disjoint.text and "in common" in disjoint.text
    # an A100 rank against ResNet-50 on a V100 share one 1-element fill_ (2 and 6 calls): compared, no verdict
    devices = client.get("/trace-diff?base=1&new=3")
    assert devices.status_code == 200 and 'id="regressions-count">0<' in devices.text
    assert client.get("/trace-diff?base=1&new=2&threshold=abc").status_code == 422
