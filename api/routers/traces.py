"""POST /traces (upload a profiler trace: parse, match ops, store runs and kernels), GET /traces[/{id}].

The same file twice for the same device is the same trace (content hash), not duplicate runs. A file
that does not parse is recorded as a failed upload and answered with a 422; nothing stored is touched.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, File, Form, HTTPException, Path, Query, Response, UploadFile
from pydantic import BaseModel, Field

from api.deps import get_state, require_read, require_write
from api.schemas import Versioned
from api.state import AppState
from perfmodel.hardware import Hardware
from perfmodel.store import StoreError, TraceKernelRow, TraceTotals, TraceUploadRow
from perfmodel.store.base import storable
from perfmodel.store.tags import check_tags, parse_tags
from perfmodel.traces import KernelRecord, MatchResult, TraceError
from perfmodel.traces.ingest import alarms_json, ingest_trace, stored_counter_kernels
from perfmodel.traces.matching import reason_category
from perfmodel.traces.measured_roofline import counter_points, measured_roofline_json
from perfmodel.traces.source import ParseLimits, TraceLimitExceeded, parse_limits

router = APIRouter(tags=["traces"])
UPLOAD_ID = Path(ge=1, le=2**31 - 1)
MAX_LISTED_UNMODELLED = 50
MAX_LISTED_COUNTER_POINTS = 100
LIMIT_SETTINGS = {"max_bytes": "PERFMODEL_MAX_TRACE_BYTES", "max_gzip_ratio": "PERFMODEL_MAX_TRACE_GZIP_RATIO",
                  "max_s": "PERFMODEL_MAX_PARSE_S"}


class UnmodelledOut(BaseModel):
    name: str
    time_s: float
    count: int
    reason: str


class AlarmOut(BaseModel):
    name: str
    quantity: str
    attained_per_s: float
    roof_per_s: float
    kind: str
    reason: str


class KernelOut(BaseModel):
    name: str
    category: str
    duration_s: float
    instances: int
    op_name: str | None
    op_kind: str | None
    run_id: int | None
    counters: dict[str, float]
    reason: str | None


class TraceOut(Versioned):
    id: int
    hardware: str
    filename: str
    format: str
    size_bytes: int
    sha256: str
    status: str
    created_at: datetime
    duplicate: bool = False
    tags: dict[str, str] = Field(default_factory=dict, description="commit, environment (silicon, emulator, "
                                 "simulator, fpga), driver / library versions, clocks: what the upload said")
    kernels: int = Field(description="kernel launches: every GPU activity (kernel, copy, set) the trace timed")
    distinct_kernels: int = Field(default=0, description="stored kernel rows: the launches grouped by name, "
                                  "category, matched op and reason (the uploads table's 'Distinct kernels')")
    matched_ops: int
    runs_created: int
    total_kernel_time_s: float
    matched_time_s: float
    unmodelled_time_share: float
    # shares of the kernel time: matched per match source (framework shapes, counters, grid/block...), unmodelled
    # per reason category (shapes not recorded, unrecognised kernel...); empty in the list of uploads
    matched_share_by_source: dict[str, float] = Field(default_factory=dict)
    unmodelled_share_by_category: dict[str, float] = Field(default_factory=dict)
    unmodelled: list[UnmodelledOut]
    roof_alarms: list[AlarmOut]
    warnings: list[str]


class CounterPointOut(BaseModel):
    name: str
    launches: int
    time_s: float
    flops: float
    bytes_by_level: dict[str, float]
    share_of_roof: dict[str, float]
    nearest_roof: str
    derived: list[str] = []  # what came from Speed-of-Light percentages, not counted bytes/FLOPs


class MeasuredRooflineOut(BaseModel):
    """Kernels with profiler counters against the device's roofs: the share of their time at 80 % or more of a
    roof (``at_roof``), at 50-80 % (``near_roof``), below half of every roof (``far_below``); the longest 100."""

    time_by_headroom: dict[str, float]
    kernels: list[CounterPointOut]


class TraceDetail(TraceOut):
    kernel_rows: list[KernelOut]
    measured_roofline: MeasuredRooflineOut | None = None


class TraceList(Versioned):
    items: list[TraceOut]


def _unmodelled(rows: list[TraceKernelRow]) -> list[dict[str, Any]]:
    """The unmodelled kernels by name and reason (one NCCL kernel name serves all-reduce and all-to-all
    alike), longest total first (the first ``MAX_LISTED_UNMODELLED``)."""
    grouped: dict[tuple[str, str | None], list[float]] = {}
    for k in rows:
        if k.run_id is None:
            entry = grouped.setdefault((k.name, k.reason), [0.0, 0])
            entry[0] += k.duration_s
            entry[1] += k.instances
    listed = sorted(grouped.items(), key=lambda item: -item[1][0])[:MAX_LISTED_UNMODELLED]
    return [{"name": name, "time_s": t, "count": int(n), "reason": reason or "not modelled"}
            for (name, reason), (t, n) in listed]


def _shares(state: AppState, upload_id: int, rows: list[TraceKernelRow], total_s: float) -> dict[str, Any]:
    """The kernel time's shares: matched per match source, unmodelled per reason category (largest first)."""
    if total_s <= 0:
        return {"matched_share_by_source": {}, "unmodelled_share_by_category": {}}
    by_category: dict[str, float] = defaultdict(float)
    for k in rows:
        if k.run_id is None:
            by_category[reason_category(k.reason or "not modelled")] += k.duration_s
    by_source = state.store.trace_time_by_match_source(upload_id)
    return {"matched_share_by_source": {k: v / total_s for k, v in sorted(by_source.items(), key=lambda i: -i[1])},
            "unmodelled_share_by_category": {k: v / total_s for k, v in
                                             sorted(by_category.items(), key=lambda i: -i[1])}}


