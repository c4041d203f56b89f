"""A trace's summary says where its kernel time went: matched per source, unmodelled per reason category."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings

TOKEN = "test-token-shares"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(database_url=database_url, api_token=TOKEN))) as c:
        yield c


def _upload(client: TestClient, name: str) -> dict[str, object]:
    path = TRACES / name
    response = client.post("/api/v1/traces", files={"file": (path.name, path.read_bytes(), "application/octet-stream")},
                           data={"hardware": "nvidia-a100-sxm4-80gb"}, headers=AUTH)
    assert response.status_code == 201
    body: dict[str, object] = response.json()
    return body


def test_the_summary_splits_the_kernel_time_by_source_and_reason(client: TestClient) -> None:
    summary = _upload(client, "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz")
    by_source, by_category = summary["matched_share_by_source"], summary["unmodelled_share_by_category"]
    assert isinstance(by_source, dict) and isinstance(by_category, dict)
    assert set(by_source) == {"memcpy/memset", "grid/block", "GEMM tile x grid", "launch geometry"}
    assert by_source["memcpy/memset"] > 0.8
    assert "shapes not recorded" in by_category
    assert sum(by_source.values()) + sum(by_category.values()) == pytest.approx(1.0)
    assert sum(by_category.values()) == pytest.approx(summary["unmodelled_time_share"])
    detail = client.get(f"/api/v1/traces/{summary['id']}").json()
    assert detail["matched_share_by_source"] == pytest.approx(by_source)
    assert detail["unmodelled_share_by_category"] == pytest.approx(by_category)


def test_an_ncu_file_is_matched_by_its_counters(client: TestClient) -> None:
    summary = _upload(client, "activation__relu__nsight_result_first500.csv")
    assert summary["matched_share_by_source"] == {"counters": pytest.approx(1.0)}
    assert summary["unmodelled_share_by_category"] == {}


def test_a_summary_without_work_per_launch_says_so_first(client: TestClient) -> None:
    summary = _upload(client, "vernier__11_NSIGHT_PROFILER__cuda_gpu_kern_sum.txt")
    warnings = summary["warnings"]
    assert isinstance(warnings, list) and str(warnings[0]).startswith("NO WORK PER LAUNCH")
    assert summary["unmodelled_time_share"] == pytest.approx(1.0)
