"""A bound on how deeply JSON nests, checked on the bytes as ijson reads them.

ijson (yajl2_c) builds a prefix string per nesting level for every event, so memory and time grow with the
square of the depth: a 400 kB upload of ``{"traceEvents":`` and 200,000 ``[`` took over 100 GB and the service
was killed by the kernel's OOM killer without an answer (20,000 levels: 1.0 GB, 5 s). Real Kineto traces nest
about 6 deep (array, event, ``args``, ``Input Dims``, one input's list, a tensor list's); msgspec, the fast
reader, refuses past its own recursion limit and hands such files to ijson, which is where this guard sits.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from perfmodel.traces.records import TraceError

MAX_JSON_DEPTH = 100  # nesting levels (arrays and objects) a trace may have; real ones have about 6
_STEP = np.zeros(256, np.int8)  # how each byte moves the depth outside a string
_STEP[[0x5B, 0x7B]] = 1  # [ {
_STEP[[0x5D, 0x7D]] = -1  # ] }


class DepthLimited(io.RawIOBase):
    """``stream`` read through, raising ``TraceError`` once its JSON nests deeper than ``limit``: checked per
    chunk read, so nothing past that chunk reaches the parser."""

    def __init__(self, stream: Any, limit: int = MAX_JSON_DEPTH) -> None:
        self._stream = stream
        self._limit = limit
        self._depth = 0
        self._in_string = False
        self._skip = False  # the chunk ended on a backslash inside a string: the next byte is escaped

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        chunk = self._stream.read(len(buffer))
        n = len(chunk)
        buffer[:n] = chunk
        self._scan(bytes(chunk))
        return n

    def _scan(self, data: bytes) -> None:
        """Vectorised over the chunk: quotes not escaped toggle strings, brackets outside them move the depth."""
        a = np.frombuffer(data, np.uint8)
        if a.size == 0:
            return
        quotes = np.flatnonzero(a == 0x22)
        if self._skip or data.find(b"\\") >= 0:
            escaped = np.zeros(a.size + 1, np.bool_)
            escaped[0] = self._skip
            for i in np.flatnonzero(a == 0x5C).tolist():  # rare: a run of backslashes escapes every other byte
                if not escaped[i]:
                    escaped[i + 1] = True
            self._skip = bool(escaped[a.size])
            quotes = quotes[~escaped[quotes]]
        steps = _STEP[a]
        brackets = np.flatnonzero(steps)
        outside = ((np.searchsorted(quotes, brackets) & 1) == 0) != self._in_string
        depth = self._depth + np.cumsum(steps[brackets[outside]], dtype=np.int64)
        if depth.size:
            if int(depth.max()) > self._limit:
                raise TraceError(f"the JSON nests deeper than {self._limit} levels (a trace nests about 6); "
                                 "expected a profiler trace")
            self._depth = int(depth[-1])
        self._in_string ^= bool(quotes.size & 1)
