"""Dependencies: the app state, and the bearer-token checks for writes (and reads if configured).

Writes declare bearer security (``HTTPBearer``) in the OpenAPI. Reads take the header through a scheme of
their own (``BearerForReads``) that ``api.main`` turns into ``HTTPBearer`` when reads need a token and
removes when they are open, so an open read does not claim to need one.
"""

from __future__ import annotations

import hmac

from fastapi import Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.state import AppState

bearer = HTTPBearer(auto_error=False)
READ_SCHEME = "BearerForReads"
read_bearer = HTTPBearer(auto_error=False, scheme_name=READ_SCHEME)
READ_ONLY_DETAIL = "the service is read-only (PERFMODEL_READ_ONLY=1): writes are refused, nothing was changed"


async def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.perfmodel
    return state


def token_valid(state: AppState, token: str | None) -> bool:
    """The configured token (compared in constant time) or an active stored one."""
    if not token:
        return False
    configured = state.settings.api_token
    if configured and hmac.compare_digest(token.encode(), configured.encode()):
        return True
    return state.store.verify_token(token) is not None


def bearer_token(request: Request) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def require_write(state: AppState = Depends(get_state),
                  credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    """Every write needs ``Authorization: Bearer <token>``; anything else is a 401, never a write. In read-only
    mode every write is a 403 that says so, token or not."""
    if state.settings.read_only:
        raise HTTPException(status.HTTP_403_FORBIDDEN, READ_ONLY_DETAIL)
    scheme_ok = credentials is not None and credentials.scheme.lower() == "bearer"
    if not (scheme_ok and credentials is not None and token_valid(state, credentials.credentials)):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "a valid bearer token is required for writes",
                            headers={"WWW-Authenticate": "Bearer"})


async def require_read(state: AppState = Depends(get_state),
                       credentials: HTTPAuthorizationCredentials | None = Depends(read_bearer)) -> None:
    """Reads are open unless PERFMODEL_READ_REQUIRES_TOKEN=1 (then checked off the event loop)."""
    if not state.settings.read_requires_token:
        return
    token = credentials.credentials if credentials is not None and credentials.scheme.lower() == "bearer" else None
    if not await run_in_threadpool(token_valid, state, token):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "a valid bearer token is required",
                            headers={"WWW-Authenticate": "Bearer"})
