"""POST /api/v1/training/layouts and /training/check over HTTP (TestClient; the endpoints use no database)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings

TOKEN = "training-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE = {"hardware": "nvidia-h100-sxm5-80gb", "model": "llama-3-8b", "seq_len": 4096}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'api.db'}", api_token=TOKEN)
    with TestClient(create_app(settings)) as c:
        yield c


def test_layouts_are_ranked_and_fit(client: TestClient) -> None:
    r = client.post("/api/v1/training/layouts", headers=AUTH,
                    json={**BASE, "devices": 16, "global_batch": 64, "top": 3, "zero": 1})
    assert r.status_code == 200, r.text
    data = r.json()
    rows = data["fastest"]
    assert len(rows) == 3 and [x["step_s"] for x in rows] == sorted(x["step_s"] for x in rows)
    assert all(x["layout"]["zero"] == 1 and x["fits"] for x in rows)
    assert data["layouts_costed"] >= data["fit"] >= 3


def test_check_lists_fixes_and_refuses_a_wrong_device_count(client: TestClient) -> None:
    r = client.post("/api/v1/training/check", headers=AUTH,
                    json={**BASE, "devices": 8, "global_batch": 64, "dp": 8, "zero": 1, "micro_batch": 8})
    assert r.status_code == 200, r.text
    out = r.json()
    assert not out["layout"]["fits"] and out["fixes"]
    bad = client.post("/api/v1/training/check", headers=AUTH, json={**BASE, "devices": 8, "tp": 3})
    assert bad.status_code == 422 and "not devices = 8" in bad.text
