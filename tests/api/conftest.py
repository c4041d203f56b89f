"""``database_url``: every API test runs on SQLite and on PostgreSQL (a fresh database each; logic, and the
check that no connection is left open, in tests/db_urls.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from db_urls import BACKENDS
from db_urls import database_url as fresh_database


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path) as url:
        yield url
