"""Pure ASGI middleware: 413 for oversized bodies; version, Server-Timing and security headers."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from perfmodel import __version__

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
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > limit:
                await self._reject(send, limit, setting)
                return
            if b"transfer-encoding" not in headers:
                # the server reads exactly the declared length (HTTP/1.1: RFC 9112 section 6.3): within the limit
                await self.app(scope, receive, send)
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
        body = json.dumps({"detail": f"request body larger than {limit} bytes ({setting})", "field": None,
                           "model_version": __version__})  # the shape of every other error (ErrorOut)
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body.encode()})


# the dashboard: scripts and styles from this origin only (plotly.js is served locally; its charts set inline
# styles), data: images (plotly's modebar, PNG export), no plugins, no framing, no foreign form targets
DASHBOARD_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                 "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
                 "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'")
# /docs is Swagger UI served from this server (web/api_docs.py): the dashboard's policy, no CDN, no inline script
DOCS_CSP = DASHBOARD_CSP
DOCS_PATHS = ("/docs", "/redoc")


class ResponseHeaders:
    """On every HTTP response: ``X-Perfmodel-Version``, ``Server-Timing: app;dur=<ms>``,
    ``X-Content-Type-Options: nosniff``, ``Referrer-Policy`` and ``X-Frame-Options`` (where the app did not set
    them), and a Content-Security-Policy (with ``frame-ancestors 'none'``) on every HTML page. One middleware, one
    wrapped ``send`` per request."""

    SECURITY = ((b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin"),
                (b"x-frame-options", b"DENY"))

    def __init__(self, app: ASGIApp, version: str) -> None:
        self.app = app
        self.version = version.encode()
        self.dashboard_policy = DASHBOARD_CSP.encode()
        self.docs_policy = DOCS_CSP.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def stamped_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                duration_ms = (time.perf_counter() - start) * 1e3
                headers = [*message.get("headers", []), (b"x-perfmodel-version", self.version),
                           (b"server-timing", f"app;dur={duration_ms:.3f}".encode())]
                names = {name.lower() for name, _ in headers}
                added = list(self.SECURITY)
                content_type = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if content_type.startswith(b"text/html"):
                    docs = scope.get("path", "").startswith(DOCS_PATHS)
                    added.append((b"content-security-policy", self.docs_policy if docs else self.dashboard_policy))
                message["headers"] = headers + [(k, v) for k, v in added if k not in names]
            await send(message)

        await self.app(scope, receive, stamped_send)
