"""Hostile inputs found on a new user's loop (qa17): an embedding bag with 1e308 sort passes or optimizer-state bytes
per row was a 200 with NaN bytes and a 2 µs time from /predict and a 500 from /search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings

TOKEN = "qa17-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
H100 = "nvidia-h100-sxm5-80gb"
BAG = {"kind": "embedding_bag", "num_indices": 64, "embedding_dim": 64, "num_bags": 64, "dtype": "fp16"}


@pytest.fixture
def client(tmp_path: Path) -> Any:
    with TestClient(create_app(Settings(database_url=f"sqlite:///{tmp_path / 'p.sqlite3'}",
                                        api_token=TOKEN))) as c:
        yield c


@pytest.mark.parametrize("field", ["sort_passes", "state_bytes_per_row"])
@pytest.mark.parametrize("route", ["predict", "search"])
def test_an_embedding_bag_with_absurd_per_row_work_is_a_422_naming_the_field(client: TestClient, field: str,
                                                                             route: str) -> None:
    response = client.post(f"/api/v1/{route}", json={"hardware": H100, "op": {**BAG, field: 1e308}})
    assert response.status_code == 422, response.text  # was 200 (bytes NaN, time 2 µs) / 500
    assert response.json()["field"] == f"op.{field}"
    ok = client.post(f"/api/v1/{route}", json={"hardware": H100, "op": {**BAG, field: 2, "pass": "backward"}})
    assert ok.status_code == 200, ok.text


def test_more_tag_filters_than_a_run_can_hold_are_a_422_not_a_500(client: TestClient) -> None:
    """4,000 distinct ``tag=`` filters on GET /runs, or tags in a calibration's filter, built an SQL expression
    deeper than SQLite's 1,000 levels: a 500 (the calibration's before any job was made)."""
    many = "&".join(f"tag=k{i}:1" for i in range(2000))
    listed = client.get(f"/api/v1/runs?{many}")
    assert listed.status_code == 422 and "at most 32" in listed.json()["detail"], listed.text[:300]
    assert client.get("/api/v1/runs?" + "&".join(f"tag=k{i}:1" for i in range(32))).status_code == 200
    body = {"hardware": H100, "filter": {"tags": {f"k{i}": "1" for i in range(2000)}}}
    fitted = client.post("/api/v1/calibrations", json=body, headers=AUTH)
    assert fitted.status_code == 422 and fitted.json()["field"] == "filter.tags", fitted.text[:300]
