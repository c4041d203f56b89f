"""``perfmodel token create`` with a name the store refuses (qa17): it printed a traceback (exit 1); now a one-line
error and exit 2, nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfmodel.cli import app
from perfmodel.cli_common import open_store


def test_an_overlong_token_name_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFMODEL_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("PERFMODEL_DATABASE_URL", raising=False)
    monkeypatch.delenv("PERFMODEL_READ_ONLY", raising=False)
    result = CliRunner().invoke(app, ["token", "create", "--name", "x" * 1000])
    assert result.exit_code == 2, result.output
    assert "at most 100" in result.stderr and "Traceback" not in result.output
    assert open_store().list_tokens() == []
