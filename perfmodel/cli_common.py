"""What every CLI module shares: the error exit, the plain help group and the store (imports only typer)."""

from __future__ import annotations

from typing import Any, NoReturn

import typer
from typer import _click as click
from typer.core import TyperGroup


def fail(message: str) -> NoReturn:
    """Print ``error: message`` on stderr and exit with status 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


READ_ONLY_REFUSAL = ("PERFMODEL_READ_ONLY=1: this command writes to the store and is refused, nothing was changed "
                     "(the service refuses every write in this mode; unset it to write)")


def refuse_if_read_only() -> None:
    """Exit 2 before any work when ``PERFMODEL_READ_ONLY`` is set: the commands that write to the store (the
    calibration, ``measure``, ``trace --store``, tokens) honour it as the service's writes do."""
    from api.settings import Settings

    if Settings().read_only:
        fail(READ_ONLY_REFUSAL)


def open_store() -> Any:
    """The service's store (``PERFMODEL_DATABASE_URL`` or the embedded SQLite), migrated."""
    from api.settings import Settings
    from perfmodel.store import Store

    store = Store(Settings().resolved_database_url())
    store.migrate()
    return store


class PlainGroup(TyperGroup):
    """Click's plain help, listing each command with its whole first paragraph (click cuts it at the first
    '. ', so 'Predict one op, e.g.' was all predict said), wrapped to the terminal."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                text = command.short_help or (command.help or "").strip().split("\n\n")[0]
                rows.append((name, " ".join(text.split())))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
