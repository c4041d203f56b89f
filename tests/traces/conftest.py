"""Fixtures shared by the trace tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture()
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh SQLite database for the command line (``PERFMODEL_DATABASE_URL``); returns its folder."""
    monkeypatch.setenv("PERFMODEL_DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite3'}")
    return tmp_path
