"""A Kineto trace's span events as columns, read by the numba scanner (``kineto_scan_jit``): one row per event
of phase ``X`` with a string category (file order), its fields as type codes, integers, interned text codes and
float times; no Python object per event. What the scanner does not take exactly raises ``Unsupported`` (the
caller then reads the file by the reference path, which answers or says what is wrong).

The events array is found as ``kineto_events`` finds it; the decompressed stream is read in ``CHUNK_BYTES``
steps, the scanner stopping at the start of an event cut by the chunk's end (the rest is carried to the next
chunk). After the array, the rest of the document is read by ijson as ``kineto_events`` reads it (errors as
before); an events array after it (which ijson would add) leaves the file to the reference.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import numpy as np

from perfmodel.traces.kineto_events import CHUNK_BYTES, _array_start, _ijson_events
from perfmodel.traces.source import PrefixedStream

ROWS = 1 << 21  # rows reserved at first (pages are touched only where written: a first touch costs ~5 us a page here,
# so rows are written once, where they stay, rather than in batches copied and joined)
SLOW = 1 << 14  # numbers per call left to numpy's cast
NUMBER_CHARS = 40  # the longest such number cast by numpy (longer: ``float`` each)


def _convert(jit: Any, buffer: np.ndarray, slow: np.ndarray, times: np.ndarray, texts: np.ndarray) -> None:
    rows, columns = slow[:, 0], slow[:, 1]
    if jit.gather(buffer, slow, len(slow), texts):
        times[rows, columns] = texts[:len(slow)].view(f"S{NUMBER_CHARS}").ravel().astype(np.float64)
        return
    for row, column, start, end in slow.tolist():
        times[row, column] = float(buffer[start:end].tobytes())


class Unsupported(Exception):
    """An event the columnar path does not take exactly as the reference does: parse the file by the reference."""


class Texts:
    """The interned texts (exact JSON bytes) and their pool, grown on demand."""

    def __init__(self) -> None:
        self.table = np.zeros(1 << 16, dtype=np.int64)
        self.hashes = np.zeros(1 << 15, dtype=np.uint64)
        self.entries = np.zeros((1 << 15, 2), dtype=np.int64)
        self.pool = np.zeros(1 << 22, dtype=np.uint8)
        self.counts = np.zeros(2, dtype=np.int64)

    def grow(self) -> None:
        from perfmodel.traces import kineto_scan_jit as jit

        count, used = int(self.counts[0]), int(self.counts[1])
        if 2 * (count + 1) > len(self.table) or count >= len(self.hashes):
            self.hashes = np.concatenate([self.hashes, np.zeros_like(self.hashes)])
            self.entries = np.concatenate([self.entries, np.zeros_like(self.entries)])
            self.table = np.zeros(2 * len(self.table), dtype=np.int64)
            jit.rehash(self.table, self.hashes, count)
        if used + CHUNK_BYTES > len(self.pool):
            self.pool = np.concatenate([self.pool, np.zeros(max(len(self.pool), 2 * CHUNK_BYTES), np.uint8)])

    def texts(self) -> list[bytes]:
        pool = self.pool.tobytes()
        return [pool[at:at + length] for at, length in self.entries[:int(self.counts[0])].tolist()]


class ScannedEvents:
    """``ints`` (rows x ``NCOL``, ``kineto_scan_jit``'s columns), ``times`` (rows x 2: ts, dur as floats where their
    type is a number), ``texts`` (each code's JSON text) and ``seen`` (every element of the events array)."""

    def __init__(self, stream: BinaryIO, top_level_list: bool) -> None:
        from perfmodel.traces import kineto_scan_jit as jit

        data, position = _array_start(stream, top_level_list)
        if position is None:
            raise Unsupported("no events array found where the fast reader looks")
        store = Texts()
        ints = np.empty((ROWS, jit.NCOL), dtype=np.int64)
        times = np.empty((ROWS, 2), dtype=np.float64)
        slow = np.zeros((SLOW, 4), dtype=np.int64)
        texts = np.zeros((SLOW, NUMBER_CHARS), dtype=np.uint8)
        rows, state, seen, final = 0, 0, 0, False
        head = memoryview(data)[position:]
        buffer = np.empty(max(2 * CHUNK_BYTES, 2 * len(head)), dtype=np.uint8)  # reused: the events not yet read
        buffer[:len(head)] = np.frombuffer(head, dtype=np.uint8)
        at, filled = 0, len(head)
        while True:
            status, at, state, rows, listed, read = jit.scan(buffer, at, filled, state, ints, times, rows, slow,
                                                            store.table, store.hashes, store.entries, store.pool,
                                                            store.counts)
            seen += read
            if listed:  # numbers beyond the exact fast path: numpy's cast (as ``float``: correctly rounded)
                _convert(jit, buffer, slow[:listed], times, texts)
            if status == jit.ARRAY_END:
                break
            if status == jit.BAD:
                raise Unsupported("an event the fast reader does not take")
            if status == jit.TABLE_FULL:
                store.grow()
            elif status == jit.FULL:  # beyond the rows reserved: twice as many
                ints = np.concatenate([ints[:rows], np.empty_like(ints)])
                times = np.concatenate([times[:rows], np.empty_like(times)])
            else:  # NEED_MORE: the event cut by the end moves to the front, the next chunk after it
                if final:
                    raise Unsupported("the events array is cut short")
                chunk = stream.read(CHUNK_BYTES)
                final = not chunk
                rest = filled - at
                if rest + len(chunk) > len(buffer):
                    buffer = np.concatenate([buffer, np.empty(rest + len(chunk), dtype=np.uint8)])
                buffer[:rest] = buffer[at:filled].copy()
                buffer[rest:rest + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
                at, filled = 0, rest + len(chunk)
        tail = buffer[at:filled].tobytes()
        opening = b"[" if top_level_list else b'{"traceEvents":['
        for _ in _ijson_events(PrefixedStream(opening + tail, stream),
                               "item" if top_level_list else "traceEvents.item"):
            raise Unsupported("events after the events array")
        self.ints, self.times = ints[:rows], times[:rows]
        self.texts = store.texts()
        self.seen = seen
