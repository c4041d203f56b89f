"""rocprof CSVs: v1 ``results.csv`` / ``timestamps.csv`` (BeginNs/EndNs or DurationNs), rocprofv3
``kernel_trace.csv`` and omniperf ``timestamps.csv`` (Start_Timestamp/End_Timestamp), and the
``*.stats.csv`` summaries (Name, Calls, TotalDurationNs, AverageNs, Percentage). Times in ns.

AMD grid sizes count work-items; records carry CUDA-style grids (work-groups per dimension).
"""

from __future__ import annotations

import math
from typing import BinaryIO

from perfmodel.traces.csvrows import cell, column_index, csv_rows
from perfmodel.traces.records import MAX_RECORDS, KernelRecord, ParsedTrace, TraceError, as_float, as_int, clip_name
from perfmodel.traces.summary_csv import parse_summary_csv

TRACE_FORMAT = "rocprof_csv"
STATS_FORMAT = "rocprof_stats"
NS = 1e-9


def _grid_blocks(grid: list[int | None], block: list[int | None]) -> tuple[tuple[int, int, int] | None,
                                                                           tuple[int, int, int] | None]:
    if grid[0] is None:
        return None, None
    work_items = [g or 1 for g in grid]
    group = [b or 1 for b in block] if block[0] is not None else None
    blocks = [math.ceil(w / g) for w, g in zip(work_items, group, strict=True)] if group else work_items
    return (blocks[0], blocks[1], blocks[2]), ((group[0], group[1], group[2]) if group else None)


def parse_trace_csv(stream: BinaryIO, header_line: int, max_records: int = MAX_RECORDS) -> ParsedTrace:
    """One record per kernel dispatch."""
    records: list[KernelRecord] = []
    warnings: list[str] = []
    with csv_rows(stream, header_line) as rows:
        header = next(rows)
        name = column_index(header, "KernelName", "Kernel_Name")
        begin, end = column_index(header, "BeginNs", "Start_Timestamp"), column_index(header, "EndNs", "End_Timestamp")
        duration = column_index(header, "DurationNs")
        if name is None or ((begin is None or end is None) and duration is None):
            raise TraceError("rocprof CSV without a kernel name and BeginNs/EndNs, DurationNs or "
                             "Start_Timestamp/End_Timestamp columns")
        device = column_index(header, "gpu-id", "GPU_ID", "Agent_Id")
        queue = column_index(header, "queue-id", "Queue_Id", "Stream_Id")
        correlation = column_index(header, "Correlation_Id", "Index", "Dispatch_ID", "Dispatch_Id")
        grid = [column_index(header, "grd", "Grid_Size", "Grid_Size_X"), column_index(header, "Grid_Size_Y"),
                column_index(header, "Grid_Size_Z")]
        block = [column_index(header, "wgr", "Workgroup_Size", "Workgroup_Size_X"),
                 column_index(header, "Workgroup_Size_Y"), column_index(header, "Workgroup_Size_Z")]
        for row in rows:
            start = as_float(cell(row, begin))
            stop = as_float(cell(row, end))
            if duration is not None and as_float(cell(row, duration)) is not None:
                elapsed = as_float(cell(row, duration))
            elif start is not None and stop is not None and stop >= start:
                elapsed = stop - start
            else:
                continue
            if len(records) >= max_records:
                warnings.append(f"more than {max_records} kernels: the rest were not read")
                break
            grids, blocks = _grid_blocks([as_int(cell(row, c)) for c in grid], [as_int(cell(row, c)) for c in block])
            records.append(KernelRecord(
                name=clip_name(cell(row, name)), category="kernel", duration_s=(elapsed or 0.0) * NS,
                source_format=TRACE_FORMAT, start_s=start * NS if start is not None else None,
                device=as_int(cell(row, device)), stream=as_int(cell(row, queue)),
                correlation=as_int(cell(row, correlation)), grid=grids, block=blocks))
    return ParsedTrace(TRACE_FORMAT, records, warnings)


def parse_stats(stream: BinaryIO, header_line: int, max_records: int = MAX_RECORDS) -> ParsedTrace:
    """``*.stats.csv``: one record per kernel name with its call count and total time (ns)."""
    return parse_summary_csv(stream, header_line, max_records, STATS_FORMAT, "rocprof stats", "Name", "Calls",
                             "TotalDurationNs")
