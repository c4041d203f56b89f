"""rocprof CSVs: v1 ``results.csv`` / ``timestamps.csv`` (BeginNs/EndNs or DurationNs), rocprofv3
``kernel_trace.csv`` and omniperf ``timestamps.csv`` / ``pmc_perf.csv`` (Start_Timestamp/End_Timestamp), rocprofv3
``counter_collection.csv`` (one row per dispatch x counter), and the ``*.stats.csv`` summaries (Name, Calls,
TotalDurationNs, AverageNs, Percentage). Times in ns.

Counter columns (``--pmc`` in v1 and omniperf files, Counter_Name/Counter_Value rows in rocprofv3) become the
records' normalised counters (``rocprof_counters``). AMD grid sizes count work-items; records carry CUDA-style
grids (work-groups per dimension).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, BinaryIO

from perfmodel.traces import rocprof_counters
from perfmodel.traces.csvrows import cell, column_index, csv_rows
from perfmodel.traces.records import MAX_RECORDS, KernelRecord, ParsedTrace, TraceError, as_float, as_int, clip_name
from perfmodel.traces.summary_csv import parse_summary_csv

TRACE_FORMAT = "rocprof_csv"
COUNTER_FORMAT = "rocprofv3_counter_csv"
STATS_FORMAT = "rocprof_stats"
NS = 1e-9
MAX_COUNTERS_PER_DISPATCH = 4096


def _grid_blocks(grid: list[int | None], block: list[int | None]) -> tuple[tuple[int, int, int] | None,
                                                                           tuple[int, int, int] | None]:
    if grid[0] is None:
        return None, None
    work_items = [g or 1 for g in grid]
    group = [b or 1 for b in block] if block[0] is not None else None
    blocks = [math.ceil(w / g) for w, g in zip(work_items, group, strict=True)] if group else work_items
    return (blocks[0], blocks[1], blocks[2]), ((group[0], group[1], group[2]) if group else None)


class _Columns:
    """The columns every rocprof layout shares (kernel, times, device, queue, dispatch, launch sizes)."""

    def __init__(self, header: list[str]) -> None:
        self.name = column_index(header, "KernelName", "Kernel_Name")
        self.begin = column_index(header, "BeginNs", "Start_Timestamp")
        self.end = column_index(header, "EndNs", "End_Timestamp")
        self.duration = column_index(header, "DurationNs")
        self.device = column_index(header, "gpu-id", "GPU_ID", "Agent_Id")
        self.queue = column_index(header, "queue-id", "Queue_Id", "Stream_Id")
        self.dispatch = column_index(header, "Dispatch_ID", "Dispatch_Id", "Index", "Correlation_Id")
        self.correlation = column_index(header, "Correlation_Id", "Index", "Dispatch_ID", "Dispatch_Id")
        self.wave = column_index(header, "wave_size", "Wave_Size")
        self.grid = [column_index(header, "grd", "Grid_Size", "Grid_Size_X"), column_index(header, "Grid_Size_Y"),
                     column_index(header, "Grid_Size_Z")]
        self.block = [column_index(header, "wgr", "Workgroup_Size", "Workgroup_Size_X"),
                      column_index(header, "Workgroup_Size_Y"), column_index(header, "Workgroup_Size_Z")]

    def times_ns(self, row: list[str], rounded: list[int]) -> tuple[float | None, float | None]:
        """(start, elapsed) in ns; counts rows whose timestamps were written rounded ('8.1097E+14')."""
        start, stop = as_float(cell(row, self.begin)), as_float(cell(row, self.end))
        if start is not None and "e" in cell(row, self.begin).lower():
            rounded[0] += 1
        if self.duration is not None and (elapsed := as_float(cell(row, self.duration))) is not None:
            return start, elapsed
        if start is not None and stop is not None and stop >= start:
            return start, stop - start
        return start, None

    def device_of(self, row: list[str]) -> int | None:
        text = cell(row, self.device).strip()
        return as_int(text.split()[-1]) if text else None  # rocprofv3 writes "Agent 1" (or "GPU 0", type-relative)

    def launch(self, row: list[str]) -> tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]:
        return _grid_blocks([as_int(cell(row, c)) for c in self.grid], [as_int(cell(row, c)) for c in self.block])


def _rounded_warning(rounded: int, warnings: list[str]) -> None:
    if rounded:
        warnings.append(f"{rounded} rows have timestamps in rounded scientific notation (e.g. '8.1097E+14'): "
                        "their durations are lost (0 ns); use the file as rocprof wrote it, not re-saved")


class _Shared:
    """Kernel names and launch sizes seen before, kept once (a trace repeats a few of them many times)."""

    def __init__(self, cols: _Columns) -> None:
        self.cols = cols
        self.names: dict[str, str] = {}
        self.launches: dict[tuple[str, ...], tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]] = {}

    def name(self, row: list[str]) -> str:
        text = cell(row, self.cols.name)
        found = self.names.get(text)
        if found is None:
            found = self.names[text] = clip_name(text)
        return found

    def launch(self, row: list[str]) -> tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]:
        key = tuple(cell(row, c) for c in (*self.cols.grid, *self.cols.block))
        found = self.launches.get(key)
        if found is None:
            found = self.launches[key] = self.cols.launch(row)
        return found


def _counter_collection(header: list[str], rows: Iterator[list[str]], max_records: int) -> ParsedTrace:
    """rocprofv3 ``counter_collection.csv``: rows of one dispatch (same Dispatch_Id) are one kernel launch."""
    cols = _Columns(header)
    counter_name, counter_value = column_index(header, "Counter_Name"), column_index(header, "Counter_Value")
    if cols.name is None or cols.dispatch is None or cols.begin is None or cols.end is None:
        raise TraceError("rocprofv3 counter collection without Kernel_Name, Dispatch_Id or Start_Timestamp/"
                         "End_Timestamp columns: collect with --kernel-trace too and upload kernel_trace.csv")
    warnings: list[str] = []
    shared = _Shared(cols)
    dispatches: dict[str, tuple[dict[str, Any], dict[str, float]]] = {}  # record fields, counter values
    rounded = [0]
    for row in rows:
        key = cell(row, cols.dispatch)
        if not key:
            continue
        entry = dispatches.get(key)
        if entry is None:
            if len(dispatches) >= max_records:
                warnings.append(f"more than {max_records} dispatches: the rest were not read")
                break
            start, elapsed = cols.times_ns(row, rounded)
            if elapsed is None:
                raise TraceError(f"dispatch {key!r}: Start_Timestamp/End_Timestamp {cell(row, cols.begin)!r}/"
                                 f"{cell(row, cols.end)!r} are not times in ns")
            grid, block = shared.launch(row)
            entry = dispatches[key] = ({
                "name": shared.name(row), "duration_s": elapsed * NS,
                "start_s": start * NS if start is not None else None, "device": cols.device_of(row),
                "stream": as_int(cell(row, cols.queue)), "correlation": as_int(cell(row, cols.correlation)),
                "grid": grid, "block": block}, {})
        name, values = cell(row, counter_name).strip(), entry[1]
        if name in rocprof_counters.WANTED and len(values) < MAX_COUNTERS_PER_DISPATCH:
            value = as_float(cell(row, counter_value))
            if value is not None:
                values[name] = values.get(name, 0.0) + value  # one counter's instances (XCDs, dimensions) add up
    records = [KernelRecord(category="kernel", source_format=COUNTER_FORMAT, **fields,
                            counters=rocprof_counters.normalise(values) if values else {})
               for fields, values in dispatches.values()]
    _rounded_warning(rounded[0], warnings)
    return ParsedTrace(COUNTER_FORMAT, records, warnings)


def parse_trace_csv(stream: BinaryIO, header_line: int, max_records: int = MAX_RECORDS) -> ParsedTrace:
    """One record per kernel dispatch, with its counters where the file has counter columns or rows."""
    records: list[KernelRecord] = []
    warnings: list[str] = []
    with csv_rows(stream, header_line) as rows:
        header = next(rows)
        if column_index(header, "Counter_Name") is not None and column_index(header, "Counter_Value") is not None:
            return _counter_collection(header, rows, max_records)
        cols = _Columns(header)
        if cols.name is None or ((cols.begin is None or cols.end is None) and cols.duration is None):
            raise TraceError("rocprof CSV without a kernel name and BeginNs/EndNs, DurationNs or "
                             "Start_Timestamp/End_Timestamp columns")
        counter_cols = {i: h.strip() for i, h in enumerate(header) if h.strip() in rocprof_counters.WANTED}
        shared = _Shared(cols)
        rounded = [0]
        for row in rows:
            start, elapsed = cols.times_ns(row, rounded)
            if elapsed is None:
                continue
            if len(records) >= max_records:
                warnings.append(f"more than {max_records} kernels: the rest were not read")
                break
            grid, block = shared.launch(row)
            values = {name: v for i, name in counter_cols.items() if (v := as_float(cell(row, i))) is not None}
            records.append(KernelRecord(
                name=shared.name(row), category="kernel", duration_s=elapsed * NS,
                source_format=TRACE_FORMAT, start_s=start * NS if start is not None else None,
                device=cols.device_of(row), stream=as_int(cell(row, cols.queue)),
                correlation=as_int(cell(row, cols.correlation)), grid=grid, block=block,
                counters=rocprof_counters.normalise(values, as_int(cell(row, cols.wave))) if values else {}))
        _rounded_warning(rounded[0], warnings)
    return ParsedTrace(TRACE_FORMAT, records, warnings)


def parse_stats(stream: BinaryIO, header_line: int, max_records: int = MAX_RECORDS) -> ParsedTrace:
    """``*.stats.csv``: one record per kernel name with its call count and total time (ns)."""
    return parse_summary_csv(stream, header_line, max_records, STATS_FORMAT, "rocprof stats", "Name", "Calls",
                             "TotalDurationNs")
