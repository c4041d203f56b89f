"""API tokens: the plaintext is shown once; only its SHA-256 is stored."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from sqlalchemy import select, update

from perfmodel.store.base import StoreBase, check_str, storable
from perfmodel.store.errors import StoreError
from perfmodel.store.models import TokenModel, utcnow
from perfmodel.store.rows import TokenRow

TOKEN_PREFIX = "pm_"


def token_sha256(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


def _row(model: TokenModel) -> TokenRow:
    return TokenRow(id=model.id, name=model.name, created_at=model.created_at, revoked_at=model.revoked_at)


class TokensRepo(StoreBase):
    def create_token(self, name: str) -> tuple[TokenRow, str]:
        """A new token and its plaintext (``pm_`` + 43 url-safe characters); names are unique among active tokens."""
        check_str("name", name, 100)
        plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._write(f"an active token named {name!r} already exists") as session:
            active = select(TokenModel.id).where(TokenModel.name == name, TokenModel.revoked_at.is_(None))
            if session.scalar(active) is not None:
                raise StoreError(f"an active token named {name!r} already exists")
            model = TokenModel(name=name, token_sha256=token_sha256(plaintext))
            session.add(model)
            session.flush()
            return _row(model), plaintext

    def verify_token(self, plaintext: str) -> TokenRow | None:
        """The active token with this plaintext, else None. Looked up by hash: no plaintext comparison at all."""
        if not plaintext or not storable(plaintext):
            return None
        digest = token_sha256(plaintext)
        with self._read() as session:
            model = session.scalar(select(TokenModel).where(TokenModel.token_sha256 == digest))
            if model is None or model.revoked_at is not None or not hmac.compare_digest(model.token_sha256, digest):
                return None
            return _row(model)

    def revoke_token(self, name: str) -> bool:
        """Revoke the active token named ``name``; False if there is none."""
        if not storable(name):
            return False
        with self._write() as session:
            result = session.execute(update(TokenModel)
                                     .where(TokenModel.name == name, TokenModel.revoked_at.is_(None))
                                     .values(revoked_at=utcnow()))
            return bool(getattr(result, "rowcount", 0))

    def list_tokens(self) -> list[TokenRow]:
        """Every token, revoked ones included, by id (never the plaintext, which is not stored)."""
        with self._read() as session:
            return [_row(m) for m in session.scalars(select(TokenModel).order_by(TokenModel.id))]
