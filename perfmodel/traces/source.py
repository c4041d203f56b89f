"""Open what a user uploaded (bytes, a path or a binary stream) as a byte stream, gunzipping if needed."""

from __future__ import annotations

import gzip
import io
import os
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import BinaryIO

from perfmodel.traces.gunzip import GZIP_ERRORS, open_gzip
from perfmodel.traces.records import TraceError

Source = bytes | bytearray | memoryview | str | os.PathLike[str] | BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
HEAD_BYTES = 64 * 1024  # decompressed bytes looked at to detect the format
READ_STEP_BYTES = 1 << 20  # a read-all is done in steps this size, each checked against the limits


@dataclass(frozen=True)
class Opened:
    """A source made re-readable: its raw first bytes, the decompressed head, and a way to stream it."""

    raw_head: bytes
    head: bytes
    gzipped: bool
    path: str | None
    data: bytes | None
    stream: BinaryIO | None


class PrefixedStream(io.RawIOBase):
    """A non-seekable stream with its already-read first bytes put back in front."""

    def __init__(self, prefix: bytes, rest: BinaryIO) -> None:
        self._prefix = prefix
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        chunk = self._rest.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def _gunzip_head(raw: bytes) -> bytes:
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, HEAD_BYTES)
    except zlib.error as exc:
        raise TraceError(f"gzip data is corrupt ({exc}); expected a gzip-compressed trace") from None


def open_source(source: Source) -> Opened:
    """Read the head of ``source`` without consuming it for the parser."""
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
        raw = data[:HEAD_BYTES]
        gz = raw.startswith(GZIP_MAGIC)
        return Opened(raw, _gunzip_head(raw) if gz else raw, gz, None, data, None)
    if isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        try:
            with open(path, "rb") as handle:
                raw = handle.read(HEAD_BYTES)
        except OSError as exc:
            raise TraceError(f"cannot read trace file {path!r}: {exc.strerror or exc}") from None
        gz = raw.startswith(GZIP_MAGIC)
        return Opened(raw, _gunzip_head(raw) if gz else raw, gz, path, None, None)
    raw = source.read(HEAD_BYTES)
    if not isinstance(raw, bytes):
        raise TraceError("expected a binary stream (opened with 'rb'), got text")
    gz = raw.startswith(GZIP_MAGIC)
    rest: BinaryIO
    if source.seekable():
        source.seek(-len(raw), io.SEEK_CUR)
        rest = source
    else:
        rest = io.BufferedReader(PrefixedStream(raw, source))
    return Opened(raw, _gunzip_head(raw) if gz else raw, gz, None, None, rest)


@dataclass(frozen=True)
class ParseLimits:
    """Bounds on the work of parsing one trace (None: no bound). ``max_bytes``: decompressed bytes read;
    ``max_gzip_ratio``: decompressed / compressed bytes, past ``ratio_floor_bytes`` (gzip bombs);
    ``max_s``: wall seconds from the first read, checked at every read."""

    max_bytes: int | None = None
    max_gzip_ratio: float | None = None
    ratio_floor_bytes: int = 64 * 1024 * 1024
    max_s: float | None = None


