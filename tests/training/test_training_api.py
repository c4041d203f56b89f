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


def test_all_gather_context_parallelism_is_exposed_over_http(client: TestClient) -> None:
    """cp_attention="allgather" (Llama 3 §3.3.2): the K/V gather shows; the default ring hides behind attention."""
    body = {**BASE, "seq_len": 32768, "devices": 8, "global_batch": 4, "tp": 4, "cp": 2, "dp": 1, "pp": 1,
            "micro_batch": 1, "recompute": "full"}
    rows = {style: client.post("/api/v1/training/check", headers=AUTH, json={**body, "cp_attention": style})
            for style in ("ring", "allgather")}
    assert all(r.status_code == 200 for r in rows.values()), rows["allgather"].text
    exposed = {k: r.json()["layout"]["time_s"]["cp_exposed_s"] for k, r in rows.items()}
    assert exposed["ring"] == 0.0 < exposed["allgather"]
    bad = client.post("/api/v1/training/check", headers=AUTH, json={**body, "cp_attention": "ulysses"})
    assert bad.status_code == 422


def test_the_device_speed_spread_is_an_option_over_http(client: TestClient) -> None:
    """device_speed_spread = 0 turns the slowest-device term off (faster step); outside [0, 1) is a 422."""
    body = {**BASE, "devices": 8, "global_batch": 8, "tp": 8, "pp": 1, "dp": 1}
    steps = [client.post("/api/v1/training/check", headers=AUTH, json={**body, "device_speed_spread": s})
             for s in (0.0, 0.08)]
    assert all(r.status_code == 200 for r in steps), steps[0].text
    assert steps[0].json()["layout"]["step_s"] < steps[1].json()["layout"]["step_s"]
    assert client.post("/api/v1/training/check", headers=AUTH, json={**body, "device_speed_spread": 1.0}
                       ).status_code == 422


def test_fsdp_accumulation_and_pods_are_options_over_http(client: TestClient) -> None:
    body = {**BASE, "devices": 8, "global_batch": 16, "tp": 2, "pp": 1, "dp": 4, "zero": 1}
    rows = [client.post("/api/v1/training/check", headers=AUTH, json={**body, **extra})
            for extra in ({}, {"grad_accumulation": "separate", "pod_devices": 2, "pod_oversubscription": 7})]
    assert all(r.status_code == 200 for r in rows), rows[1].text
    plain, fsdp = (r.json()["layout"] for r in rows)
    assert fsdp["time_s"]["grad_accumulate_s"] > 0.0 == plain["time_s"]["grad_accumulate_s"]
    assert fsdp["time_s"]["dp_exposed_s"] + fsdp["time_s"]["dp_hidden_s"] > \
        plain["time_s"]["dp_exposed_s"] + plain["time_s"]["dp_hidden_s"]
    bad = client.post("/api/v1/training/check", headers=AUTH, json={**body, "pod_oversubscription": 0.5})
    assert bad.status_code == 422


def test_the_attention_kernel_is_an_option_over_http(client: TestClient) -> None:
    """attention_kernel = "fa2" on an H100: FlashAttention-2's kernel, a longer step; an unknown kernel is a 422."""
    body = {**BASE, "devices": 8, "global_batch": 8, "tp": 8, "pp": 1, "dp": 1}
    steps = [client.post("/api/v1/training/check", headers=AUTH, json={**body, "attention_kernel": k})
             for k in ("native", "fa2")]
    assert all(r.status_code == 200 for r in steps), steps[1].text
    assert steps[0].json()["layout"]["step_s"] < steps[1].json()["layout"]["step_s"]
    assert client.post("/api/v1/training/check", headers=AUTH, json={**body, "attention_kernel": "fa4"}
                       ).status_code == 422
