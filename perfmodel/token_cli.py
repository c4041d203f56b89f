"""`perfmodel token`: API tokens for writes, stored hashed and revocable."""

from __future__ import annotations

import typer

from perfmodel.cli_common import PlainGroup, fail, open_store, refuse_if_read_only

token_app = typer.Typer(help="API tokens for writes (stored hashed, revocable).", no_args_is_help=True,
                        cls=PlainGroup)


@token_app.command("create")
def token_create(name: str = typer.Option(..., "--name", help="who or what uses the token")) -> None:
    """Create a token; it is printed once and stored only as a hash."""
    from perfmodel.store.errors import StoreError

    refuse_if_read_only()
    try:
        row, plaintext = open_store().create_token(name)
    except StoreError as exc:  # a name the store refuses (1,000 characters, a NUL): it was a traceback
        fail(str(exc))
        return
    typer.echo(plaintext)
    typer.echo(f"token {row.name!r} created; use it as 'Authorization: Bearer <token>'", err=True)


@token_app.command("revoke")
def token_revoke(name: str = typer.Option(..., "--name")) -> None:
    refuse_if_read_only()
    if not open_store().revoke_token(name):
        fail(f"no active token named {name!r}")
    typer.echo(f"token {name!r} revoked")


@token_app.command("list")
def token_list() -> None:
    for row in open_store().list_tokens():
        state = f"revoked {row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "active"
        typer.echo(f"{row.name:<30} created {row.created_at:%Y-%m-%d %H:%M}  {state}")
