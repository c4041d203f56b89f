"""Alembic environment: the URL or connection comes from the Alembic config (never from the environment)."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, text

from perfmodel.store.engine import make_engine
from perfmodel.store.models import Base

PG_MIGRATION_LOCK = 0x7065_7266  # pg_advisory_xact_lock key: one migrator at a time ("perf")

config = context.config
# logging from alembic.ini on the command line; never from Store.migrate() (no file), nor when told not to
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: set sqlalchemy.url in the Alembic config or pass -x url=...")
    return url


def _configure(connection: Connection) -> None:
    # transactional_ddl for SQLite too (Alembic's default there is a commit per migration, heads read once):
    # the engine emits BEGIN IMMEDIATE itself, so one upgrade is one locked transaction from reading the
    # version to the last migration, and a second migrator cannot slip in between two steps (seen in CI:
    # "table already exists" from a process that ran a migration another had just committed)
    context.configure(connection=connection, target_metadata=Base.metadata, transactional_ddl=True,
                      render_as_batch=connection.dialect.name == "sqlite", compare_type=True)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_MIGRATION_LOCK})
        context.run_migrations()


def run_offline() -> None:
    context.configure(url=_url(), target_metadata=Base.metadata, literal_binds=True,
                      dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    given = config.attributes.get("connection")
    if given is not None:
        _configure(given)
        return
    engine = make_engine(_url(), migrations=True)
    try:
        with engine.connect() as connection:
            _configure(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
