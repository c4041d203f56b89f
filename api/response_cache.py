"""Pure ASGI middleware: a repeated ``POST /predict`` answered from the bytes it got last time.

A request whose exact body (and content type) was answered 200 from a bundled device without a calibration
gets the same response body again, without routing, dependency solving, pydantic validation or the endpoint:
the answer depends only on those bytes (bundled devices and the model do not change while the process runs).
Everything else (new bodies, errors, custom devices, calibrations, reads that need a token) takes the normal
path, which stores what may be replayed (``api.routers.predict``). The middlewares outside this one (body size,
version and security headers) apply to both.
"""

from __future__ import annotations

from api.limits import ASGIApp, Message, Receive, Scope, Send
from api.state import AppState

# the scope key under which this middleware hands the endpoint the cache key of the request it let through
SCOPE_KEY = "perfmodel.response_key"
MAX_CACHED_BODY_BYTES = 16 * 1024  # a /predict body is a few hundred bytes; larger ones are not looked up
JSON_HEADERS_START = (b"content-type", b"application/json")


class CachedResponses:
    """Replays stored ``/predict`` responses keyed by the request's content type and body bytes."""

    def __init__(self, app: ASGIApp, state: AppState, path: str) -> None:
        self.app = app
        self.state = state
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope["path"] != self.path or scope["method"] != "POST"
                or self.state.settings.read_requires_token or self.state.settings.prediction_cache_size == 0):
            await self.app(scope, receive, send)
            return
        length = content_type = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = value
            elif name == b"content-type":
                content_type = value
        if length is None or not length.isdigit() or int(length) > MAX_CACHED_BODY_BYTES:
            await self.app(scope, receive, send)
            return
        first = await receive()
        if first["type"] != "http.request" or first.get("more_body", False):
            await self.app(scope, _replay(first, receive), send)
            return
        key = b"%b\n%b\n%b" % (content_type or b"", scope.get("query_string", b""), first.get("body", b""))
        body = self.state.cached_response(key)
        if body is None:
            scope[SCOPE_KEY] = key
            await self.app(scope, _replay(first, receive), send)
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"%d" % len(body)), JSON_HEADERS_START]})
        await send({"type": "http.response.body", "body": body})


def _replay(first: Message, receive: Receive) -> Receive:
    """``receive`` that returns ``first`` once, then the connection's messages."""
    pending: list[Message] = [first]

    async def replayed() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replayed
