"""A trace into the store: parse, match ops, keep every kernel, store runs and kernels in one transaction.

Used by ``POST /api/v1/traces`` and ``perfmodel measure``. The same content twice for the same device
is the same trace (SHA-256), not duplicate runs, also when both arrive at once (a unique index decides);
a file that does not parse is recorded as a failed upload and raises ``TraceError``; nothing stored is
touched.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from perfmodel.hardware import Hardware
from perfmodel.ops import make_op
from perfmodel.store import RunIn, Store, TraceKernelIn, TraceKernelRow
from perfmodel.store.base import MAX_RUN_TIME_S
from perfmodel.store.tags import check_tags
from perfmodel.traces.device_check import device_mismatch
from perfmodel.traces.geometry_ops import no_launch_work
from perfmodel.traces.matching import MatchResult, match_runs
from perfmodel.traces.parse import parse_trace
from perfmodel.traces.records import CounterTotals, KernelRecord, ParsedTrace, TraceError
from perfmodel.traces.roof import roof_alarms

CHUNK_BYTES = 1 << 20
MAX_ALARMS = 100


@dataclass
class Ingested:
    """What an ingest did: the upload id, whether it was already stored, and what the parse said."""

    upload_id: int
    duplicate: bool
    warnings: list[str] = field(default_factory=list)
    roof_alarms: list[dict[str, Any]] = field(default_factory=list)


def hash_and_size(stream: BinaryIO) -> tuple[str, int]:
    """SHA-256 (hex) and size in bytes of a seekable stream, left at its start."""
    digest = hashlib.sha256()
    size = 0
    stream.seek(0)
    while chunk := stream.read(CHUNK_BYTES):
        digest.update(chunk)
        size += len(chunk)
    stream.seek(0)
    return digest.hexdigest(), size


def runs_and_kernels(hardware: Hardware, parsed: ParsedTrace, matched: MatchResult, source: str,
                     filename: str, trace_tags: Mapping[str, str] | None = None,
                     ) -> tuple[list[RunIn], list[TraceKernelIn]]:
    """Runs for the matched ops the model accepts (each with the trace's tags), and every kernel grouped by
    (name, category, run, op)."""
    runs: list[RunIn] = []
    run_of_match: dict[int, int] = {}
    refused: dict[int, str] = {}  # match index -> why no run was made
    for i, run in enumerate(matched.runs):
        if not run.measured_time_s < MAX_RUN_TIME_S:  # as POST /runs refuses: 1e302 s is a broken record
            refused[i] = f"measured {run.measured_time_s:g} s: not below {MAX_RUN_TIME_S:g} s, not a kernel's time"
            continue
        try:
            op = make_op(run.op).to_dict()
        except ValueError:
            continue  # not an op the model accepts: its kernels stay unmodelled
        run_of_match[i] = len(runs)
        dtype = op.get("dtype")
        runs.append(RunIn(hardware_id=hardware.id, op=op, measured_time_s=max(run.measured_time_s, 1e-12),
                          source=source, tags={**(trace_tags or {}), "op_name": run.op_name[:400],
                                               "trace": filename[:400],
                                               "match_source": run.source, "confidence": run.confidence},
                          dtype=dtype if isinstance(dtype, str) else None))
    # unmodelled kernels also by reason: one NCCL kernel name under record_param_comms serves several collectives
    groups: dict[tuple[str, str, int | None, str | None, str | None], list[Any]] = defaultdict(
        lambda: [0.0, 0, CounterTotals()])
    for kernel, match_index, reason in zip(parsed.kernels, matched.kernel_runs, matched.kernel_reasons,
                                           strict=True):
        run_index = None if match_index is None else run_of_match.get(match_index)
        op_name = kernel.innermost_op.name if kernel.innermost_op else kernel.op_name
        why = None if run_index is not None else reason or refused.get(
            -1 if match_index is None else match_index, "the matched op is not one the model accepts")
        entry = groups[(kernel.name, kernel.category, run_index, op_name, why)]
        entry[0] += kernel.duration_s
        entry[1] += kernel.instances
        if kernel.counters:
            entry[2].add(kernel.counters, kernel.duration_s)
    kernels = [TraceKernelIn(name=name, category=category, duration_s=time_s, instances=count,
                             op_name=op_name[:200] if op_name else None,
                             op_kind=None if run_index is None else str(runs[run_index].op["kind"]),
                             run_index=run_index, counters=counters.result(), reason=why)
               for (name, category, run_index, op_name, why), (time_s, count, counters) in groups.items()]
    return runs, kernels


def alarms_json(hardware: Hardware, kernels: list[KernelRecord], matched: MatchResult) -> list[dict[str, Any]]:
    """Roof alarms of the kernels with counters and of the matched runs, as JSON."""
    alarms = roof_alarms(hardware, [*(k for k in kernels if k.counters), *matched.runs], limit=MAX_ALARMS)
    return [{"name": a.name, "quantity": a.quantity, "attained_per_s": a.attained_per_s, "roof_per_s": a.roof_per_s,
             "kind": a.kind, "reason": a.reason} for a in alarms[:MAX_ALARMS]]


def _tags_not_applied(upload_id: int, stored: Mapping[str, str], given: Mapping[str, str]) -> list[str]:
    """A duplicate upload keeps the stored trace as it is: say so where its tags were not the stored ones (the
    tags of a second upload of one file were dropped without a word)."""
    if not given or dict(given) == dict(stored):
        return []
    shown = ", ".join(f"{k}={v}" for k, v in sorted(stored.items())) or "none"
    return [f"this file is already trace {upload_id} of this device (tags: {shown}); the tags sent with this upload "
            "were not applied"]


def ingest_trace(store: Store, hardware: Hardware, stream: BinaryIO, filename: str,
                 source: str | None = None, tags: Mapping[str, str] | None = None,
                 parsed_and_matched: tuple[ParsedTrace, MatchResult] | None = None) -> Ingested:
    """Store one trace for ``hardware`` (see the module docstring) with its ``tags`` (``store.tags``; on the
    upload and on each of its runs). ``parsed_and_matched``: the stream already parsed and matched (the
    command line reports it first), so it is not parsed twice."""
    checked = check_tags(tags or {})
    sha256, size = hash_and_size(stream)
    known = store.find_trace_upload(hardware.id, sha256)
    if known is not None:
        return Ingested(known.id, duplicate=True, warnings=_tags_not_applied(known.id, known.tags, checked))
    try:
        parsed, matched = parsed_and_matched or _parse_and_match(stream, filename)
    except TraceError as exc:
        store.add_trace_upload(hardware.id, filename, "unknown", size, sha256, status="failed",
                               error=str(exc)[:10_000], tags=checked)
        raise
    runs, kernels = runs_and_kernels(hardware, parsed, matched, source or f"trace:{parsed.format}", filename,
                                     checked)
    stored = store.store_trace(hardware.id, filename, parsed.format, size, sha256, runs, kernels, checked)
    if stored.duplicate:  # a concurrent upload of the same content stored it first: the same trace
        return Ingested(stored.upload_id, duplicate=True)
    no_work = no_launch_work(parsed.kernels, parsed.format)  # said first: nothing of such a file is modelled
    warnings = [no_work, *parsed.warnings] if no_work else list(parsed.warnings)
    mismatch = device_mismatch(hardware, parsed.device_name, parsed.kernels)
    if mismatch:
        warnings.insert(0, mismatch)
    return Ingested(stored.upload_id, False, warnings, alarms_json(hardware, parsed.kernels, matched))


def _parse_and_match(stream: BinaryIO, filename: str) -> tuple[ParsedTrace, MatchResult]:
    parsed = parse_trace(stream, filename)
    return parsed, match_runs(parsed)


def stored_counter_kernels(rows: Sequence[TraceKernelRow], source_format: str) -> list[KernelRecord]:
    """The stored kernels that carry profiler counters, as records (for roof alarms and the measured roofline)."""
    return [KernelRecord(name=k.name, category=k.category, duration_s=k.duration_s,  # type: ignore[arg-type]
                         source_format=source_format, counters=k.counters, instances=k.instances)
            for k in rows if k.counters]
