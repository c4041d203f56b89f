"""Tags on trace uploads through the API: set on upload, shown by GET /traces, chosen by in a history."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.compare.conftest import HTA_0, HTA_1, trace_path
from tests.compare.test_compare_api import AUTH, client  # noqa: F401 - the fixture

A100 = "nvidia-a100-sxm4-80gb"


def _upload(c: TestClient, name: str, tags: str) -> int:
    path = trace_path(name)
    response = c.post("/api/v1/traces", files={"file": (path.name, path.read_bytes(), "application/gzip")},
                      data={"hardware": A100, "tags": tags}, headers=AUTH)
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


def test_tags_set_on_upload_and_used_by_history(client: TestClient) -> None:  # noqa: F811
    base = _upload(client, HTA_0, "commit=aaa111, environment=silicon, cuda=12.4")
    new = _upload(client, HTA_1, '{"commit": "bbb222", "environment": "silicon"}')
    items = client.get("/api/v1/traces").json()["items"]
    assert [i["tags"] for i in items] == [{"commit": "aaa111", "environment": "silicon", "cuda": "12.4"},
                                          {"commit": "bbb222", "environment": "silicon"}]
    by_tags = client.post("/api/v1/trace-diffs/history", json={"tags": {"environment": "silicon"}})
    assert by_tags.status_code == 200, by_tags.text
    data = by_tags.json()
    assert data["traces"] == [base, new]
    assert [label["tags"]["commit"] for label in data["labels"]] == ["aaa111", "bbb222"]
    none = client.post("/api/v1/trace-diffs/history", json={"tags": {"environment": "fpga"}})
    assert none.status_code == 422 and "0 parsed trace(s)" in none.json()["detail"]


def test_bad_tags_are_refused_with_the_reason(client: TestClient) -> None:  # noqa: F811
    path = trace_path(HTA_0)
    for tags, message in (("environment=cloud", "expected one of silicon"), ("commit", "expected key=value"),
                          ("{bad", "malformed JSON")):
        response = client.post("/api/v1/traces", files={"file": (path.name, path.read_bytes(), "application/gzip")},
                               data={"hardware": A100, "tags": tags}, headers=AUTH)
        assert response.status_code == 422 and message in response.text, response.text
    both = client.post("/api/v1/trace-diffs/history", json={"traces": [1, 2], "tags": {"commit": "x"}})
    assert both.status_code == 422


def test_tags_shown_in_the_uploads_table_and_the_trace_picker(client: TestClient) -> None:  # noqa: F811
    _upload(client, HTA_0, "environment=fpga, commit=c0ffee")
    upload_page = client.get("/upload").text
    assert "commit=c0ffee environment=fpga" in upload_page and 'id="upload-tags"' in upload_page
    assert "commit=c0ffee environment=fpga" in client.get("/trace-diff").text


def test_history_page_by_tags(client: TestClient) -> None:  # noqa: F811
    base = _upload(client, HTA_0, "commit=aaa111, environment=simulator")
    new = _upload(client, HTA_1, "commit=bbb222, environment=simulator")
    page = client.get("/trace-history", params={"tags": "environment=simulator"})
    assert page.status_code == 200, page.text
    assert f"#{base} commit=aaa111 environment=simulator" in page.text and f"#{new} commit=bbb222" in page.text
    assert page.text.count('class="chart"') >= 1  # one chart per op, measured beside the model
    assert client.get("/trace-history", params={"traces": "x"}).status_code == 422
    assert client.get("/trace-history", params={"tags": "environment=fpga"}).status_code == 422
    assert client.get("/trace-history").status_code == 200  # the form alone
