"""Nsight Systems: ``nsys stats`` CSV reports (and the printed kernel summary table, ``nsys_text``) and the
SQLite export.

Layouts follow NVIDIA's documentation: the stats reports in the Nsight Systems Post-Collection
Analysis Guide (https://docs.nvidia.com/nsight-systems/AnalysisGuide/index.html: ``cuda_gpu_kern_sum``,
``cuda_gpu_trace``; before 2023 ``gpukernsum`` and ``gputrace``; times in ns unless ``--timeunit``,
the unit is in each header), and the SQLite schema in the exporter reference
(https://docs.nvidia.com/nsight-systems/2021.5/nsys-exporter/exported_data.html:
``CUPTI_ACTIVITY_KIND_KERNEL`` with ``start``/``end`` in ns and names as ``StringIds`` ids).
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from perfmodel.traces.csvrows import byte_scale, cell, column_index, csv_rows, time_scale_s
from perfmodel.traces.nsys_text import category_of, parse_kern_sum_text
from perfmodel.traces.records import (
    MAX_RECORDS,
    Category,
    KernelRecord,
    ParsedTrace,
    TraceError,
    as_float,
    as_int,
    clip_name,
)

SUM_FORMAT = "nsys_kern_sum_csv"
TRACE_FORMAT = "nsys_gpu_trace_csv"
SQLITE_FORMAT = "nsys_sqlite"
_MEMCPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD",
                 9: "HtoH", 10: "PtoP"}
_NAME_COLUMNS = ("demangledName", "shortName", "mangledName", "name")  # preferred first


def parse_kern_sum(stream: BinaryIO, header_line: int, max_records: int = MAX_RECORDS) -> ParsedTrace:
    """``cuda_gpu_kern_sum`` / ``gpukernsum`` (CSV or the printed table): one record per kernel name,
    ``instances`` launches; the table ends at a blank line or the next report's banner."""
    return parse_kern_sum_text(stream, header_line, max_records, SUM_FORMAT)


def parse_gpu_trace(stream: BinaryIO, header_line: int, max_records: int = MAX_RECORDS) -> ParsedTrace:
    """``cuda_gpu_trace`` / ``gputrace``: one row per kernel, memcpy or memset. A copy's ``Bytes (MB)`` (nsys's
    MB: 10^6 bytes, printed to 3 decimals) is its transfer size; its ``SrcMemKd``/``DstMemKd`` (Pageable, Pinned,
    Device) follow its name as Kineto writes them (``(Pinned -> Device)``); the ``Device`` column's name (before
    its ``(index)``) is the file's device."""
    records: list[KernelRecord] = []
    warnings: list[str] = []
    device_name: str | None = None
    with csv_rows(stream, header_line) as rows:
        header = next(rows)
        start, duration, name = (column_index(header, "Start"), column_index(header, "Duration"),
                                 column_index(header, "Name"))
        if start is None or duration is None or name is None:
            raise TraceError("nsys GPU trace without 'Start', 'Duration' or 'Name' columns")
        start_scale, duration_scale = time_scale_s(header[start]), time_scale_s(header[duration])
        corr, device = column_index(header, "CorrId"), column_index(header, "Device")
        stream_col = column_index(header, "Strm", "Stream")
        size = column_index(header, "Bytes", "Size")
        size_scale = byte_scale(header[size]) if size is not None else 1.0
        kinds = column_index(header, "SrcMemKd"), column_index(header, "DstMemKd")
        grid = [column_index(header, f"Grd{a}") for a in "XYZ"]
        block = [column_index(header, f"Blk{a}") for a in "XYZ"]
        for row in rows:
            value = as_float(cell(row, duration))
            if value is None:
                continue
            if len(records) >= max_records:
                warnings.append(f"more than {max_records} rows: the rest were not read")
                break
            kernel_name = clip_name(cell(row, name))
            category = category_of(kernel_name)
            transfer = _scaled(cell(row, size), size_scale) if category != "kernel" else None
            if category == "memcpy" and cell(row, kinds[0]) and cell(row, kinds[1]):
                kernel_name = f"{kernel_name} ({cell(row, kinds[0])} -> {cell(row, kinds[1])})"
            device_text = cell(row, device).strip()
            device_name = device_name or device_text.rsplit(" (", 1)[0] or None
            records.append(KernelRecord(
                name=kernel_name, category=category, duration_s=value * duration_scale,
                source_format=TRACE_FORMAT, start_s=_scaled(cell(row, start), start_scale),
                device=as_int(device_text.split(" ")[-1].strip("()")) if device is not None else None,
                stream=as_int(cell(row, stream_col)), correlation=as_int(cell(row, corr)),
                grid=_dims(row, grid), block=_dims(row, block),
                transfer_bytes=round(transfer) if transfer is not None and transfer > 0 else None))
    if device_name is not None and device_name.isdigit():
        device_name = None  # a bare device index names no device
    return ParsedTrace(TRACE_FORMAT, records, warnings, device_name=device_name)


def _scaled(text: str, scale: float) -> float | None:
    value = as_float(text)
    return None if value is None else value * scale


def _dims(row: list[str], columns: list[int | None]) -> tuple[int, int, int] | None:
    values = [as_int(cell(row, c)) for c in columns]
    if values[0] is None:
        return None
    return values[0], values[1] or 1, values[2] or 1


