"""Engines: SQLite (WAL, foreign keys, busy timeout, ``BEGIN IMMEDIATE`` for writes) or PostgreSQL (psycopg 3)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.pool import NullPool

from perfmodel.store.errors import StoreError

SQLITE_BUSY_TIMEOUT_S = 30.0
WRITE_OPTION = "perfmodel_write"  # execution option: this transaction writes (SQLite takes the write lock at BEGIN)


def parse_url(url: str | URL) -> URL:
    try:
        parsed = make_url(url)
    except Exception as exc:  # sqlalchemy raises ArgumentError with a terse message
        raise StoreError(f"database url {str(url)!r}: not a SQLAlchemy URL ({exc})") from exc
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StoreError(f"database url: backend {parsed.get_backend_name()!r} is not supported; "
                         "use sqlite:///path or postgresql+psycopg://...")
    return parsed


def make_engine(url: str | URL, *, migrations: bool = False) -> Engine:
    """One engine per store; ``migrations=True`` gives a pool-less engine with SQLite foreign keys off, since
    Alembic batch mode recreates tables and a DROP TABLE with foreign keys on would cascade into child tables."""
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, migrations=migrations)
    if migrations:
        return create_engine(parsed, poolclass=NullPool)
    return create_engine(parsed, pool_pre_ping=True, pool_size=10, max_overflow=20)


def _sqlite_engine(url: URL, *, migrations: bool) -> Engine:
    database = url.database or ""
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_S}}
    if migrations:
        kwargs["poolclass"] = NullPool
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        # take transaction control away from the sqlite3 module: SQLAlchemy's "begin" event emits BEGIN below
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            if database not in ("", ":memory:"):
                enable_wal(cursor)
            cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
            cursor.execute(f"PRAGMA foreign_keys={'OFF' if migrations else 'ON'}")
            cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def on_begin(conn: Connection) -> None:
        # a writer (and a migrator, always) takes the lock up front, so it waits (busy timeout) instead of
        # failing on a stale snapshot, and concurrent migrators run one after the other
        write = migrations or conn.get_execution_options().get(WRITE_OPTION)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def enable_wal(cursor: Any, timeout_s: float = SQLITE_BUSY_TIMEOUT_S) -> None:
    """``PRAGMA journal_mode=WAL``, retried while the database is locked. Switching a new database to WAL
    upgrades a read lock to a write lock, where SQLite returns SQLITE_BUSY at once instead of calling the busy
    handler: two processes opening a fresh file together would otherwise fail (seen in CI, reproduced)."""
    deadline_s = time.monotonic() + timeout_s
    pause_s = 0.002
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause_s > deadline_s:
                raise
        time.sleep(pause_s)
        pause_s = min(pause_s * 2, 0.1)
