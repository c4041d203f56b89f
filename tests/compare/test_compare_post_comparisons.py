"""POST /api/v1/comparisons, the name issue 28 gives the service's compare: the same answer as POST
/api/v1/trace-diffs, while GET /api/v1/comparisons stays predicted vs measured of the stored runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from tests.compare.conftest import HTA_0, HTA_1, trace_path
from tests.db_urls import database_url as fresh_database

TOKEN = "test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
A100 = "nvidia-a100-sxm4-80gb"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with fresh_database("sqlite", tmp_path) as url, TestClient(
            create_app(Settings(database_url=url, api_token=TOKEN))) as c:
        yield c


def _upload(client: TestClient, name: str) -> int:
    path = trace_path(name)
    response = client.post("/api/v1/traces", files={"file": (path.name, path.read_bytes(), "application/gzip")},
                           data={"hardware": A100}, headers=AUTH)
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def test_post_comparisons_is_the_trace_diff(client: TestClient) -> None:
    body = {"base_trace": _upload(client, HTA_0), "new_trace": _upload(client, HTA_1), "top": 50}
    posted = client.post("/api/v1/comparisons", json=body)
    assert posted.status_code == 200, posted.text
    assert posted.json() == client.post("/api/v1/trace-diffs", json=body).json()
    assert posted.json()["regressions"] == 0 and len(posted.json()["groups"]) == 50
    missing = client.post("/api/v1/comparisons", json={**body, "new_trace": 999})
    assert missing.status_code == 404 and "no stored trace 999" in missing.text
    assert client.post("/api/v1/comparisons", json={"base_trace": 1}).status_code == 422
    listed = client.get("/api/v1/comparisons", params={"hardware": A100})
    assert listed.status_code == 200, listed.text
    spec = client.get("/openapi.json").json()["paths"]["/api/v1/comparisons"]
    assert {"get", "post"} <= set(spec)


def test_history_page_charts_have_category_axes(client: TestClient) -> None:
    """/trace-history and /trace-diff plot names (traces, op kinds) on x: on a linear axis plotly drew nothing.
    A trace named twice in a history keeps both points (one category per position)."""
    import json
    import re

    base, new = _upload(client, HTA_0), _upload(client, HTA_1)
    page = client.get("/trace-history", params={"traces": f"{base},{new},{base}"})
    assert page.status_code == 200, page.text
    charts = [json.loads(m) for m in re.findall(r'<script type="application/json" id="[^"]*">(.*?)</script>',
                                                  page.text, re.S)]
    series = [c for c in charts if c.get("data") and c["data"][0].get("name") == "measured median"]
    assert series, "no history chart"
    for chart in series:
        assert chart["layout"]["xaxis"]["type"] == "category"
        assert len(set(chart["data"][0]["x"])) == 3 and chart["data"][0]["x"][0].startswith(f"1. #{base} ")
