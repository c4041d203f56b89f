"""Tell a trace's format from its content (never from its file name)."""

from __future__ import annotations

import csv
from dataclasses import dataclass

from perfmodel.traces.nsys_text import find_kern_sum
from perfmodel.traces.records import TraceError
from perfmodel.traces.source import SQLITE_MAGIC, Opened

EXPECTED = ("a PyTorch profiler / Kineto Chrome trace (.json or .json.gz), an Nsight Compute --csv export, "
            "an nsys stats CSV (cuda_gpu_kern_sum, cuda_gpu_trace, gpukernsum, gputrace), an nsys SQLite "
            "export, or a rocprof CSV (results.csv, timestamps.csv, kernel_trace.csv, *.stats.csv)")
HEADER_SEARCH_LINES = 40  # nsys stats may print a banner before the CSV header


@dataclass(frozen=True)
class Detected:
    """A format name and, for CSV formats, the index of the header line."""

    format: str
    header_line: int = 0


def _looks_binary(head: bytes) -> bool:
    if b"\x00" in head[:4096]:
        return True
    sample = head[:4096]
    try:
        sample.decode("utf-8")
        return False
    except UnicodeDecodeError as exc:
        return exc.start < len(sample) - 4  # a cut multi-byte character at the end is fine


def _csv_format(cells: list[str]) -> str | None:
    names = {c.strip() for c in cells}
    lower = {c.lower() for c in names}
    if {"Kernel Name", "Metric Name"} <= names and ("Metric Value" in names or {"Invocations", "Average"} <= names):
        return "ncu_csv"
    metric_like = sum(1 for c in names if "__" in c and "." in c)
    if ("Kernel Name" in names and ("ID" in names or metric_like)) or (cells and cells[0] == "Metric Name"
                                                                      and metric_like):
        return "ncu_raw_csv"
    if "Name" in names and any(c.startswith("Total Time") for c in names) and "Instances" in names:
        return "nsys_kern_sum_csv"
    if "Name" in names and any(c.startswith("Start") for c in names) and any(
            c.startswith("Duration") for c in names) and ("CorrId" in names or "GrdX" in names):
        return "nsys_gpu_trace_csv"
    if {"name", "calls", "totaldurationns"} <= lower:
        return "rocprof_stats"
    if ("kernelname" in lower or "kernel_name" in lower) and (
            {"beginns", "endns"} <= lower or "durationns" in lower
            or {"start_timestamp", "end_timestamp"} <= lower):
        return "rocprof_csv"
    if {"gpu_model", "cu_per_gpu", "max_sclk"} <= lower:
        raise TraceError("an omniperf / rocprof-compute sysinfo.csv: the device's description, no kernel times; "
                         "upload the same run's pmc_perf.csv or timestamps.csv (with --hardware the device it names)")
    if {"device", "hbmbw", "fp32flops"} <= lower:
        raise TraceError("an omniperf / rocprof-compute roofline.csv: the device's measured peaks, no kernel times; "
                         "upload the same run's pmc_perf.csv or timestamps.csv")
    if "kernel_name" in lower or "kernelname" in lower:
        raise TraceError("a rocprof counter file without kernel times (no BeginNs/EndNs, DurationNs or "
                         "Start_Timestamp/End_Timestamp columns): upload results.csv, timestamps.csv or "
                         "kernel_trace.csv")
    return None


def detect(opened: Opened) -> Detected:
    """The format of an opened source; ``TraceError`` naming what was expected if it is none."""
    head = opened.head
    if not head.strip():
        if opened.gzipped:
            raise TraceError(f"the gzip stream is truncated or holds nothing: expected {EXPECTED}")
        raise TraceError(f"the file is empty: expected {EXPECTED}")
    if head.startswith(SQLITE_MAGIC):
        return Detected("nsys_sqlite")
    if _looks_binary(head):
        raise TraceError(f"binary data that is not gzip or SQLite: expected {EXPECTED}")
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    first = text.lstrip()[:1]
    if first in "{[":
        window = text[:HEAD_WINDOW]
        if '"traceEvents"' in window or ('"ph"' in window and '"ts"' in window):
            return Detected("pytorch_kineto")
        raise TraceError(f"JSON without 'traceEvents': not a Chrome/Kineto trace; expected {EXPECTED}")
    lines = text.splitlines()[:HEADER_SEARCH_LINES]
    if len(text) >= len(head) and len(lines) == HEADER_SEARCH_LINES:
        lines = lines[:-1]  # the last line of the head may be cut
    for index, row in enumerate(csv.reader(lines)):
        found = _csv_format(row) if len(row) >= 2 else None
        if found:
            return Detected(found, index)
    table = find_kern_sum(text.splitlines())  # nsys's printed table, or its CSV after other reports
    if table is not None:
        return Detected("nsys_kern_sum_csv", table)
    raise TraceError(f"unrecognised content (no known header in the first {HEADER_SEARCH_LINES} lines): "
                     f"expected {EXPECTED}")


HEAD_WINDOW = 65536
