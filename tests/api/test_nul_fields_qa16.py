"""A NUL in any free text a custom device stores (its name, vendor, unit name, an engine's or a level's name)
is a 422 naming the field, on SQLite and PostgreSQL, as a NUL in a run's tag or a calibration's notes is:
``check_json`` now applies ``storable`` (the tags' check) to every string in a JSON column (issue 22, qa16)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from api.settings import Settings
from perfmodel.store.base import check_json
from perfmodel.store.errors import InvalidValue

TOKEN = "qa16-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
A100 = "nvidia-a100-sxm4-80gb"


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(database_url=database_url, api_token=TOKEN))) as c:
        yield c


def _variant(client: TestClient, device_id: str, overrides: str) -> Any:
    body = f'{{"base": "{A100}", "id": "{device_id}", "overrides": {overrides}}}'
    return client.post("/api/v1/hardware", content=body.encode(), headers=AUTH)


def _full_spec(client: TestClient, device_id: str) -> dict[str, Any]:
    spec: dict[str, Any] = client.get(f"/api/v1/hardware/{A100}").json()["spec"]
    spec.update(id=device_id, derived_from=None, overrides=None)
    return spec


@pytest.mark.parametrize("path", ["name", "vendor", "unit_name", "engines.0.name", "levels.1.name"])
def test_a_nul_in_a_custom_devices_text_is_a_422_naming_the_field(client: TestClient, path: str) -> None:
    spec = _full_spec(client, "x-nul")
    *parents, last = path.split(".")
    where: Any = spec
    for part in parents:
        where = where[int(part)] if part.isdigit() else where[part]
    where[last] = f"a\x00{where[last]}"
    response = client.post("/api/v1/hardware", json=spec, headers=AUTH)
    assert response.status_code == 422, response.text  # it was a 201: stored, read back and rendered
    assert response.json()["field"] == f"spec.{path}", response.text
    assert "NUL" in response.json()["detail"]
    assert client.get("/api/v1/hardware/x-nul").status_code == 404  # nothing stored
    assert client.post("/api/v1/hardware", json=_full_spec(client, "x-nul"), headers=AUTH).status_code == 201


def test_a_nul_in_a_variants_override_names_it(client: TestClient) -> None:
    response = _variant(client, "x-nul", '{"name": "a\\u0000b"}')
    assert response.status_code == 422, response.text  # it was a 201 (the name quotes the overrides)
    assert response.json()["field"] == "spec.overrides.name", response.text
    assert client.get("/api/v1/hardware/x-nul").status_code == 404


def test_a_nul_in_a_device_id_a_tag_or_notes_stays_a_422(client: TestClient) -> None:
    assert _variant(client, "x\\u0000y", '{"name": "n"}').json()["field"] == "id"
    run = {"hardware": A100, "op": {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp16"},
           "measured_time_s": 1e-5, "source": "x", "tags": {"commit": "a\x00b"}}
    response = client.post("/api/v1/runs", json=run, headers=AUTH)
    assert response.status_code == 422 and "tags" in response.json()["field"], response.text
    response = client.post("/api/v1/calibrations", json={"hardware": A100, "notes": "a\x00b"}, headers=AUTH)
    assert response.status_code == 422 and "notes" in response.json()["field"], response.text


def test_check_json_names_the_nul_and_leaves_clean_json_alone() -> None:
    check_json("spec", {"name": "a\\u0000b", "k": [1, "x"]})  # a literal backslash-u0000 is storable text
    for value, where in (({"a": [1, {"b": "x\x00"}]}, "spec.a.1.b"), ({"a": {"k\x00": 1}}, "spec.a (a key)"),
                         ({"a": "\ud800"}, "spec.a")):
        with pytest.raises(InvalidValue, match=rf"^{where.replace('(', '[(]').replace(')', '[)]')}: NUL"):
            check_json("spec", value)
