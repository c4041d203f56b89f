"""The REST service over HTTP (TestClient), on SQLite and on PostgreSQL."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from job_client import calibrate

from api.main import create_app
from api.settings import Settings
from perfmodel.client import ApiError, Client

TOKEN = "test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MATMUL = {"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "bf16"}
H100 = "nvidia-h100-sxm5-80gb"


def make_client(url: str, **overrides: Any) -> TestClient:
    settings = Settings(database_url=url, api_token=TOKEN, **overrides)
    return TestClient(create_app(settings))


@pytest.fixture
def client(database_url: str) -> Any:
    with make_client(database_url) as c:
        yield c


def test_health_docs_and_openapi(client: TestClient) -> None:
    assert client.get("/api/v1/health").json()["status"] == "ok"
    spec = client.get("/openapi.json").json()
    for path in ("/api/v1/predict", "/api/v1/predict/batch", "/api/v1/search", "/api/v1/hardware",
                 "/api/v1/runs", "/api/v1/runs/bulk", "/api/v1/comparisons"):
        assert path in spec["paths"]
    assert client.get("/api/v1/health").headers["x-perfmodel-version"]


def test_hardware_catalog(client: TestClient) -> None:
    items = client.get("/api/v1/hardware").json()["items"]
    ids = {i["id"] for i in items}
    assert H100 in ids and "generic-npu" in ids
    detail = client.get(f"/api/v1/hardware/{H100}").json()
    assert detail["origin"] == "bundled" and detail["spec"]["units"] == 132 and detail["content_hash"]
    missing = client.get("/api/v1/hardware/no-such-gpu")
    assert missing.status_code == 404 and missing.json()["field"] == "hardware"


def test_predict(client: TestClient) -> None:
    body = client.post("/api/v1/predict", json={"hardware": H100, "op": MATMUL}).json()
    assert body["time_s"] > 0 and body["bound"] and body["flops"] == 2 * 1024**3
    assert body["model_version"] and body["hardware_hash"] and body["schedule"]["tile_m"] > 0
    assert set(body["bytes_by_level"]) >= {"HBM3"}
    low, high = body["uncalibrated_interval_s"]  # the class's leave-one-device-out band; no calibration
    assert 0 < low < high and body["interval_s"] is None
    again = client.post("/api/v1/predict", json={"hardware": H100, "op": MATMUL}).json()
    assert again == body  # cached, same answer


@pytest.mark.parametrize(("payload", "status", "field"), [
    ({"hardware": H100, "op": {**MATMUL, "kind": "matmull"}}, 422, "op.kind"),
    ({"hardware": H100, "op": {**MATMUL, "m": 10**15}}, 422, "op.m"),
    ({"hardware": H100, "op": {**MATMUL, "m": -3}}, 422, "op.m"),
    ({"hardware": H100, "op": {**MATMUL, "dtype": "fp7"}}, 422, "op.dtype"),
    ({"hardware": "google-tpu-v5e", "op": {**MATMUL, "dtype": "fp64"}}, 422, "op.dtype"),
    ({"hardware": "nope", "op": MATMUL}, 404, "hardware"),
    ({"hardware": H100}, 422, "op"),
    ({"hardware": H100, "op": MATMUL, "surprise": 1}, 422, "surprise"),
])
def test_bad_predict_input_is_a_4xx_naming_the_field(client: TestClient, payload: dict[str, Any], status: int,
                                                     field: str) -> None:
    response = client.post("/api/v1/predict", json=payload)
    assert response.status_code == status, response.text
    assert response.json()["field"] == field


def test_malformed_json_is_a_422(client: TestClient) -> None:
    response = client.post("/api/v1/predict", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 422
    # the position is where the JSON breaks, not a field name (it said "field": "1")
    assert response.json()["field"] == "body"
    assert response.json()["detail"].startswith("body: malformed JSON at character 1")


def test_batch_keeps_order_and_limits(database_url: str) -> None:
    with make_client(database_url, max_batch_ops=3) as c:
        ops = [MATMUL, {"kind": "rmsnorm", "shape": [64, 4096], "dtype": "bf16"},
               {"kind": "allreduce", "bytes": 1e6, "devices": 8}]
        body = c.post("/api/v1/predict/batch", json={"hardware": H100, "ops": ops}).json()
        assert [r["op_kind"] for r in body["results"]] == ["matmul", "rmsnorm", "allreduce"]
        too_many = c.post("/api/v1/predict/batch", json={"hardware": H100, "ops": [*ops, MATMUL]})
        assert too_many.status_code == 422 and "at most 3" in too_many.json()["detail"]
        bad = c.post("/api/v1/predict/batch", json={"hardware": H100, "ops": [MATMUL, {"kind": "x"}]})
        assert bad.status_code == 422 and "ops[1]" in bad.json()["detail"]


def test_batch_matches_single_predictions_and_columns(client: TestClient) -> None:
    ops = [MATMUL, {"kind": "softmax", "shape": [512, 1000], "dtype": "fp16"}, MATMUL,
           {"kind": "attention", "batch": 2, "heads": 8, "seq_q": 128, "seq_kv": 128, "head_dim": 64,
            "dtype": "bf16"}, {"kind": "softmax", "shape": [512, 1000], "dtype": "fp16"}]
    rows = client.post("/api/v1/predict/batch", json={"hardware": H100, "ops": ops}).json()
    assert rows["distinct_ops"] == 3 and len(rows["results"]) == 5 and rows["results"][0] == rows["results"][2]
    columns = client.post("/api/v1/predict/batch",
                          json={"hardware": H100, "ops": ops, "layout": "columns"}).json()["columns"]
    assert columns["op_kind"] == ["matmul", "softmax", "matmul", "attention", "softmax"]
    for i, row in enumerate(rows["results"]):
        assert columns["time_s"][i] == row["time_s"]
        assert columns["uncalibrated_interval_s"][i] == row["uncalibrated_interval_s"]
        assert {k: v[i] for k, v in columns["bytes_by_level"].items()} == row["bytes_by_level"]
        assert {k: v[i] for k, v in columns["schedule"].items() if v[i] > 0} == row["schedule"]
        # the compact batch space may pick a different tile than a single prediction's search
        single = client.post("/api/v1/predict", json={"hardware": H100, "op": ops[i]}).json()
        assert single["flops"] == row["flops"] and single["bytes_by_level"] == row["bytes_by_level"]
        assert 0.5 < single["time_s"] / row["time_s"] <= 1.0 + 1e-9


def test_body_size_limit(database_url: str) -> None:
    with make_client(database_url, max_body_bytes=2000) as c:
        ops = [MATMUL] * 100
        response = c.post("/api/v1/predict/batch", json={"hardware": H100, "ops": ops})
        assert response.status_code == 413


def test_search(client: TestClient) -> None:
    body = client.post("/api/v1/search", json={"hardware": H100, "op": MATMUL, "top_k": 3}).json()
    assert body["evaluated"] > 100 and len(body["top_k"]) == 3 and body["pareto"]
    assert "SMs" in body["explanation"] and body["best"]["time_s"] > 0


def test_writes_need_a_token(client: TestClient) -> None:
    run = {"hardware": H100, "op": MATMUL, "measured_time_s": 1e-4, "source": "unit"}
    assert client.post("/api/v1/runs", json=run).status_code == 401
    assert client.post("/api/v1/runs", json=run, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/api/v1/runs").json()["total"] == 0  # nothing was written
    assert client.post("/api/v1/runs", json=run, headers=AUTH).status_code == 201


def test_stored_tokens_and_revocation(client: TestClient) -> None:
    store = client.app.state.perfmodel.store  # type: ignore[attr-defined]
    _, plaintext = store.create_token("ci")
    run = {"hardware": H100, "op": MATMUL, "measured_time_s": 1e-4, "source": "unit"}
    assert client.post("/api/v1/runs", json=run, headers={"Authorization": f"Bearer {plaintext}"}).status_code == 201
    store.revoke_token("ci")
    assert client.post("/api/v1/runs", json=run, headers={"Authorization": f"Bearer {plaintext}"}).status_code == 401


def test_reads_can_require_a_token(database_url: str) -> None:
    with make_client(database_url, read_requires_token=True) as c:
        assert c.get("/api/v1/hardware").status_code == 401
        assert c.get("/api/v1/hardware", headers=AUTH).status_code == 200


def test_runs_lifecycle_and_filters(client: TestClient) -> None:
    runs = [{"hardware": H100, "op": MATMUL, "measured_time_s": 1e-4, "source": "bench", "tags": {"model": "a"}},
            {"hardware": H100, "op": {"kind": "rmsnorm", "shape": [64, 4096], "dtype": "bf16"},
             "measured_time_s": 5e-6, "source": "bench", "tags": {"model": "b"}},
            {"hardware": "nvidia-a100-sxm4-80gb", "op": MATMUL, "measured_time_s": 2e-4, "source": "trace"}]
    ids = client.post("/api/v1/runs/bulk", json=runs, headers=AUTH).json()["ids"]
    assert len(ids) == 3
    assert client.get("/api/v1/runs", params={"hardware": H100}).json()["total"] == 2
    assert client.get("/api/v1/runs", params={"op_kind": "rmsnorm"}).json()["total"] == 1
    assert client.get("/api/v1/runs", params={"source": "trace"}).json()["total"] == 1
    assert client.get("/api/v1/runs", params={"tag": "model:a"}).json()["total"] == 1
    page = client.get("/api/v1/runs", params={"limit": 2, "offset": 2}).json()
    assert page["total"] == 3 and len(page["items"]) == 1
    one = client.get(f"/api/v1/runs/{ids[0]}").json()
    assert one["op"]["m"] == 1024 and one["tags"] == {"model": "a"} and one["dtype"] == "bf16"
    assert client.delete(f"/api/v1/runs/{ids[0]}", headers=AUTH).status_code == 204
    assert client.get(f"/api/v1/runs/{ids[0]}").status_code == 404
    assert client.delete(f"/api/v1/runs/{ids[0]}", headers=AUTH).status_code == 404


def test_bulk_is_all_or_nothing(client: TestClient) -> None:
    good = {"hardware": H100, "op": MATMUL, "measured_time_s": 1e-4, "source": "x"}
    bad_op = {**good, "op": {"kind": "matmul", "m": 0, "n": 1, "k": 1, "dtype": "bf16"}}
    assert client.post("/api/v1/runs/bulk", json=[good, bad_op], headers=AUTH).status_code == 422
    unknown = {**good, "hardware": "nope"}
    assert client.post("/api/v1/runs/bulk", json=[good, unknown], headers=AUTH).status_code == 404
    negative = {**good, "measured_time_s": -1}
    assert client.post("/api/v1/runs/bulk", json=[good, negative], headers=AUTH).status_code == 422
    assert client.get("/api/v1/runs").json()["total"] == 0


def test_comparisons(client: TestClient) -> None:
    predicted = client.post("/api/v1/predict", json={"hardware": H100, "op": MATMUL}).json()["time_s"]
    runs = [{"hardware": H100, "op": MATMUL, "measured_time_s": predicted * 1.25, "source": "bench"},
            {"hardware": H100, "op": MATMUL, "measured_time_s": predicted / 1.25, "source": "bench"}]
    client.post("/api/v1/runs/bulk", json=runs, headers=AUTH)
    body = client.get("/api/v1/comparisons", params={"hardware": H100}).json()
    assert len(body["rows"]) == 2
    errors = sorted(r["error_percent"] for r in body["rows"])
    assert errors == pytest.approx([-20.0, 25.0])
    (summary,) = body["summary"]
    assert summary["op_kind"] == "matmul" and summary["count"] == 2
    assert summary["median_abs_error_percent"] == pytest.approx(22.5)


def test_custom_hardware_and_variants(client: TestClient) -> None:
    variant = {"base": H100, "id": "h100-hbm-x2", "overrides": {"levels.dram.bandwidth_bytes_per_s": "x2"}}
    assert client.post("/api/v1/hardware", json=variant).status_code == 401
    created = client.post("/api/v1/hardware", json=variant, headers=AUTH)
    assert created.status_code == 201, created.text
    assert created.json()["spec"]["derived_from"] == H100
    assert client.post("/api/v1/hardware", json=variant, headers=AUTH).status_code == 409
    bundled = {**variant, "id": "nvidia-a100-sxm4-80gb"}
    assert client.post("/api/v1/hardware", json=bundled, headers=AUTH).status_code == 409
    bad = {**variant, "id": "h100-bad", "overrides": {"levels.nope.bandwidth_bytes_per_s": "x2"}}
    assert client.post("/api/v1/hardware", json=bad, headers=AUTH).status_code == 422
    op = {"kind": "rmsnorm", "shape": [16384, 8192], "dtype": "bf16", "vector_width": 8}
    base = client.post("/api/v1/predict", json={"hardware": H100, "op": op}).json()["time_s"]
    fast = client.post("/api/v1/predict", json={"hardware": "h100-hbm-x2", "op": op}).json()["time_s"]
    assert fast < base
    ids = {i["id"] for i in client.get("/api/v1/hardware").json()["items"]}
    assert "h100-hbm-x2" in ids


def test_python_client(client: TestClient) -> None:
    pm = Client("http://testserver", token=TOKEN, transport=client._transport)  # type: ignore[attr-defined]
    assert any(h["id"] == H100 for h in pm.hardware())
    assert pm.predict(H100, MATMUL)["time_s"] > 0
    assert len(pm.predict_batch(H100, [MATMUL, MATMUL])) == 2
    assert len(pm.predict_columns(H100, [MATMUL, MATMUL])["time_s"]) == 2
    assert pm.search(H100, MATMUL, top_k=2)["top_k"]
    run = pm.add_run(H100, MATMUL, 1e-4, "client", {"k": "v"})
    assert pm.run(run["id"])["source"] == "client"
    assert pm.runs(tags={"k": "v"})["total"] == 1
    assert pm.comparisons(hardware=H100)["summary"]
    pm.delete_run(run["id"])
    with pytest.raises(ApiError) as error:
        pm.predict("nope", MATMUL)
    assert error.value.status == 404
    pm.close()


def test_calibration_fit_predict_and_compare(client: TestClient) -> None:
    """Runs 30 % slower than the model at every size: the calibration learns it; versions are kept."""
    shapes = [(64 * i, 1024, 512 * j) for i in (1, 2, 4, 8, 16) for j in (1, 2, 4, 8)]
    ops = [{"kind": "matmul", "m": m, "n": n, "k": k, "dtype": "bf16"} for m, n, k in shapes]
    model = client.post("/api/v1/predict/batch", json={"hardware": H100, "ops": ops}).json()["results"]
    runs = [{"hardware": H100, "op": op, "measured_time_s": 1.3 * r["time_s"], "source": "synthetic"}
            for op, r in zip(ops, model, strict=True)]
    assert client.post("/api/v1/runs/bulk", json=runs, headers=AUTH).status_code == 201
    request = {"hardware": H100, "filter": {"source": "synthetic"}}
    assert client.post("/api/v1/calibrations", json=request).status_code == 401
    first = calibrate(client, request, AUTH)
    assert first["runs_used"] == len(ops) and first["report"]
    second = calibrate(client, request, AUTH)
    assert second["id"] > first["id"]
    listed = client.get("/api/v1/calibrations", params={"hardware": H100}).json()["items"]
    assert [c["id"] for c in listed] == [first["id"], second["id"]]

    op = {"kind": "matmul", "m": 256, "n": 1024, "k": 2048, "dtype": "bf16"}
    plain = client.post("/api/v1/predict", json={"hardware": H100, "op": op}).json()
    calibrated = client.post("/api/v1/predict", json={"hardware": H100, "op": op, "calibration": "latest"}).json()
    assert calibrated["calibration"] == second["id"] and plain["calibration"] is None
    assert 1.15 < calibrated["time_s"] / plain["time_s"] < 1.45
    low, high = calibrated["interval_s"]
    assert low <= calibrated["time_s"] <= high and calibrated["in_calibrated_range"] is True
    by_id = client.post("/api/v1/predict", json={"hardware": H100, "op": op, "calibration": first["id"]}).json()
    assert by_id["calibration"] == first["id"]
    assert client.post("/api/v1/predict", json={"hardware": H100, "op": op, "calibration": 999}).status_code == 404
    other = client.post("/api/v1/predict", json={"hardware": "nvidia-a100-sxm4-80gb", "op": op,
                                                 "calibration": first["id"]})
    assert other.status_code == 422

    raw = client.get("/api/v1/comparisons", params={"hardware": H100}).json()["summary"][0]
    fitted = client.get("/api/v1/comparisons", params={"hardware": H100, "calibration": "latest"}).json()
    assert raw["bias_percent"] < -15 and abs(fitted["summary"][0]["bias_percent"]) < 5
    assert fitted["rows"][0]["calibration"] == second["id"]
    empty = client.post("/api/v1/calibrations", json={"hardware": H100, "filter": {"source": "nothing"}},
                        headers=AUTH)
    assert empty.status_code == 422 and "no stored runs" in empty.json()["detail"]


def test_a_calibration_predicts_in_the_space_it_was_fitted_in(client: TestClient) -> None:
    """A calibration of the fully searched model (as ``perfmodel measure`` makes) is applied to that model by
    /predict and /predict/batch, whatever space they would use otherwise: the same numbers as
    ``predict_calibrated``."""
    import numpy as np

    from perfmodel.calibration import fit_calibration, predict_calibrated

    shapes = [(m, n, k) for m in (1, 8, 64, 512) for n in (1024, 4096) for k in (1024, 4096)]
    ops = [{"kind": "matmul", "m": m, "n": n, "k": k, "dtype": "bf16"} for m, n, k in shapes]
    measured = [2e-6 * (1 + i) for i in range(len(ops))]  # not the model: the correction is not the identity
    fitted = fit_calibration(H100, list(zip(ops, measured, strict=True)), space="full")
    store = client.app.state.perfmodel.store  # type: ignore[attr-defined]
    calibration_id = store.add_calibration(H100, fitted.params, fitted.report, "full-space test")
    op = {"kind": "matmul", "m": 8, "n": 2048, "k": 2048, "dtype": "bf16"}
    expected = float(predict_calibrated(H100, [op], fitted).time_s[0])
    single = client.post("/api/v1/predict", json={"hardware": H100, "op": op, "calibration": calibration_id}).json()
    batch = client.post("/api/v1/predict/batch", json={"hardware": H100, "ops": [op], "space": "compact",
                                                       "calibration": calibration_id}).json()["results"]
    assert np.isclose(single["time_s"], expected, rtol=1e-9)
    assert np.isclose(batch[0]["time_s"], expected, rtol=1e-9)


TRACES = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "traces"


def test_trace_upload_runs_kernels_and_duplicates(client: TestClient) -> None:
    path = TRACES / "negative_queue_length_values_check__rank0.json.gz"  # record_shapes on, 6,080 kernels
    files = {"file": (path.name, path.read_bytes(), "application/gzip")}
    form = {"hardware": "nvidia-a100-sxm4-80gb"}
    assert client.post("/api/v1/traces", files=files, data=form).status_code == 401
    first = client.post("/api/v1/traces", files=files, data=form, headers=AUTH)
    assert first.status_code == 201, first.text
    summary = first.json()
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    device_events = [e for e in events if str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert summary["format"] == "pytorch_kineto" and not summary["duplicate"]
    assert summary["kernels"] == len(device_events)
    assert summary["runs_created"] > 0 and summary["matched_ops"] == summary["runs_created"]
    assert 0.0 <= summary["unmodelled_time_share"] < 1.0
    runs = client.get("/api/v1/runs", params={"hardware": "nvidia-a100-sxm4-80gb", "limit": 1000}).json()
    assert runs["total"] == summary["runs_created"]
    for kind in ("elementwise", "matmul", "reducescatter", "allgather", "allreduce", "alltoall"):
        of_kind = client.get("/api/v1/runs", params={"hardware": "nvidia-a100-sxm4-80gb", "op_kind": kind}).json()
        assert of_kind["total"] > 0, kind
    # the NCCL kernels of c10d::alltoall_base_ and allreduce_ are runs now (their nccl:all_to_all / nccl:all_reduce
    # annotations and distributedInfo.world_size give the collective); only the 5 SendRecv kernels with no op stay
    nccl = {u["reason"].split(": ")[0]: u["count"] for u in summary["unmodelled"] if u["name"].startswith("ncclKernel")}
    assert nccl == {"collective kernel (recognised by name), no op recorded for it": 5}
    again = client.post("/api/v1/traces", files=files, data=form, headers=AUTH)
    assert again.status_code == 200 and again.json()["duplicate"] and again.json()["id"] == summary["id"]
    assert client.get("/api/v1/runs", params={"hardware": "nvidia-a100-sxm4-80gb"}).json()["total"] == runs["total"]
    detail = client.get(f"/api/v1/traces/{summary['id']}", params={"kernel_limit": 100_000}).json()
    kernel_rows = [k for k in detail["kernel_rows"] if k["category"] == "kernel"]
    assert sum(k["instances"] for k in kernel_rows) == sum(1 for e in device_events if e["cat"].lower() == "kernel")
    durations = [k["duration_s"] for k in detail["kernel_rows"]]
    assert durations == sorted(durations, reverse=True)
    assert pytest.approx(sum(durations)) == summary["total_kernel_time_s"]
    assert pytest.approx(sum(durations), rel=1e-6) == sum(e["dur"] for e in device_events) * 1e-6
    assert [t["id"] for t in client.get("/api/v1/traces").json()["items"]] == [summary["id"]]


def test_trace_without_shapes_matches_only_what_its_kernels_tell(client: TestClient) -> None:
    """No Input Dims: convolutions stay unmodelled (saying record_shapes); library GEMM kernels are sized by their
    name's tile x grid with K assumed (confidence low), elementwise kernels by grid x block, kernels no rule names by
    their launch geometry (the pooling kernels: lower bounds), fills and host copies become runs; each run says where
    its work came from."""
    path = TRACES / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
    response = client.post("/api/v1/traces", files={"file": (path.name, path.read_bytes(), "application/gzip")},
                           data={"hardware": "nvidia-a100-sxm4-80gb"}, headers=AUTH)
    summary = response.json()
    assert response.status_code == 201 and summary["runs_created"] > 0
    assert 0.05 < summary["unmodelled_time_share"] < 0.3  # the unshaped GEMMs/convs; the pageable copies are runs
    assert any("record_shapes" in u["reason"] for u in summary["unmodelled"])
    runs = client.get("/api/v1/runs", params={"hardware": "nvidia-a100-sxm4-80gb", "limit": 1000}).json()["items"]
    assert len(runs) == summary["runs_created"]
    assert {r["op_kind"] for r in runs} == {"elementwise", "hostcopy", "matmul"}
    sources: dict[str, set[str]] = {r["op_kind"]: set() for r in runs}
    for r in runs:
        sources[r["op_kind"]].add(r["tags"]["match_source"])
    assert sources["matmul"] == {"GEMM tile x grid"}, sources
    assert sources["elementwise"] | sources["hostcopy"] == {"grid/block", "memcpy/memset", "launch geometry"}, sources


@pytest.mark.parametrize(("content", "reason"), [
    (b"", "empty"), (b"\x1f\x8b\x08\x00trunc", "truncated"), (b"name,value\n1,2\n", "unrecognised"),
])
def test_bad_trace_is_422_and_stores_no_runs(client: TestClient, content: bytes, reason: str) -> None:
    response = client.post("/api/v1/traces", files={"file": ("bad.json", content, "application/json")},
                           data={"hardware": H100}, headers=AUTH)
    assert response.status_code == 422 and response.json()["detail"].startswith("file:")
    assert reason in response.json()["detail"].lower()
    assert client.get("/api/v1/runs").json()["total"] == 0
    failed = client.get("/api/v1/traces").json()["items"]
    assert failed[-1]["status"] == "failed" and failed[-1]["warnings"]


def test_trace_upload_size_limit(database_url: str) -> None:
    with make_client(database_url, max_upload_bytes=1000) as c:
        response = c.post("/api/v1/traces", files={"file": ("big.json", b"{" + b" " * 5000 + b"}", "text/plain")},
                          data={"hardware": H100}, headers=AUTH)
        assert response.status_code == 413


def test_an_integer_beyond_64_bits_is_a_clear_error_not_a_crash(client: TestClient) -> None:
    """Found by schemathesis: orjson cannot key such an op, which then crashed the batch (500)."""
    body = '{"hardware": "%s", "ops": [{"": -9223372036854775809}, {"kind": "matmul", "m": %d, "n": 8, "k": 8}]}'
    response = client.post("/api/v1/predict/batch", content=body % (H100, 2**70),
                           headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert "ops[0]" in response.text or "kind" in response.text
