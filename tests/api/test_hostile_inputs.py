"""Hostile input gets a clear 4xx and loses nothing stored: chunked bodies past the limit, NUL and lone
surrogates in text, gzip bombs and slow parses; the OpenAPI declares what the service answers; security
headers; read-only mode."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from perfmodel import __version__

TOKEN = "hostile-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
A100 = "nvidia-a100-sxm4-80gb"
TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "host_cpu_linear_train.pt.trace.json.gz"
MATMUL = {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp16"}


def make_client(url: str, **overrides: Any) -> TestClient:
    return TestClient(create_app(Settings(database_url=url, api_token=TOKEN, **overrides)))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'perfmodel.sqlite3'}"


def _upload(client: TestClient, content: bytes, name: str = "t.json.gz") -> Any:
    return client.post("/api/v1/traces", files={"file": (name, content, "application/gzip")},
                       data={"hardware": A100}, headers=AUTH)


def _stored(client: TestClient) -> tuple[int, int]:
    """(parsed traces, runs) as the API lists them."""
    traces = [t for t in client.get("/api/v1/traces").json()["items"] if t["status"] == "parsed"]
    return len(traces), client.get("/api/v1/runs").json()["total"]


def _bomb(spaces_mib: int) -> bytes:
    """A gzip of ``{"traceEvents":[`` and ``spaces_mib`` MiB of spaces (about 1,000:1)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    return (packer.compress(b'{"traceEvents":[') + b"".join(packer.compress(block) for _ in range(spaces_mib))
            + packer.flush())


@dataclass
class Seeded:
    client: TestClient
    stored: tuple[int, int]  # (parsed traces, runs) before the hostile request


@pytest.fixture
def seeded(database_url: str) -> Iterator[Seeded]:
    """A client whose store already holds one real trace and its runs."""
    with make_client(database_url, max_upload_bytes=200_000, max_body_bytes=20_000) as client:
        first = _upload(client, TRACE.read_bytes(), TRACE.name)
        assert first.status_code == 201 and first.json()["runs_created"] > 0
        assert _stored(client) == (1, first.json()["runs_created"])
        yield Seeded(client, _stored(client))


def _chunks(*parts: bytes) -> Iterator[bytes]:
    yield from parts


def test_chunked_bodies_past_the_limit_are_413_and_store_nothing(seeded: Seeded) -> None:
    head = (b'--b\r\nContent-Disposition: form-data; name="hardware"\r\n\r\n' + A100.encode()
            + b'\r\n--b\r\nContent-Disposition: form-data; name="file"; filename="x.json"\r\n\r\n')
    upload = seeded.client.post("/api/v1/traces", content=_chunks(head, *[b" " * 50_000] * 6, b"\r\n--b--\r\n"),
                         headers={**AUTH, "Content-Type": "multipart/form-data; boundary=b"})
    assert upload.status_code == 413, upload.text
    assert "PERFMODEL_MAX_UPLOAD_BYTES" in upload.json()["detail"]
    body = seeded.client.post("/api/v1/runs/bulk", content=_chunks(b"[", *[b" " * 5_000] * 6, b"]"),
                       headers={**AUTH, "Content-Type": "application/json"})
    assert body.status_code == 413 and "PERFMODEL_MAX_BODY_BYTES" in body.json()["detail"]
    assert body.json()["model_version"] == __version__  # every error's shape (qa14: this one lacked it)
    assert _stored(seeded.client) == seeded.stored


@pytest.mark.parametrize(("change", "field"), [
    ({"tags": {"k": "a\x00b"}}, "tags.k"), ({"tags": {"k\x00": "v"}}, "tags"), ({"source": "s\x00"}, "source"),
    ({"source": "\ud800"}, "source"), ({"tags": {"": "v"}}, "tags"), ({"tags": {"k": "v" * 401}}, "tags.k"),
])
def test_text_the_store_cannot_hold_is_422_not_409(seeded: Seeded, change: dict[str, Any], field: str) -> None:
    run = {"hardware": A100, "op": MATMUL, "measured_time_s": 1e-5, "source": "s", **change}
    headers = {**AUTH, "Content-Type": "application/json"}  # json.dumps escapes a lone surrogate, httpx cannot
    response = seeded.client.post("/api/v1/runs", content=json.dumps(run), headers=headers)
    assert response.status_code == 422, response.text
    assert response.json()["field"].startswith(field)
    bulk = seeded.client.post("/api/v1/runs/bulk", content=json.dumps([{**run, "tags": {}, "source": "ok"}, run]),
                              headers=headers)
    assert bulk.status_code == 422
    assert _stored(seeded.client) == seeded.stored


def test_a_gzip_bomb_is_cut_at_its_ratio_with_a_413(seeded: Seeded) -> None:
    bomb = _bomb(128)  # 128 MiB of spaces in ~130 kB: past the 64 MiB floor of the ratio limit
    response = _upload(seeded.client, bomb)
    assert response.status_code == 413, response.text
    detail = response.json()["detail"]
    assert "PERFMODEL_MAX_TRACE_GZIP_RATIO" in detail and f"{len(bomb)} gzip bytes" in detail
    assert _stored(seeded.client) == seeded.stored
    failed = seeded.client.get("/api/v1/traces").json()["items"][-1]
    assert failed["status"] == "failed" and "once decompressed" in failed["warnings"][0]


def test_decompressed_size_and_parse_time_limits_name_their_setting(database_url: str) -> None:
    content = TRACE.read_bytes()  # 9.5 kB, 117 kB decompressed
    with make_client(database_url, max_trace_bytes=50_000) as client:
        response = _upload(client, content)
        assert response.status_code == 413 and "PERFMODEL_MAX_TRACE_BYTES" in response.json()["detail"]
        assert "50000 bytes" in response.json()["detail"]
    with make_client(database_url, max_parse_s=1e-9) as client:
        response = _upload(client, content)
        assert response.status_code == 422 and "PERFMODEL_MAX_PARSE_S" in response.json()["detail"]
    with make_client(database_url) as client:  # the defaults take a real trace
        response = _upload(client, content)
        assert response.status_code == 201
        assert _stored(client) == (1, response.json()["runs_created"])


def test_openapi_declares_400_and_bearer_only_on_writes(sqlite_url: str) -> None:
    with make_client(sqlite_url) as client:
        spec = client.get("/openapi.json").json()
        malformed = client.post("/api/v1/traces", content=b"garbage", headers={
            **AUTH, "Content-Type": "multipart/form-data; boundary=b"})
    assert malformed.status_code == 400 and malformed.json()["detail"]
    assert "400" in spec["paths"]["/api/v1/traces"]["post"]["responses"]
    operations = [(path, method, op) for path, item in spec["paths"].items() for method, op in item.items()]
    for path, method, op in operations:
        if "requestBody" in op:
            assert "400" in op["responses"], (method, path)
        if method in ("get", "head"):
            assert "security" not in op and "401" not in op["responses"], (method, path)
    writes = {(path, method) for path, method, op in operations if op.get("security")}
    assert {("/api/v1/runs", "post"), ("/api/v1/traces", "post"), ("/api/v1/runs/{run_id}", "delete")} <= writes
    assert ("/api/v1/predict", "post") not in writes
    assert all("403" in spec["paths"][p][m]["responses"] for p, m in writes)
    assert set(spec["components"]["securitySchemes"]) == {"HTTPBearer"}
    with make_client(sqlite_url, read_requires_token=True) as client:
        guarded = client.get("/openapi.json").json()
        assert guarded["paths"]["/api/v1/runs"]["get"]["security"] == [{"HTTPBearer": []}]
        assert "401" in guarded["paths"]["/api/v1/runs"]["get"]["responses"]
        assert "security" not in guarded["paths"]["/api/v1/health"]["get"]
        assert client.get("/api/v1/runs").status_code == 401
        assert client.get("/api/v1/runs", headers=AUTH).status_code == 200


def test_security_headers(sqlite_url: str) -> None:
    with make_client(sqlite_url) as client:
        for path in ("/", "/upload", "/runs"):
            page = client.get(path)
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
            policy = page.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in policy and "script-src 'self';" in policy
            assert "unsafe-eval" not in policy
            assert page.headers["x-content-type-options"] == "nosniff"
            assert page.headers["referrer-policy"] == "same-origin"
            assert page.headers["x-frame-options"] == "DENY"
        api = client.get("/api/v1/health")
        assert api.headers["x-content-type-options"] == "nosniff"
        assert "content-security-policy" not in api.headers


def test_read_only_mode_refuses_every_write_and_says_so(database_url: str) -> None:
    with make_client(database_url) as client:
        assert _upload(client, TRACE.read_bytes(), TRACE.name).status_code == 201
        spec = client.get("/openapi.json").json()
        before = _stored(client)
    writes = [(path, method) for path, item in spec["paths"].items() for method, op in item.items()
              if op.get("security")]
    assert len(writes) >= 6
    with make_client(database_url, read_only=True) as client:
        for path, method in writes:
            url = path.replace("{run_id}", "1").replace("{job_id}", "1").replace("{hardware_id}", A100)
            response = client.request(method.upper(), url, json={}, headers=AUTH)
            assert response.status_code == 403, (method, path, response.text)
            assert "PERFMODEL_READ_ONLY" in response.json()["detail"]
        assert _upload(client, TRACE.read_bytes(), "again.json.gz").status_code == 403
        assert _stored(client) == before
        assert client.get("/api/v1/runs/1").status_code == 200
        page = client.get("/upload")
        assert page.status_code == 200 and "read-only-notice" in page.text and "PERFMODEL_READ_ONLY=1" in page.text
    with make_client(database_url) as client:
        assert "read-only-notice" not in client.get("/upload").text


def test_trace_form_text_the_store_cannot_hold(seeded: Seeded) -> None:
    """A NUL in ``source`` is a 422; in the file name (only a label) it is replaced and the trace stored."""
    content = (TRACE.parent / "host_cpu_conv_train.pt.trace.json.gz").read_bytes()
    response = seeded.client.post("/api/v1/traces", files={"file": ("x.json.gz", content, "application/gzip")},
                                  data={"hardware": A100, "source": "prof\x00iler"}, headers=AUTH)
    assert response.status_code == 422 and response.json()["detail"].startswith("source:")
    assert _stored(seeded.client) == seeded.stored
    body = (b'--b\r\nContent-Disposition: form-data; name="hardware"\r\n\r\n' + A100.encode() + b'\r\n--b\r\n'
            b'Content-Disposition: form-data; name="file"; filename="a\x00b.json.gz"\r\n\r\n' + content
            + b"\r\n--b--\r\n")
    named = seeded.client.post("/api/v1/traces", content=body,
                               headers={**AUTH, "Content-Type": "multipart/form-data; boundary=b"})
    assert named.status_code == 201, named.text
    assert named.json()["filename"] == "a\ufffdb.json.gz"


def test_malformed_json_answers_what_the_openapi_says(sqlite_url: str) -> None:
    """Bytes that are not UTF-8 (a gzip sent as JSON) are the documented 400; JSON text with a syntax error is a
    422 naming the character, and the 400's description says so (it promised a 400 for both)."""
    with make_client(sqlite_url) as client:
        description = client.get("/openapi.json").json()["paths"]["/api/v1/predict"]["post"]["responses"]["400"]
        gzipped = client.post("/api/v1/predict", content=zlib.compress(b'{"hardware": 1}'),
                              headers={"Content-Type": "application/json"})
        syntax = client.post("/api/v1/predict", content=b'{"hardware":', headers={"Content-Type": "application/json"})
    assert gzipped.status_code == 400 and gzipped.json()["detail"]
    assert syntax.status_code == 422 and "character" in syntax.json()["detail"]
    assert "422" in description["description"] and "UTF-8" in description["description"]


def test_nul_in_calibration_notes_is_a_422_before_any_fit(sqlite_url: str) -> None:
    """The notes are stored with the calibration: a NUL there was accepted (202), fitted, then the job failed at
    "storing". Now the request is refused up front and no job is queued."""
    with make_client(sqlite_url) as client:
        refused = client.post("/api/v1/calibrations", json={"hardware": A100, "notes": "a\u0000b"}, headers=AUTH)
        jobs = client.get("/api/v1/jobs").json()["items"]
    assert refused.status_code == 422 and refused.json()["field"] == "notes", refused.text
    assert jobs == []
