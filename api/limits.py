"""Pure ASGI middleware: 413 for oversized bodies; version and Server-Timing headers; security headers."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyTooLarge(Exception):
    """A streamed request body grew past its limit."""


class BodySizeLimit:
    """413 for a declared Content-Length over the limit, or a streamed (chunked) body that grows past it,
    whatever the app made of the cut body.

    ``upload_limits`` maps path prefixes (file uploads such as traces) to their own, larger limit.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, upload_limits: dict[str, int] | None = None) -> None:
        self.app = app
        self.default_max_bytes = max_bytes
        self.upload_limits = upload_limits or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        upload = next((v for k, v in self.upload_limits.items() if path.startswith(k)), None)
        limit = self.default_max_bytes if upload is None else upload
        setting = "PERFMODEL_MAX_BODY_BYTES" if upload is None else "PERFMODEL_MAX_UPLOAD_BYTES"
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._reject(send, limit, setting)
            return
        seen = 0
        started = False
        exceeded = False

        async def limited_receive() -> Message:
            nonlocal seen, exceeded
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    exceeded = True
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if exceeded:
                # the app may turn the cut body into its own error (FastAPI answers a failed form or JSON
                # read with 400): the client gets the 413 that says why instead
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await self._reject(send, limit, setting)
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._reject(send, limit, setting)

    async def _reject(self, send: Send, limit: int, setting: str) -> None:
        body = json.dumps({"detail": f"request body larger than {limit} bytes ({setting})", "field": None})
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body.encode()})


class VersionHeaders:
    """``X-Perfmodel-Version`` and ``Server-Timing: app;dur=<ms>`` on every HTTP response."""

    def __init__(self, app: ASGIApp, version: str) -> None:
        self.app = app
        self.version = version.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def stamped_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                duration_ms = (time.perf_counter() - start) * 1e3
                message["headers"] = [*message.get("headers", []), (b"x-perfmodel-version", self.version),
                                      (b"server-timing", f"app;dur={duration_ms:.3f}".encode())]
            await send(message)

        await self.app(scope, receive, stamped_send)


# the dashboard: scripts and styles from this origin only (plotly.js is served locally; its charts set inline
# styles), data: images (plotly's modebar, PNG export), no plugins, no framing, no foreign form targets
DASHBOARD_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                 "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
                 "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'")
# /docs is Swagger UI served from this server (web/api_docs.py): the dashboard's policy, no CDN, no inline script
DOCS_CSP = DASHBOARD_CSP
DOCS_PATHS = ("/docs", "/redoc")


class SecurityHeaders:
    """``X-Content-Type-Options: nosniff``, ``Referrer-Policy`` and ``X-Frame-Options`` on every response; a
    Content-Security-Policy (with ``frame-ancestors 'none'``) on every HTML page."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = (DOCS_CSP if scope.get("path", "").startswith(DOCS_PATHS) else DASHBOARD_CSP).encode()

        async def secured_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                added = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin"),
                         (b"x-frame-options", b"DENY")]
                content_type = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if content_type.startswith(b"text/html"):
                    added.append((b"content-security-policy", policy))
                message["headers"] = headers + [(k, v) for k, v in added if k not in names]
            await send(message)

        await self.app(scope, receive, secured_send)
