"""Summary CSVs (one row per kernel name: launches and total time), as nsys and rocprof write them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import BinaryIO

from perfmodel.traces.csvrows import cell, column_index, csv_rows, time_scale_s
from perfmodel.traces.records import Category, KernelRecord, ParsedTrace, TraceError, as_float, as_int, clip_name

_BANNERS = ("**", "Processing [", "Generating ")  # what nsys prints before each report of a multi-report output


def end_of_table(row: list[str]) -> bool:
    """A blank row or the banner of the next report ends a summary table (``nsys stats`` prints several)."""
    if not any(c.strip() for c in row):
        return True
    first = row[0].strip()
    return first.startswith(_BANNERS) or (first.startswith("[") and "/" in first and "]" in first
                                          and first[1:first.index("/")].isdigit())


def summary_records(header: list[str], rows: Iterable[list[str]], max_records: int, source_format: str,
                    label: str, name: str, count: str, total: str,
                    category: Callable[[str], Category] = lambda _: "kernel") -> ParsedTrace:
    """One ``KernelRecord`` per row until the table ends: ``instances`` launches taking ``total`` time in all
    (unit from the header, nanoseconds without one). ``name``, ``count``, ``total``: the column names."""
    records: list[KernelRecord] = []
    warnings: list[str] = []
    total_i, count_i, name_i = column_index(header, total), column_index(header, count), column_index(header, name)
    if total_i is None or name_i is None:
        raise TraceError(f"{label} without {total!r} or {name!r} columns")
    scale = time_scale_s(header[total_i])
    for row in rows:
        if end_of_table(row):
            if records:
                break
            continue
        value = as_float(cell(row, total_i))
        if value is None:
            continue
        if len(records) >= max_records:
            warnings.append(f"more than {max_records} rows: the rest were not read")
            break
        kernel_name = clip_name(cell(row, name_i)).strip()
        if not kernel_name:
            warnings.append(f"a row without a name (total {cell(row, total_i)!r}) was skipped: a cut file?")
            continue
        records.append(KernelRecord(name=kernel_name, category=category(kernel_name), duration_s=value * scale,
                                    source_format=source_format, instances=as_int(cell(row, count_i)) or 1))
    return ParsedTrace(source_format, records, warnings)


def parse_summary_csv(stream: BinaryIO, header_line: int, max_records: int, source_format: str, label: str,
                      name: str, count: str, total: str,
                      category: Callable[[str], Category] = lambda _: "kernel") -> ParsedTrace:
    """``summary_records`` of a CSV stream whose header is at ``header_line``."""
    with csv_rows(stream, header_line) as rows:
        header = next(rows, None)
        if header is None:
            raise TraceError(f"{label}: the file ends before its header")
        return summary_records(header, rows, max_records, source_format, label, name, count, total, category)
