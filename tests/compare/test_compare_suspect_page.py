"""The PyTorch 1.8 -> 1.9 ResNet-50 pair stored and compared by id: the API and the /trace-diff page say which
groups are timing suspect and why (the 1.8 file's memsets), and count none of them as regressions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from tests.compare.conftest import RESNET_4, trace_path
from tests.compare.test_compare_timing_suspect import RESNET_18

TOKEN = "suspect-page-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    tmp = tmp_path_factory.mktemp("suspectpage")
    app = create_app(Settings(database_url=f"sqlite:///{tmp / 'p.sqlite3'}", data_dir=tmp, api_token=TOKEN))
    with TestClient(app) as c:
        for name in (RESNET_18, RESNET_4):
            path: Path = trace_path(name)
            response = c.post("/api/v1/traces", files={"file": (path.name, path.read_bytes(), "application/gzip")},
                              data={"hardware": "nvidia-v100-sxm2-32gb"}, headers=AUTH)
            assert response.status_code == 201, response.text
        yield c


def test_stored_pair_says_timing_suspect(client: TestClient) -> None:
    api = client.post("/api/v1/trace-diffs", json={"base_trace": 1, "new_trace": 2})
    assert api.status_code == 200, api.text
    data = api.json()
    suspect = [g for g in data["groups"] if g["verdict"] == "timing suspect"]
    assert suspect and data["timing_suspect"] == len(suspect)
    assert all(g["timing_suspect"].startswith("base: ") and g["kernel_names"] == ["Memset"] for g in suspect)
    assert not [g for g in data["groups"] if g["verdict"] == "regression" and g["kernel_names"] == ["Memset"]]
    html = client.get("/trace-diff?base=1&new=2&threshold=5").text
    assert f'id="suspect-count">{len(suspect)}<' in html and 'id="suspect-notice"' in html
    assert html.count('class="suspect-reason"') == len(suspect)
    assert f'id="regressions-count">{data["regressions"]}<' in html