class TraceLimitExceeded(TraceError):
    """A trace past one of its ``ParseLimits``; ``limit`` names the field (``max_bytes``, ``max_s``...)."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


UNBOUNDED = ParseLimits()
_LIMITS: ContextVar[ParseLimits | None] = ContextVar("perfmodel_parse_limits", default=None)


@contextmanager
def parse_limits(limits: ParseLimits) -> Iterator[None]:
    """Parse with ``limits`` within this block (this thread or task only): a service bounds what an upload
    may cost; the command line reads local files unbounded by default."""
    token = _LIMITS.set(limits)
    try:
        yield
    finally:
        _LIMITS.reset(token)


def _compressed_size(opened: Opened, base: BinaryIO) -> int | None:
    if opened.data is not None:
        return len(opened.data)
    if opened.path is not None:
        return os.path.getsize(opened.path)
    if base.seekable():
        here = base.tell()
        size = base.seek(0, io.SEEK_END) - here
        base.seek(here)
        return size
    return None


def _byte_limit(limits: ParseLimits, gzipped: bool, compressed_bytes: int | None) -> tuple[int | None, str, str]:
    """The decompressed bytes allowed, which limit sets it, and why (for the message)."""
    allowed, which, why = limits.max_bytes, "max_bytes", "the limit"
    if gzipped and limits.max_gzip_ratio is not None and compressed_bytes is not None:
        by_ratio = max(limits.ratio_floor_bytes, int(limits.max_gzip_ratio * compressed_bytes))
        if allowed is None or by_ratio < allowed:
            allowed, which = by_ratio, "max_gzip_ratio"
            why = f"{limits.max_gzip_ratio:g} times its {compressed_bytes} gzip bytes"
    return allowed, which, why


@contextmanager
def byte_stream(opened: Opened) -> Iterator[BinaryIO]:
    """The whole (decompressed) content as a stream, within the current ``parse_limits``; gzip errors
    become ``TraceError``, a limit passed ``TraceLimitExceeded``."""
    if opened.data is not None:
        base: BinaryIO = io.BytesIO(opened.data)
        close_base = True
    elif opened.path is not None:
        base = open(opened.path, "rb")  # noqa: SIM115 - closed below
        close_base = True
    else:
        assert opened.stream is not None
        base = opened.stream
        close_base = False
    limits = _LIMITS.get() or UNBOUNDED
    try:
        max_bytes, which, why = _byte_limit(limits, opened.gzipped, _compressed_size(opened, base))
        if opened.gzipped:
            with open_gzip(base) as unzipped:
                yield _Bounded(unzipped, True, (max_bytes, which, why), limits.max_s)  # type: ignore[misc]
        elif max_bytes is None and limits.max_s is None:
            yield base
        else:
            yield _Bounded(base, False, (max_bytes, which, why), limits.max_s)  # type: ignore[misc]
    finally:
        if close_base:
            base.close()


class _Bounded(io.RawIOBase):
    """Reads that stop with ``TraceLimitExceeded`` past ``max_bytes`` or ``max_s``; for gzip, truncation and
    corruption errors are reported as ``TraceError``."""

    def __init__(self, inner: BinaryIO | gzip.GzipFile, gzipped: bool, byte_limit: tuple[int | None, str, str],
                 max_s: float | None) -> None:
        self._inner = inner
        self._gzipped = gzipped
        self._max_bytes, self._which, self._why = byte_limit
        self._max_s = max_s
        self._deadline_s = None if max_s is None else time.monotonic() + max_s
        self._seen_bytes = 0

    def readable(self) -> bool:
        return True

    def _check(self) -> None:
        if self._max_bytes is not None and self._seen_bytes > self._max_bytes:
            raise TraceLimitExceeded(f"the trace is larger than {self._max_bytes} bytes once decompressed "
                                     f"({self._why}); split or trim it", self._which)
        if self._deadline_s is not None and time.monotonic() > self._deadline_s:
            raise TraceLimitExceeded(f"reading the trace took longer than {self._max_s:g} s; split or trim it",
                                     "max_s")

    def _read_some(self, size: int) -> bytes:
        try:
            chunk = self._inner.read(size)
        except GZIP_ERRORS as exc:
            if not self._gzipped:
                raise
            raise TraceError(f"the gzip stream is truncated or corrupt ({exc}): re-export the trace") from None
        self._seen_bytes += len(chunk)
        self._check()
        return chunk

    def read(self, size: int | None = -1) -> bytes:
        self._check()
        if size is not None and size >= 0:
            return self._read_some(size)
        parts = []  # read-all in bounded steps, so a limit stops it early
        while chunk := self._read_some(READ_STEP_BYTES):
            parts.append(chunk)
        return b"".join(parts)

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def text_lines(stream: BinaryIO) -> io.TextIOWrapper:
    """The stream as text lines (UTF-8, undecodable bytes replaced, universal newlines)."""
    return io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="")
