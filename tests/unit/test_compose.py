"""docker-compose.yml agrees with the code (Docker cannot run here: the file is parsed)."""

from __future__ import annotations

from pathlib import Path

import yaml

from api.main import API_PREFIX
from api.settings import Settings
from perfmodel.cli import app

ROOT = Path(__file__).resolve().parents[2]


def test_compose_service_matches_the_code() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    service = compose["services"]["perfmodel"]
    command = service["command"]
    assert command[:2] == ["perfmodel", "serve"]
    assert {c.name for c in app.registered_commands} >= {"serve"}
    port = command[command.index("--port") + 1]
    assert service["ports"] == [f"{port}:{port}"]
    env = service["environment"]
    assert env["PERFMODEL_DATABASE_URL"].startswith("postgresql+psycopg://")
    for key in env:
        field = key.removeprefix("PERFMODEL_").lower()
        assert field in Settings.model_fields, f"{key} is not a setting"
    user_pass_db = env["PERFMODEL_DATABASE_URL"].split("//")[1]
    db = compose["services"]["db"]
    assert f"{db['environment']['POSTGRES_USER']}:{db['environment']['POSTGRES_PASSWORD']}@db:5432/" \
           f"{db['environment']['POSTGRES_DB']}" == user_pass_db
    assert service["depends_on"]["db"]["condition"] == "service_healthy"
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert f"{API_PREFIX}/health" in " ".join(service["healthcheck"]["test"])
    assert "pgdata" in compose["volumes"]


def test_dockerfile_serves_on_the_compose_port() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "EXPOSE 8000" in dockerfile and '"serve"' in dockerfile
