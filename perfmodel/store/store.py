"""``Store``: the one object the service holds. Every method is one session and, for writes, one transaction."""

from __future__ import annotations

from alembic.migration import MigrationContext

from perfmodel.store.hardware_repo import HardwareRepo
from perfmodel.store.jobs_repo import JobsRepo
from perfmodel.store.kernels_repo import KernelsRepo
from perfmodel.store.migrate import HEAD, upgrade
from perfmodel.store.runs_repo import RunsRepo
from perfmodel.store.sweeps_repo import SweepsRepo
from perfmodel.store.tokens_repo import TokensRepo
from perfmodel.store.traces_repo import TracesRepo


class Store(HardwareRepo, RunsRepo, TokensRepo, TracesRepo, KernelsRepo, SweepsRepo, JobsRepo):
    """``Store("sqlite:///path")`` or ``Store("postgresql+psycopg://user@host/db")``; call ``migrate()`` once
    at start-up. Safe to share between threads."""

    def migrate(self, revision: str = HEAD) -> None:
        """Alembic ``upgrade head`` (the schema is only ever made by the migrations). Safe to call from several
        threads or processes at once: migrators run one after the other, and the later ones find nothing to do."""
        upgrade(self.url, revision)

    def current_revision(self) -> str | None:
        """The Alembic revision the database is at (None before the first migration)."""
        with self.engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
