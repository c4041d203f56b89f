"""Alembic, driven from Python: the config is built in code, so it works wherever the package is installed."""

from __future__ import annotations

import threading
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection
from sqlalchemy.engine import URL

from perfmodel.store.engine import parse_url

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
HEAD = "head"
# Alembic's ``context`` and ``op`` are process-wide proxies: one Alembic command at a time per process.
# Across processes, env.py serialises migrators (PostgreSQL advisory lock, SQLite BEGIN IMMEDIATE).
ALEMBIC_LOCK = threading.RLock()


def migrations_config(url: str | URL, connection: Connection | None = None) -> Config:
    """An Alembic config for ``url`` (``script_location`` = the bundled migrations folder). env.py takes the
    connection from ``config.attributes["connection"]`` when given, else it connects to ``sqlalchemy.url``."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    rendered = parse_url(url).render_as_string(hide_password=False)
    config.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))  # ConfigParser interpolation
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(url: str | URL, revision: str = HEAD) -> None:
    with ALEMBIC_LOCK:
        command.upgrade(migrations_config(url), revision)


def downgrade(url: str | URL, revision: str) -> None:
    with ALEMBIC_LOCK:
        command.downgrade(migrations_config(url), revision)
