"""POST /api/v1/schedules/rank over HTTP: objects or columns in, rows or columns out, 422s naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings

H100 = "nvidia-h100-sxm5-80gb"
GEMM = {"kind": "matmul", "m": 2048, "n": 2048, "k": 2048, "dtype": "bf16"}
URL = "/api/v1/schedules/rank"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    db = tmp_path_factory.mktemp("rank") / "db.sqlite"
    with TestClient(create_app(Settings(database_url=f"sqlite:///{Path(db)}"))) as c:
        yield c


def post(client: TestClient, **body: Any) -> Any:
    return client.post(URL, json={"hardware": H100, "op": GEMM, **body})


def test_objects_and_columns_give_the_same_ranking(client: TestClient) -> None:
    rows = [{"tile_m": 128, "tile_n": 128, "tile_k": 64, "stages": 3, "warps": 4},
            {"tile_m": 0, "tile_n": 128, "tile_k": 64},
            {"tile_m": 64, "tile_n": 64, "tile_k": 32, "stages": 2, "split_k": 2, "group_m": 8}]
    by_rows = post(client, candidates=rows)
    assert by_rows.status_code == 200, by_rows.text
    out = by_rows.json()
    assert out["model_version"] and out["hardware_hash"] and out["family"] == "gemm" and out["count"] == 3
    assert out["valid"] == 2 and sorted(out["order"]) == [0, 2]
    bad = out["results"][1]
    assert bad["rank"] is None and bad["time_s"] is None and "tile_m must be a positive integer" in bad["reason"]
    good = out["results"][out["order"][0]]
    assert good["rank"] == 1 and good["time_s"] > 0 and good["bound"] and good["waves"] > 0
    columns = {name: [row.get(name) for row in rows] for name in ("tile_m", "tile_n", "tile_k")}
    columns.update({"stages": [3, 2, 2], "split_k": [1, 1, 2], "group_m": [1, 1, 8], "warps": [4, None, None]})
    by_columns = post(client, columns=columns, layout="columns")
    assert by_columns.status_code == 200, by_columns.text
    cols = by_columns.json()["columns"]
    assert cols["rank"] == [r["rank"] for r in out["results"]]
    assert cols["time_s"] == [r["time_s"] for r in out["results"]]


def test_malformed_requests_are_422_naming_the_field(client: TestClient) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"candidates": [{"tile_m": 128, "tile_n": 128}]}, "candidates.tile_k"),
        ({"candidates": [{"tile_m": 128, "tile_n": 128, "tile_k": 64}, {"tile_n": 64, "tile_k": 64}]},
         "candidates.1.tile_m"),
        ({"candidates": [{"tile_m": 128, "tile_n": 128, "tile_k": 64, "bogus": 1}]}, "candidates.0.bogus"),
        ({}, "candidates"),
        ({"candidates": [{"tile_m": 1, "tile_n": 1, "tile_k": 1}], "columns": {"tile_m": [1]}}, "candidates"),
        ({"columns": {"tile_m": [1, 2], "tile_n": [1], "tile_k": [1, 2]}}, "candidates.tile_n"),
        ({"candidates": [{"tile_m": "big", "tile_n": 1, "tile_k": 1}]}, "candidates.0.tile_m"),
    ]
    for body, field in cases:
        response = post(client, **body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["field"] == field, (body, response.json())
    not_gemm = client.post(URL, json={"hardware": H100, "op": {"kind": "layernorm", "shape": [8, 8], "dtype": "bf16"},
                                      "candidates": [{"tile_m": 1}]})
    assert not_gemm.status_code == 422 and not_gemm.json()["field"] == "op.kind"
    unknown = client.post(URL, json={"hardware": "no-such-gpu", "op": GEMM, "candidates": []})
    assert unknown.status_code == 404


def test_the_endpoint_is_in_the_openapi_document(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operation = spec["paths"][URL]["post"]
    assert "422" in operation["responses"] and "200" in operation["responses"]
    assert "ScheduleCandidate" in spec["components"]["schemas"]


def test_candidate_objects_checked_as_a_batch_answer_as_validated_ones(client: TestClient) -> None:
    """The batch path (numbers or null, known fields) and the field-by-field one (here forced by a numeric
    string, which pydantic's lax float accepts) give the same answer; the batch path is the one taken."""
    from api.schedule_schemas import RankRequest

    rng = np.random.default_rng(3)
    rows: list[dict[str, Any]] = [
        {"tile_m": int(m), "tile_n": int(n), "tile_k": int(k), "stages": None if s == 0 else int(s)}
        for m, n, k, s in zip(rng.choice([0, 16, 64, 128, 256], 300), rng.choice([32, 64, 128], 300),
                              rng.choice([32, 64], 300), rng.integers(0, 5, 300), strict=True)]
    rows[7]["split_k"] = 2.0
    assert RankRequest.model_validate({"hardware": H100, "op": GEMM, "candidates": rows}).gathered is not None
    slow = [*rows[:-1], {**rows[-1], "tile_m": str(rows[-1]["tile_m"])}]
    assert RankRequest.model_validate({"hardware": H100, "op": GEMM, "candidates": slow}).gathered is None
    fast_out, slow_out = post(client, candidates=rows).json(), post(client, candidates=slow).json()
    assert fast_out == slow_out and fast_out["valid"] > 0 and fast_out["count"] == 300
    missing = [*rows[:5], {"tile_m": 64, "tile_n": None, "tile_k": 32}]
    assert post(client, candidates=missing).json()["field"] == "candidates.5.tile_n"
    nan = client.post(URL, content=b'{"hardware": "%s", "op": {"kind": "matmul", "m": 64, "n": 64, "k": 64, '
                                   b'"dtype": "bf16"}, "candidates": [{"tile_m": NaN, "tile_n": 64, "tile_k": 64}]}'
                      % H100.encode(), headers={"content-type": "application/json"})
    assert nan.status_code == 200 and nan.json()["results"][0]["rank"] is None
