"""CSV reading shared by the CSV parsers: bounded field sizes, header lookup, numbers with separators."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from perfmodel.traces.records import TraceError
from perfmodel.traces.source import text_lines

MAX_FIELD_CHARS = 1 << 20  # one CSV cell (a kernel name is far shorter)
_UNIT = re.compile(r"\(([^()]*)\)\s*$")


@contextmanager
def csv_rows(stream: BinaryIO, header_line: int) -> Iterator[Iterator[list[str]]]:
    """Rows of a CSV stream starting at its header line; csv errors become ``TraceError``."""
    csv.field_size_limit(MAX_FIELD_CHARS)
    text = text_lines(stream)
    try:
        reader = csv.reader(text)
        for _ in range(header_line):
            next(reader, None)

        def rows() -> Iterator[list[str]]:
            try:
                yield from reader
            except csv.Error as exc:
                raise TraceError(f"malformed CSV at line {reader.line_num}: {exc}") from None

        yield rows()
    finally:
        text.detach()


def column_index(header: list[str], *names: str) -> int | None:
    """Index of the first header cell equal (case-insensitive) to one of ``names``, or starting with
    ``name + ' ('`` (a unit suffix such as ``Duration (ns)``)."""
    lowered = [h.strip().lower() for h in header]
    for name in names:
        key = name.lower()
        for index, cell in enumerate(lowered):
            if cell == key or cell.startswith(key + " ("):
                return index
    return None


def header_unit(cell: str) -> str | None:
    """The unit in a header cell's trailing parentheses: 'Total Time (ns)' -> 'ns'."""
    found = _UNIT.search(cell)
    return found.group(1).strip() if found else None


TIME_UNITS_S = {"ns": 1e-9, "nsec": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usec": 1e-6, "usecond": 1e-6,
                "μs": 1e-6, "ms": 1e-3, "msec": 1e-3, "msecond": 1e-3, "s": 1.0, "sec": 1.0, "second": 1.0}


def time_scale_s(cell: str, default_unit: str = "ns") -> float:
    """Seconds per unit of a time column from its header ('Duration (us)' -> 1e-6)."""
    unit = header_unit(cell) or default_unit
    try:
        return TIME_UNITS_S[unit.lower()]
    except KeyError:
        raise TraceError(f"column {cell!r}: unknown time unit {unit!r}; known: ns, us, ms, s") from None


BYTE_UNITS = {"b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3}


def byte_scale(cell: str) -> float:
    """Bytes per unit of a size column from its header ('Bytes (MB)' -> 1e6); bytes where it names no unit."""
    unit = header_unit(cell) or "B"
    try:
        return BYTE_UNITS[unit.lower()]
    except KeyError:
        raise TraceError(f"column {cell!r}: unknown size unit {unit!r}; known: B, KB, MB, GB, KiB, MiB, GiB") from None


def cell(row: list[str], index: int | None) -> str:
    return row[index] if index is not None and index < len(row) else ""
