"""Hostile inputs found on a new user's loop (qa15): values the store refuses are 422s naming the field, not
409 conflicts; a what-if device with an infinite bandwidth is refused by its spec; runs timed absurdly short
still calibrate (the fit's report was non-finite and the job failed at "storing"); a deeply nested trace is a
422, not a killed server."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from perfmodel.calibration.build import fit_calibration
from perfmodel.store.base import check_json

TOKEN = "qa15-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
A100 = "nvidia-a100-sxm4-80gb"
MATMUL = {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp16"}


@pytest.fixture
def client(tmp_path: Path) -> Any:
    with TestClient(create_app(Settings(database_url=f"sqlite:///{tmp_path / 'p.sqlite3'}",
                                        api_token=TOKEN))) as c:
        yield c


def _variant(client: TestClient, device_id: str, overrides: str) -> Any:
    body = f'{{"base": "{A100}", "id": "{device_id}", "overrides": {overrides}}}'
    return client.post("/api/v1/hardware", content=body.encode(), headers=AUTH)



def _upload(client: TestClient, name: str, content: bytes, mime: str) -> Any:
    """POST one trace file for the A100 with the write token; the response."""
    return client.post("/api/v1/traces", files={"file": (name, content, mime)}, data={"hardware": A100},
                       headers={"Authorization": f"Bearer {TOKEN}"})

def test_a_lone_surrogate_in_a_custom_device_is_a_422_naming_the_field(client: TestClient) -> None:
    response = _variant(client, "x-surrogate", '{"name": "a\\ud800b"}')
    assert response.status_code == 422, response.text  # it was a 409, as if the id were taken
    # qa16: the field is the string's path in the spec (it was "spec", "not storable as JSON")
    assert response.json()["field"] == "spec.overrides.name" and "surrogates" in response.json()["detail"]
    assert client.get("/api/v1/hardware/x-surrogate").status_code == 404


@pytest.mark.parametrize("value", ['"x1e300"', "1e400"])
def test_an_infinite_bandwidth_is_refused_by_the_spec(client: TestClient, value: str) -> None:
    response = _variant(client, "x-infinite", f'{{"levels.dram.bandwidth_bytes_per_s": {value}}}')
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "levels.0.bandwidth_bytes_per_s"
    assert "finite" in response.json()["detail"]


def test_a_nan_time_says_it_must_be_finite(client: TestClient) -> None:
    body = (f'{{"hardware": "{A100}", "op": {{"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp16"}}, '
            '"measured_time_s": NaN, "source": "x"}')
    response = client.post("/api/v1/runs", content=body.encode(), headers=AUTH)
    assert response.status_code == 422 and "finite" in response.json()["detail"], response.text


def test_runs_timed_absurdly_short_still_give_a_storable_report() -> None:
    """5e-324 s and 1e-300 s pass the API's ``> 0``; their errors overflowed to inf and the percentiles to NaN."""
    runs = [(MATMUL, t) for t in (5e-324, 1e-300, 1e-12, 2e-5, 3e-5, 2.5e-5)]
    calibration = fit_calibration(A100, runs)
    check_json("fit_report", calibration.report)  # raised: "not storable as JSON (Out of range float values…)"
    check_json("params", calibration.params)


def test_a_deeply_nested_trace_upload_is_a_422(client: TestClient) -> None:
    content = gzip.compress(b'{"traceEvents":' + b"[" * 5000 + b"]" * 5000 + b"}")
    response = _upload(client, "deep.json.gz", content, "application/gzip")
    assert response.status_code == 422 and "nests deeper than" in response.json()["detail"], response.text


def test_a_kernel_grid_past_float_range_leaves_that_kernel_unmodelled(client: TestClient) -> None:
    """The launch-geometry op's size check formatted its element count with ``:g`` (an OverflowError: a 500); then
    the roof alarms built the op the runs had refused (a 422 for the whole file). Now only that kernel is lost."""
    doc = (b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"huge","ts":0,"dur":5,'
           b'"args":{"grid":[1e300,1e300,1],"block":[1024,1,1]}},'
           b'{"ph":"X","cat":"kernel","name":"small","ts":10,"dur":5,"args":{"grid":[4,1,1],"block":[128,1,1]}}]}')
    response = _upload(client, "grid.json", doc, "application/json")
    assert response.status_code == 201, response.text
    assert response.json()["runs_created"] == 1
    assert [u["name"] for u in response.json()["unmodelled"]] == ["huge"]


def test_a_kernel_timed_past_a_million_seconds_makes_no_run(client: TestClient) -> None:
    """POST /runs refuses measured_time_s >= 1e6 s; a trace's ``dur`` of 1e308 µs was stored as a 1e302 s run."""
    doc = (b'{"traceEvents":[{"ph":"X","cat":"kernel","name":"forever","ts":0,"dur":1e308,'
           b'"args":{"grid":[4,1,1],"block":[128,1,1]}},'
           b'{"ph":"X","cat":"kernel","name":"small","ts":10,"dur":5,"args":{"grid":[8,1,1],"block":[128,1,1]}}]}')
    response = _upload(client, "long.json", doc, "application/json")
    assert response.status_code == 201, response.text
    assert response.json()["runs_created"] == 1
    (unmodelled,) = response.json()["unmodelled"]
    assert unmodelled["name"] == "forever" and "not a kernel's time" in unmodelled["reason"]
    assert max(r["measured_time_s"] for r in client.get("/api/v1/runs").json()["items"]) < 1e6


def test_an_op_whose_work_overflows_is_a_422_not_a_null_time(client: TestClient) -> None:
    """1e308 FLOPs per element passes the field's finite check, but 100 elements of it are inf: the answer was a
    200 with ``time_s: null``."""
    op = {"kind": "elementwise", "shape": [100], "dtype": "fp32", "flops_per_element": 1e308}
    response = client.post("/api/v1/predict", json={"hardware": A100, "op": op})
    assert response.status_code == 422, response.text
    assert "overflows" in response.json()["detail"]


def test_a_batch_with_an_op_whose_work_overflows_names_it(client: TestClient) -> None:
    ok = {"kind": "elementwise", "shape": [100], "dtype": "fp32"}
    ops = [ok, ok, {**ok, "flops_per_element": 1e308}]
    response = client.post("/api/v1/predict/batch", json={"hardware": A100, "ops": ops})
    assert response.status_code == 422, response.text  # was 200 with a null time for ops[2]
    assert response.json()["detail"].startswith("ops[2]: ") and "overflows" in response.json()["detail"]


def test_search_and_graph_estimate_refuse_an_op_whose_work_overflows(client: TestClient) -> None:
    """/search answered a 500 (its response model refused the null times); /graphs/estimate a 200 with
    ``step_time_s: null``."""
    op = {"kind": "elementwise", "shape": [100], "dtype": "fp32", "flops_per_element": 1e308}
    searched = client.post("/api/v1/search", json={"hardware": A100, "op": op})
    assert searched.status_code == 422 and "overflows" in searched.json()["detail"], searched.text
    graph = {"nodes": [{"name": "x", "op": op}]}
    estimated = client.post("/api/v1/graphs/estimate", json={"hardware": A100, "graph": graph})
    assert estimated.status_code == 422 and "overflows" in estimated.json()["detail"], estimated.text
