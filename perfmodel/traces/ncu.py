"""Nsight Compute ``--csv`` exports: the long form (one row per kernel x metric), its ``--print-summary
per-kernel`` variant (one row per launch shape x metric: Invocations, Minimum/Maximum/Average), and the wide
``--page raw`` form (one row per kernel, one column per metric, an optional units row)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from perfmodel.traces import ncu_metrics
from perfmodel.traces.csvrows import cell, column_index, csv_rows
from perfmodel.traces.records import (
    MAX_RECORDS,
    CounterTotals,
    KernelRecord,
    ParsedTrace,
    TraceError,
    as_float,
    as_int,
    clip_name,
    dim3,
)

LONG_FORMAT = "ncu_csv"
RAW_FORMAT = "ncu_raw_csv"
_INFO_COLUMNS = {"id", "process id", "process name", "host name", "kernel name", "kernel time", "context",
                 "stream", "block size", "grid size", "device", "cc", "section name", "metric name"}


@dataclass
class _Kernel:
    name: str
    device: int | None = None
    stream: int | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    invocations: int = 1  # launches a per-kernel summary row stands for (its metrics are their averages)


def _sol_warning(records: list[KernelRecord], warnings: list[str]) -> None:
    """Name what a full roofline point lacks when only Speed-of-Light percentages were collected."""
    partial = sum(1 for r in records if ncu_metrics.sol_only(dict(r.counters)))
    if partial:
        warnings.append(f"{partial} of {len(records)} kernels have Speed-of-Light percentages only (the default "
                        "set): their roofline points are shares of peak, bytes derived from the device's "
                        "bandwidth, no FLOPs; for a full point add --section SpeedOfLight_RooflineChart (FLOPs, DRAM "
                        "bytes) or collect " + ", ".join(ncu_metrics.FULL_POINT_METRICS))


def _record(kernel: _Kernel, source_format: str, warnings: list[str]) -> KernelRecord | None:
    duration, counters = ncu_metrics.counters(kernel.metrics)
    if duration is None:
        warnings.append(f"kernel {kernel.name[:80]!r}: no gpu__time_duration or sm cycles and clock: skipped")
        return None
    n = kernel.invocations
    if n > 1:  # averages of n launches: totals are n times them, rates and settings stay
        counters = {k: v * n if CounterTotals.additive(k) else v for k, v in counters.items()}
    return KernelRecord(name=kernel.name, category="kernel", duration_s=duration * n, source_format=source_format,
                        device=kernel.device, stream=kernel.stream, grid=kernel.grid, block=kernel.block,
                        counters=counters, instances=n)


def _value(raw: str, unit: str, metric: str, warnings: list[str]) -> float | None:
    value = as_float(raw)
    if value is None:
        return None
    scale = ncu_metrics.unit_scale(unit)
    if scale is None:
        if len(warnings) < 50:
            warnings.append(f"metric {metric}: unknown unit {unit!r}, value kept as printed")
        return value
    return value * scale


def parse_long(stream: BinaryIO, header_line: int, max_records: int = MAX_RECORDS) -> ParsedTrace:
    """The long ``--csv`` form: rows grouped by kernel ``ID`` (a per-kernel summary: by name and launch shape,
    the ``Average`` column its value)."""
    warnings: list[str] = []
    kernels: dict[str, _Kernel] = {}
    with csv_rows(stream, header_line) as rows:
        header = next(rows)
        ids, names = column_index(header, "ID"), column_index(header, "Kernel Name")
        metric_col, unit_col = column_index(header, "Metric Name"), column_index(header, "Metric Unit")
        value_col = column_index(header, "Metric Value")
        invocations = column_index(header, "Invocations") if value_col is None else None
        if invocations is not None:
            value_col = column_index(header, "Average")
        device, stream_col = column_index(header, "Device"), column_index(header, "Stream")
        grid, block = column_index(header, "Grid Size"), column_index(header, "Block Size")
        if names is None or metric_col is None or value_col is None:
            raise TraceError("Nsight Compute CSV without 'Kernel Name', 'Metric Name' or 'Metric Value' "
                             "('Average' in a per-kernel summary) columns")
        needed = max(c for c in (ids, names, metric_col, value_col) if c is not None)
        for row in rows:
            if len(row) <= needed:
                continue  # program output or profiler messages after the CSV
            key = cell(row, ids) or "\x00".join(cell(row, c) for c in (names, block, grid, device) if c is not None)
            if not key.strip("\x00"):
                continue
            kernel = kernels.get(key)
            if kernel is None:
                if len(kernels) >= max_records:
                    warnings.append(f"more than {max_records} kernels: the rest were not read")
                    break
                kernel = kernels[key] = _Kernel(clip_name(cell(row, names)), as_int(cell(row, device)),
                                                as_int(cell(row, stream_col)), dim3(cell(row, grid)) if grid
                                                is not None else None, dim3(cell(row, block)) if block
                                                is not None else None)
                kernel.invocations = max(1, as_int(cell(row, invocations)) or 1) if invocations is not None else 1
            unit = cell(row, unit_col)
            metric = ncu_metrics.metric_name(cell(row, metric_col), unit)
            raw = cell(row, value_col)
            if metric == "Grid Size":
                kernel.grid = kernel.grid or dim3(raw)
            elif metric == "Block Size":
                kernel.block = kernel.block or dim3(raw)
            elif metric in ncu_metrics.WANTED:
                value = _value(raw, unit, metric, warnings)
                if value is not None:
                    kernel.metrics[metric] = value
    records = [r for k in kernels.values() if (r := _record(k, LONG_FORMAT, warnings)) is not None]
    _sol_warning(records, warnings)
    return ParsedTrace(LONG_FORMAT, records, warnings)


def _units_row(row: list[str], id_col: int | None, metric_cols: list[int]) -> bool:
    """The row after the header in ``--page raw`` holds units: empty ID, unit words, no numbers."""
    if id_col is not None and cell(row, id_col).strip():
        return False
    return all(as_float(cell(row, i)) is None for i in metric_cols)


def parse_raw(stream: BinaryIO, header_line: int, max_records: int = MAX_RECORDS) -> ParsedTrace:
    """The wide ``--page raw`` form (or a pivot of it): one row per kernel."""
    warnings: list[str] = []
    records: list[KernelRecord] = []
    with csv_rows(stream, header_line) as rows:
        header = next(rows)
        id_col = column_index(header, "ID")
        if id_col is None and header and header[0].strip() == "Metric Name":
            id_col = 0  # a pivot table whose index column kept the name 'Metric Name'
        names = column_index(header, "Kernel Name")
        if names is None:
            warnings.append("no 'Kernel Name' column: kernels are named by their ID")
        info = {i for i, h in enumerate(header) if h.strip().lower() in _INFO_COLUMNS}
        metric_cols = [i for i in range(len(header)) if i not in info and i != id_col]
        metrics = {i: ncu_metrics.metric_name(header[i]) for i in metric_cols}
        units = {i: "" for i in metric_cols}
        body: Iterator[list[str]] = rows
        first = next(body, None)
        if first is not None and _units_row(first, id_col, metric_cols):
            units = {i: cell(first, i) for i in metric_cols}
            first = None
        else:
            warnings.append("no units row: values taken in Nsight Compute base units (nsecond, byte)")
            units = {i: ("nsecond" if metrics[i] in ncu_metrics.DURATION_METRICS else "") for i in metric_cols}
        device, stream_col = column_index(header, "Device"), column_index(header, "Stream")
        grid, block = column_index(header, "Grid Size"), column_index(header, "Block Size")

        def all_rows() -> Iterator[list[str]]:
            if first is not None:
                yield first
            yield from body

        for row in all_rows():
            if not row or not any(c.strip() for c in row):
                continue
            if len(records) >= max_records:
                warnings.append(f"more than {max_records} kernels: the rest were not read")
                break
            name = clip_name(cell(row, names)) if names is not None else f"kernel {cell(row, id_col)}"
            kernel = _Kernel(name, as_int(cell(row, device)), as_int(cell(row, stream_col)),
                             dim3(cell(row, grid)) if grid is not None else None,
                             dim3(cell(row, block)) if block is not None else None)
            for i in metric_cols:
                if metrics[i] in ncu_metrics.WANTED:
                    value = _value(cell(row, i), units[i], metrics[i], warnings)
                    if value is not None:
                        kernel.metrics[metrics[i]] = value
            record = _record(kernel, RAW_FORMAT, warnings)
            if record is not None:
                records.append(record)
    _sol_warning(records, warnings)
    return ParsedTrace(RAW_FORMAT, records, warnings)
