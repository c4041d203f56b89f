"""``nsys stats`` kernel summaries as printed, not only as CSV files: the whitespace-aligned table of the
default ``--format column`` (what ``nsys profile --stats=true`` prints), and CSV reports that follow other
reports in one output (``nsys stats --format csv`` to stdout prints every report, each after a banner line
``** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):``).

A table's columns are given by the dashed line under its header; the name is the last column, cut by nsys
at 100 characters (ending in '…') — the CSV format keeps whole names.
"""

from __future__ import annotations

import csv
import itertools
import re
from collections.abc import Iterator
from typing import BinaryIO

from perfmodel.traces.csvrows import MAX_FIELD_CHARS
from perfmodel.traces.records import Category, ParsedTrace, TraceError
from perfmodel.traces.source import text_lines
from perfmodel.traces.summary_csv import summary_records

_MEM_NAME = re.compile(r"^\[CUDA (memcpy|memset)", re.IGNORECASE)
_BANNER = re.compile(r"\((cuda_gpu_kern_sum|gpukernsum)\):?\s*$")
_DASHES = re.compile(r"-+")
MAX_LINE_CHARS = 1 << 16
TRUNCATED = "…"


def category_of(name: str) -> Category:
    """'[CUDA memcpy ...]' and '[CUDA memset]' rows are memory operations, every other row a kernel."""
    found = _MEM_NAME.match(name)
    if not found:
        return "kernel"
    return "memcpy" if found.group(1).lower() == "memcpy" else "memset"


def _is_rule(line: str) -> bool:
    text = line.strip()
    return bool(text) and set(text) <= {"-", " "}


def _is_table_header(line: str, following: str) -> bool:
    text = line.strip()
    return (text.startswith(("Time (%)", "Time(%)")) and "Total Time" in text and "Instances" in text
            and text.endswith("Name") and _is_rule(following))


def find_kern_sum(lines: list[str]) -> int | None:
    """Index of the kernel summary's header line: a column-format table anywhere in ``lines``, or the first
    header after a ``(cuda_gpu_kern_sum):`` banner; None when there is neither."""
    after_banner = False
    for index, line in enumerate(lines):
        if _is_table_header(line, lines[index + 1] if index + 1 < len(lines) else ""):
            return index
        if _BANNER.search(line):
            after_banner = True
        elif after_banner and line.strip():
            if line.lstrip().startswith("SKIPPED"):  # "SKIPPED: ... does not contain CUDA kernel data."
                raise TraceError(f"nsys skipped its kernel summary: {line.strip()[:200]}")
            return index
    return None


def _spans(rule: str) -> list[tuple[int, int]]:
    spans = [(m.start(), m.end()) for m in _DASHES.finditer(rule)]
    if spans:
        spans[-1] = (spans[-1][0], MAX_LINE_CHARS)  # the name runs to the end of its line
    return spans


def _table_rows(lines: Iterator[str], rule: str) -> Iterator[list[str]]:
    spans = _spans(rule)
    for line in lines:
        text = line.rstrip("\r\n")[:MAX_LINE_CHARS]
        yield [text[start:end].strip() for start, end in spans] if text.strip() else []


def parse_kern_sum_text(stream: BinaryIO, header_line: int, max_records: int, source_format: str) -> ParsedTrace:
    """The kernel summary at ``header_line``, a column-format table or a CSV header; records as
    ``summary_csv.summary_records`` gives them."""
    lines = text_lines(stream)
    try:
        for _ in range(header_line):
            if not lines.readline():
                raise TraceError("nsys kernel summary: the file ends before its header")
        header_text, following = lines.readline(), lines.readline()
        if _is_table_header(header_text, following):
            header = [h for h in (header_text[s:e].strip() for s, e in _spans(following)) if h]
            rows: Iterator[list[str]] = _table_rows(lines, following)
            warnings_extra = True
        else:
            csv.field_size_limit(MAX_FIELD_CHARS)
            reader = csv.reader(itertools.chain([header_text, following], lines))
            header = next(reader, [])
            rows, warnings_extra = reader, False
        try:
            parsed = summary_records(header, rows, max_records, source_format, "nsys kernel summary", "Name",
                                     "Instances", "Total Time", category_of)
        except csv.Error as exc:
            raise TraceError(f"malformed CSV in the nsys kernel summary: {exc}") from None
    finally:
        lines.detach()
    cut = sum(1 for k in parsed.kernels if k.name.endswith(TRUNCATED))
    if warnings_extra and cut:
        parsed.warnings.append(f"{cut} kernel names were cut by nsys's column format (ending in '…'): "
                               "use nsys stats --format csv for whole names")
    return parsed
