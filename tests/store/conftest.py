"""Store fixtures: every test runs on SQLite and on PostgreSQL (logic in tests/db_urls.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from db_urls import BACKENDS, database_url

from perfmodel.store import Store


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty (unmigrated) database."""
    with database_url(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A migrated store on a fresh database."""
    s = Store(store_url)
    s.migrate()
    try:
        yield s
    finally:
        s.dispose()
