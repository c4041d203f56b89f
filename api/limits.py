"""Pure ASGI middleware: 413 for oversized bodies; version and Server-Timing headers."""

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
    """413 for a declared Content-Length over the limit, or a streamed body that grows past it.

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
        limit = next((v for k, v in self.upload_limits.items() if path.startswith(k)), self.default_max_bytes)
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._reject(send, limit)
            return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._reject(send, limit)

    async def _reject(self, send: Send, limit: int) -> None:
        setting = "PERFMODEL_MAX_BODY_BYTES" if limit == self.default_max_bytes else "PERFMODEL_MAX_UPLOAD_BYTES"
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