def _stored_alarms(hardware: Hardware, records: list[KernelRecord]) -> list[dict[str, Any]]:
    """Roof alarms of the stored kernels that carry measured counters."""
    return alarms_json(hardware, records, MatchResult([], [], 0.0, 0.0))


def _summary(upload: TraceUploadRow, totals: TraceTotals | None, unmodelled: list[dict[str, Any]],
             alarms: list[dict[str, Any]], warnings: list[str], duplicate: bool) -> dict[str, Any]:
    """An upload's summary from what is stored (the same for a fresh upload, a duplicate and GET)."""
    totals = totals or TraceTotals(0, 0.0, 0.0, 0)
    return {
        "id": upload.id, "hardware": upload.hardware_id, "filename": upload.filename, "format": upload.format,
        "size_bytes": upload.size_bytes, "sha256": upload.sha256, "status": upload.status,
        "created_at": upload.created_at, "duplicate": duplicate, "tags": upload.tags, "kernels": totals.kernels,
        "distinct_kernels": upload.kernel_count or 0,
        "matched_ops": totals.matched_runs, "runs_created": totals.matched_runs,
        "total_kernel_time_s": totals.total_s, "matched_time_s": totals.matched_s,
        "unmodelled_time_share": totals.unmodelled_share, "unmodelled": unmodelled, "roof_alarms": alarms,
        "warnings": warnings,
    }


def _form_tags(text: str | None) -> dict[str, str]:
    """The upload form's ``tags`` (key=value list or JSON object), checked; 422 saying what is wrong."""
    if not text or not text.strip():
        return {}
    try:
        if text.lstrip().startswith("{"):
            value = json.loads(text)
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise StoreError("tags: expected a JSON object of string values")
            return check_tags(value)
        return parse_tags([text])
    except json.JSONDecodeError as exc:
        raise HTTPException(422, f"tags: malformed JSON ({exc.msg} at character {exc.pos})") from None
    except StoreError as exc:
        raise HTTPException(422, str(exc)) from None


