"""POST /api/v1/trace-diffs on two stored traces, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from tests.compare.conftest import HTA_0, HTA_1, trace_path
from tests.db_urls import BACKENDS
from tests.db_urls import database_url as fresh_database

TOKEN = "test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
A100 = "nvidia-a100-sxm4-80gb"


@pytest.fixture(params=BACKENDS)
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestClient]:
    with fresh_database(request.param, tmp_path) as url, TestClient(
            create_app(Settings(database_url=url, api_token=TOKEN))) as c:
        yield c


def upload(client: TestClient, name: str, hardware: str = A100) -> int:
    path = trace_path(name)
    response = client.post("/api/v1/traces", files={"file": (path.name, path.read_bytes(), "application/gzip")},
                           data={"hardware": hardware}, headers=AUTH)
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def test_trace_diff_of_two_stored_ranks(client: TestClient) -> None:
    base, new = upload(client, HTA_0), upload(client, HTA_1)
    response = client.post("/api/v1/trace-diffs", json={"base_trace": base, "new_trace": new})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    assert data["regressions"] == 0 and data["base_hardware"] == data["new_hardware"] == A100
    assert len(data["groups"]) > 20 and data["only_base"] and data["only_new"]
    modelled = [g for g in data["groups"] if g["base_bound"] is not None]
    assert modelled and all(g["expected_ratio"] == pytest.approx(1.0) for g in modelled)
    assert sum(data["verdicts"].values()) == len(data["groups"])
    same = client.post("/api/v1/trace-diffs", json={"base_trace": base, "new_trace": base, "top": 3}).json()
    assert len(same["groups"]) == 3 and set(same["verdicts"]) <= {"no change", "too few repeats"}
    spec = client.get("/openapi.json").json()
    assert "/api/v1/trace-diffs" in spec["paths"] and "TraceDiffOut" in spec["components"]["schemas"]


def test_trace_diff_bad_input(client: TestClient) -> None:
    base = upload(client, HTA_0)
    missing = client.post("/api/v1/trace-diffs", json={"base_trace": base, "new_trace": 999})
    assert missing.status_code == 404 and "no stored trace 999" in missing.text
    for body in ({"base_trace": base}, {"base_trace": base, "new_trace": base, "threshold_pct": -1},
                 {"base_trace": base, "new_trace": base, "alpha": 2}, {"base_trace": "x", "new_trace": base},
                 {"base_trace": base, "new_trace": base, "extra": 1}):
        assert client.post("/api/v1/trace-diffs", json=body).status_code == 422, body


def test_history_flags_the_change_points(client: TestClient, tmp_path: Path) -> None:
    """rank 0, the same with layer_norm kernels 30 % slower, rank 0 again: the layer_norm series has a regression
    at the second trace and an improvement at the third; the ops that did not change have no change point."""
    from tests.compare.test_compare_cli import _slowed_copy

    first = upload(client, HTA_0)
    slowed_path = tmp_path / "slowed.json.gz"
    _slowed_copy(trace_path(HTA_0), slowed_path, "aten::layer_norm", 1.3)
    response = client.post("/api/v1/traces", files={"file": (slowed_path.name, slowed_path.read_bytes())},
                           data={"hardware": A100}, headers=AUTH)
    assert response.status_code == 201, response.text
    second = int(response.json()["id"])
    answer = client.post("/api/v1/trace-diffs/history", json={"traces": [first, second, first],
                                                              "threshold_pct": 10})
    assert answer.status_code == 200, answer.text
    series = answer.json()["series"]
    assert series and {s["name"] for s in series} == {"aten::layer_norm"}
    for s in series:
        assert [(c["index"], c["verdict"]) for c in s["change_points"]] == [(1, "regression"), (2, "improvement")]
        assert s["median_s"][1] == pytest.approx(s["median_s"][0] * 1.3, rel=0.05)
        assert s["predicted_s"][0] == s["predicted_s"][1] is not None
    everything = client.post("/api/v1/trace-diffs/history", json={"traces": [first, second],
                                                                  "changed_only": False}).json()["series"]
    assert len(everything) > len(series)
    assert client.post("/api/v1/trace-diffs/history", json={"traces": [first]}).status_code == 422
    assert client.post("/api/v1/trace-diffs/history", json={"traces": [first, 999]}).status_code == 404
