"""Database URLs for tests on SQLite and PostgreSQL, shared by tests/store and tests/api.

PostgreSQL: a fresh database ``perfmodel_test_<random>`` on the server at ``PERFMODEL_TEST_POSTGRES``
(default ``postgresql://postgres@127.0.0.1:5432/test``, trust auth), dropped afterwards. An unreachable
server FAILS the test (CI has one); it is never skipped. A test that leaves a connection open (an engine not
disposed) fails at teardown: pg_stat_activity is counted before the drop.

    from db_urls import BACKENDS, database_url

    @pytest.fixture(params=BACKENDS)
    def db_url(request, tmp_path):
        with database_url(request.param, tmp_path) as url:
            yield url
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

BACKENDS = ("sqlite", "postgresql")
CLOSE_WAIT_S = 5.0  # a backend leaves pg_stat_activity shortly after its client disconnects
POSTGRES_ADMIN_URL = os.environ.get("PERFMODEL_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@contextmanager
def sqlite_url(directory: Path) -> Iterator[str]:
    """A SQLite database file in ``directory`` (the caller's tmp_path)."""
    yield f"sqlite:///{(directory / f'perfmodel_{secrets.token_hex(4)}.sqlite3').resolve()}"


def _admin() -> psycopg.Connection[tuple[object, ...]]:
    try:
        return psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is not reachable at {POSTGRES_ADMIN_URL} (set PERFMODEL_TEST_POSTGRES): {exc}")


@contextmanager
def postgresql_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test (or one session); dropped with FORCE afterwards."""
    name = f"perfmodel_test_{secrets.token_hex(6)}"
    with _admin() as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_url(POSTGRES_ADMIN_URL).set(drivername="postgresql+psycopg", database=name)
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with _admin() as admin:
            left_open = _open_connections(admin, name)
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
    if left_open:
        # dropping WITH (FORCE) would cut them, leaving the test process's sockets in CLOSE-WAIT
        pytest.fail(f"{left_open} connection(s) to {name} still open after the test: dispose every engine "
                    "(Store.dispose(), or run the app's lifespan: `with TestClient(app)`)")


def _open_connections(admin: psycopg.Connection[tuple[object, ...]], name: str) -> int:
    """Backends still connected to database ``name`` (pg_stat_activity), waiting up to CLOSE_WAIT_S for ones
    whose client has just closed its socket."""
    deadline_s = time.monotonic() + CLOSE_WAIT_S
    while True:
        row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)).fetchone()
        count = int(row[0]) if row else 0  # type: ignore[call-overload]
        if count == 0 or time.monotonic() > deadline_s:
            return count
        time.sleep(0.05)


@contextmanager
def database_url(backend: str, directory: Path) -> Iterator[str]:
    """A fresh empty database of ``backend`` ("sqlite" or "postgresql")."""
    if backend == "sqlite":
        with sqlite_url(directory) as url:
            yield url
    elif backend == "postgresql":
        with postgresql_url() as url:
            yield url
    else:
        raise ValueError(f"backend {backend!r}: expected one of {BACKENDS}")


@contextmanager
def database_urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """One fresh database per backend, e.g. for a session-scoped fixture: ``{"sqlite": url, "postgresql": url}``."""
    with ExitStack() as stack:
        yield {backend: stack.enter_context(database_url(backend, tmp_path_factory.mktemp(backend)))
               for backend in BACKENDS}
