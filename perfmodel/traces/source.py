"""Open what a user uploaded (bytes, a path or a binary stream) as a byte stream, gunzipping if needed."""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

from perfmodel.traces.records import TraceError

Source = bytes | bytearray | memoryview | str | os.PathLike[str] | BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
SQLITE_MAGIC = b"SQLite format 3\x00"
HEAD_BYTES = 64 * 1024  # decompressed bytes looked at to detect the format


@dataclass(frozen=True)
class Opened:
    """A source made re-readable: its raw first bytes, the decompressed head, and a way to stream it."""

    raw_head: bytes
    head: bytes
    gzipped: bool
    path: str | None
    data: bytes | None
    stream: BinaryIO | None


class _Prefixed(io.RawIOBase):
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
        rest = io.BufferedReader(_Prefixed(raw, source))
    return Opened(raw, _gunzip_head(raw) if gz else raw, gz, None, None, rest)


@contextmanager
def byte_stream(opened: Opened) -> Iterator[BinaryIO]:
    """The whole (decompressed) content as a stream; gzip errors become ``TraceError``."""
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
    try:
        if opened.gzipped:
            with gzip.GzipFile(fileobj=base, mode="rb") as unzipped:
                yield _GuardedGzip(unzipped)  # type: ignore[misc]
        else:
            yield base
    finally:
        if close_base:
            base.close()


class _GuardedGzip(io.RawIOBase):
    """Gzip reads whose truncation/corruption errors are reported as ``TraceError``."""

    def __init__(self, inner: gzip.GzipFile) -> None:
        self._inner = inner

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        try:
            return self._inner.read(-1 if size is None else size)
        except (EOFError, OSError, zlib.error) as exc:
            raise TraceError(f"the gzip stream is truncated or corrupt ({exc}): re-export the trace") from None

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def text_lines(stream: BinaryIO) -> io.TextIOWrapper:
    """The stream as text lines (UTF-8, undecodable bytes replaced, universal newlines)."""
    return io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="")