@contextmanager
def _database(path: str | None, data: BinaryIO | None) -> Iterator[sqlite3.Connection]:
    """A read-only connection; uploaded bytes go to a private temporary file first."""
    temp: str | None = None
    if path is None:
        assert data is not None
        handle, temp = tempfile.mkstemp(suffix=".sqlite")
        with os.fdopen(handle, "wb") as out:
            while chunk := data.read(1 << 20):
                out.write(chunk)
        path = temp
    try:
        uri = "file:" + path.replace("?", "%3f").replace("#", "%23") + "?mode=ro"
        connection = sqlite3.connect(uri, uri=True)
        try:
            yield connection
        finally:
            connection.close()
    finally:
        if temp is not None:
            os.unlink(temp)


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in db.execute(f'PRAGMA table_info("{table}")')}  # table from a fixed list


def parse_sqlite(path: str | None, data: BinaryIO | None, max_records: int = MAX_RECORDS) -> ParsedTrace:
    """Kernels, memcpys and memsets of an ``nsys export --type sqlite`` database."""
    warnings: list[str] = []
    records: list[KernelRecord] = []
    try:
        with _database(path, data) as db:
            tables = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
                raise TraceError("SQLite file without a CUPTI_ACTIVITY_KIND_KERNEL table: expected an "
                                 "nsys export --type sqlite of a run with CUDA tracing")
            strings = "StringIds" in tables and {"id", "value"} <= _columns(db, "StringIds")
            records += _kernels(db, strings, max_records, warnings)
            memory_tables: tuple[tuple[str, Category], ...] = (
                ("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"), ("CUPTI_ACTIVITY_KIND_MEMSET", "memset"))
            for table, category in memory_tables:
                if table in tables and len(records) < max_records:
                    records += _memory(db, table, category, max_records - len(records))
    except sqlite3.DatabaseError as exc:
        raise TraceError(f"unreadable SQLite database ({exc}): expected an nsys SQLite export") from None
    records.sort(key=lambda r: r.start_s or 0.0)
    return ParsedTrace(SQLITE_FORMAT, records, warnings)


def _kernels(db: sqlite3.Connection, strings: bool, limit: int, warnings: list[str]) -> list[KernelRecord]:
    columns = _columns(db, "CUPTI_ACTIVITY_KIND_KERNEL")
    if not {"start", "end"} <= columns:
        raise TraceError("CUPTI_ACTIVITY_KIND_KERNEL has no start/end columns")
    name_column = next((c for c in _NAME_COLUMNS if c in columns), None)
    if name_column is None:
        raise TraceError(f"CUPTI_ACTIVITY_KIND_KERNEL has none of the name columns {', '.join(_NAME_COLUMNS)}")
    optional = [c for c in ("deviceId", "streamId", "correlationId", "gridX", "gridY", "gridZ", "blockX",
                            "blockY", "blockZ") if c in columns]
    selected = ", ".join(f'k."{c}"' for c in ("start", "end", *optional))
    if strings:
        query = (f'SELECT {selected}, COALESCE(s.value, k."{name_column}") FROM CUPTI_ACTIVITY_KIND_KERNEL k '
                 f'LEFT JOIN StringIds s ON s.id = k."{name_column}" ORDER BY k.start LIMIT ?')
    else:
        query = f'SELECT {selected}, k."{name_column}" FROM CUPTI_ACTIVITY_KIND_KERNEL k ORDER BY k.start LIMIT ?'
    out: list[KernelRecord] = []
    for row in db.execute(query, (limit + 1,)):
        if len(out) >= limit:
            warnings.append(f"more than {limit} kernels: the rest were not read")
            break
        values = dict(zip(("start", "end", *optional), row[:-1], strict=True))
        start, end = as_float(values["start"]), as_float(values["end"])
        if start is None or end is None or end < start:
            continue
        grid = tuple(as_int(values.get(f"grid{a}")) or 1 for a in "XYZ") if "gridX" in values else None
        block = tuple(as_int(values.get(f"block{a}")) or 1 for a in "XYZ") if "blockX" in values else None
        out.append(KernelRecord(
            name=clip_name(row[-1]), category="kernel", duration_s=(end - start) * 1e-9, source_format=SQLITE_FORMAT,
            start_s=start * 1e-9, device=as_int(values.get("deviceId")), stream=as_int(values.get("streamId")),
            correlation=as_int(values.get("correlationId")),
            grid=(grid[0], grid[1], grid[2]) if grid else None,
            block=(block[0], block[1], block[2]) if block else None))
    return out


def _memory(db: sqlite3.Connection, table: str, category: Category, limit: int) -> list[KernelRecord]:
    columns = _columns(db, table)
    if not {"start", "end"} <= columns:
        return []
    optional = [c for c in ("deviceId", "streamId", "correlationId", "bytes", "copyKind") if c in columns]
    selected = ", ".join(f'"{c}"' for c in ("start", "end", *optional))
    out: list[KernelRecord] = []
    for row in db.execute(f"SELECT {selected} FROM {table} ORDER BY start LIMIT ?", (limit,)):
        values = dict(zip(("start", "end", *optional), row, strict=True))
        start, end = as_float(values["start"]), as_float(values["end"])
        if start is None or end is None or end < start:
            continue
        kind = _MEMCPY_KINDS.get(as_int(values.get("copyKind")) or 0, "")
        name = f"[CUDA {category} {kind}]".replace(" ]", "]")
        size = as_float(values.get("bytes"))
        out.append(KernelRecord(
            name=name, category=category, duration_s=(end - start) * 1e-9, source_format=SQLITE_FORMAT,
            start_s=start * 1e-9, device=as_int(values.get("deviceId")), stream=as_int(values.get("streamId")),
            correlation=as_int(values.get("correlationId")),
            transfer_bytes=round(size) if size is not None and size > 0 else None))
    return out