@router.post("/traces", response_model=TraceOut, status_code=201, dependencies=[Depends(require_write)])
def upload_trace(response: Response, file: UploadFile = File(description="a profiler trace, any supported format"),
                 hardware: str = Form(description="the device the trace was recorded on"),
                 source: str | None = Form(default=None, max_length=200),
                 tags: str | None = Form(default=None, max_length=20_000, description=(
                     "key=value pairs, comma- or newline-separated, or a JSON object: commit, environment "
                     "(silicon, emulator, simulator, fpga), driver / library versions (cuda=12.4), clocks")),
                 state: AppState = Depends(get_state)) -> dict[str, Any]:
    """Store the upload with its tags, parse it (format from content), create measured runs (carrying the tags);
    200 for a known file."""
    device, _ = state.hardware(hardware)
    if source is not None and not storable(source):
        raise HTTPException(422, "source: NUL characters and invalid UTF-8 (lone surrogates) are not allowed")
    upload_tags = _form_tags(tags)
    # the file name is only a label: what the store cannot hold is replaced, never a reason to refuse
    label = (file.filename or "upload").replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
    filename = label[-255:]
    settings = state.settings
    limits = ParseLimits(max_bytes=settings.max_trace_bytes, max_gzip_ratio=settings.max_trace_gzip_ratio,
                         max_s=settings.max_parse_s)
    try:
        with parse_limits(limits):
            done = ingest_trace(state.store, device, file.file, filename, source, upload_tags)
    except TraceLimitExceeded as exc:
        setting = LIMIT_SETTINGS[exc.limit]
        raise HTTPException(422 if exc.limit == "max_s" else 413, f"file: {exc} ({setting})") from exc
    except TraceError as exc:
        raise HTTPException(422, f"file: {exc}") from exc
    upload = state.store.get_trace_upload(done.upload_id)
    assert upload is not None
    rows = state.store.list_trace_kernels(upload.id)
    if done.duplicate:
        response.status_code = 200
    alarms = _stored_alarms(device, stored_counter_kernels(rows, upload.format)) if done.duplicate else done.roof_alarms
    out = _summary(upload, state.store.trace_totals([upload.id]).get(upload.id), _unmodelled(rows), alarms,
                   done.warnings, done.duplicate)
    return {**out, **_shares(state, upload.id, rows, out["total_kernel_time_s"])}


@router.get("/traces", response_model=TraceList, dependencies=[Depends(require_read)])
def list_traces(state: AppState = Depends(get_state), hardware: str | None = Query(default=None)) -> dict[str, Any]:
    """Every upload (failed ones too, with their error as a warning), oldest first; totals only (one query):
    ``GET /traces/{id}`` has the unmodelled kernels and roof alarms."""
    uploads = state.store.list_trace_uploads(hardware)
    totals = state.store.trace_totals([u.id for u in uploads])
    return {"items": [_summary(u, totals.get(u.id), [], [], [u.error] if u.error else [], False) for u in uploads]}


@router.get("/traces/{upload_id}", response_model=TraceDetail, dependencies=[Depends(require_read)])
def get_trace(upload_id: int = UPLOAD_ID, state: AppState = Depends(get_state),
              kernel_limit: int = Query(default=1000, ge=0, le=100_000)) -> dict[str, Any]:
    """One upload, its summary and its kernels (longest first)."""
    upload = state.store.get_trace_upload(upload_id)
    if upload is None:
        raise HTTPException(404, f"no trace upload {upload_id}")
    rows = state.store.list_trace_kernels(upload_id)
    try:
        device = state.hardware(upload.hardware_id)[0]
    except KeyError:  # the device was deleted since
        device = None
    records = stored_counter_kernels(rows, upload.format)
    alarms = _stored_alarms(device, records) if device else []
    out = _summary(upload, state.store.trace_totals([upload_id]).get(upload_id), _unmodelled(rows), alarms,
                   [upload.error] if upload.error else [], False)
    out.update(_shares(state, upload_id, rows, out["total_kernel_time_s"]))
    out["measured_roofline"] = (measured_roofline_json(counter_points(device, records), MAX_LISTED_COUNTER_POINTS)
                                if device else None)
    out["kernel_rows"] = [{"name": k.name, "category": k.category, "duration_s": k.duration_s,
                           "instances": k.instances, "op_name": k.op_name, "op_kind": k.op_kind, "run_id": k.run_id,
                           "counters": k.counters, "reason": k.reason} for k in rows[:kernel_limit]]
    return out
