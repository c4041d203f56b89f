"""Dependencies: the app state, and the bearer-token checks for writes (and reads if configured)."""

from __future__ import annotations

import hmac

from fastapi import Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.state import AppState

bearer = HTTPBearer(auto_error=False)


async def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.perfmodel
    return state


def _valid(state: AppState, credentials: HTTPAuthorizationCredentials | None) -> bool:
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        return False
    token = credentials.credentials
    configured = state.settings.api_token
    if configured and hmac.compare_digest(token.encode(), configured.encode()):
        return True
    return state.store.verify_token(token) is not None


def require_write(state: AppState = Depends(get_state),
                  credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    """Every write needs ``Authorization: Bearer <token>``; anything else is a 401, never a write."""
    if not _valid(state, credentials):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "a valid bearer token is required for writes",
                            headers={"WWW-Authenticate": "Bearer"})


async def require_read(state: AppState = Depends(get_state),
                       credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    """Reads are open unless PERFMODEL_READ_REQUIRES_TOKEN=1 (then checked off the event loop)."""
    if state.settings.read_requires_token and not await run_in_threadpool(_valid, state, credentials):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "a valid bearer token is required",
                            headers={"WWW-Authenticate": "Bearer"})
