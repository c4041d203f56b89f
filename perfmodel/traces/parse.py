"""``parse_trace``: detect a trace's format from its content and run the matching parser."""

from __future__ import annotations

from perfmodel.traces import kineto, ncu, nsys, rocprof
from perfmodel.traces.detect import detect
from perfmodel.traces.gc_pause import without_gc
from perfmodel.traces.records import MAX_RECORDS, ParsedTrace
from perfmodel.traces.source import Source, byte_stream, open_source

MAX_WARNINGS = 100


@without_gc
def parse_trace(source: Source, filename: str | None = None, *, max_records: int = MAX_RECORDS) -> ParsedTrace:
    """Parse one profiler trace. ``source`` is the content (bytes), a path (str or PathLike) or a
    binary stream; ``filename`` is only quoted in messages (the format comes from the content).

    Raises ``TraceError`` (a ``ValueError``) for an empty, broken or unknown file. The cyclic garbage collector
    is paused meanwhile (``gc_pause``).
    """
    opened = open_source(source)
    detected = detect(opened)
    fmt = detected.format
    if fmt == "nsys_sqlite" and not opened.gzipped and opened.path is not None:
        parsed = nsys.parse_sqlite(opened.path, None, max_records)
    else:
        with byte_stream(opened) as stream:
            if fmt == "nsys_sqlite":
                parsed = nsys.parse_sqlite(None, stream, max_records)
            elif fmt == "pytorch_kineto":
                top_list = opened.head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n").startswith("[")
                parsed = kineto.parse_kineto(stream, top_list, max_records, opened.head)
            else:
                parser = {
                    "ncu_csv": ncu.parse_long, "ncu_raw_csv": ncu.parse_raw,
                    "nsys_kern_sum_csv": nsys.parse_kern_sum, "nsys_gpu_trace_csv": nsys.parse_gpu_trace,
                    "rocprof_csv": rocprof.parse_trace_csv, "rocprof_stats": rocprof.parse_stats,
                }[fmt]
                parsed = parser(stream, detected.header_line, max_records)
    if len(parsed.warnings) > MAX_WARNINGS:
        extra = len(parsed.warnings) - MAX_WARNINGS
        parsed.warnings = [*parsed.warnings[:MAX_WARNINGS], f"... and {extra} more warnings"]
    if filename:
        parsed.warnings = [f"{filename}: {w}" for w in parsed.warnings]
    return parsed
