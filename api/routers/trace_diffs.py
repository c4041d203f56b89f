"""POST /trace-diffs (also POST /comparisons): two stored traces compared op by op (``perfmodel.compare``), the CI
gate's answer as JSON. Not GET /comparisons, which is predicted vs measured of stored runs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from api.deps import get_state, require_read
from api.state import AppState, UnknownHardware
from perfmodel.compare import CompareError, diff_sides
from perfmodel.compare.history import MAX_TRACES as MAX_HISTORY_TRACES
from perfmodel.compare.load import stored_side
from perfmodel.compare.report import diff_json

router = APIRouter(tags=["trace diffs"], dependencies=[Depends(require_read)])


class TraceDiffIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_trace: int = Field(ge=1, description="the baseline: a stored trace upload id (GET /api/v1/traces)")
    new_trace: int = Field(ge=1, description="the trace to check against it")
    threshold_pct: float = Field(5.0, ge=0, le=1e6, description="a regression is a significant slowdown beyond it")
    alpha: float = Field(0.01, gt=0, lt=1, description="family-wise significance level (Holm)")
    top: int | None = Field(None, ge=1, le=100_000, description="at most this many groups and unmatched rows")


class GroupOut(BaseModel):
    kind: str
    name: str
    op: dict[str, Any] | None
    kernel_names: list[str]
    new_kernel_names: list[str]
    verdict: str = Field(description="regression, improvement, expected, kernels changed, within threshold, "
                                     "no change, too few repeats or timing suspect")
    base_calls: int
    new_calls: int
    base_launches: int
    new_launches: int
    base_total_s: float
    new_total_s: float
    base_median_s: float
    new_median_s: float
    ratio: float | None = Field(description="new / base median per call")
    change_pct: float | None
    ci_low: float | None = Field(description="95% bootstrap CI of the ratio of medians")
    ci_high: float | None
    p_mann_whitney: float | None
    p_paired: float | None = Field(description="Wilcoxon signed-rank, calls paired in order (equal counts)")
    base_bound: str | None
    new_bound: str | None
    base_predicted_s: float | None
    new_predicted_s: float | None
    base_headroom: float | None = Field(description="predicted / measured median: 1 = at the roofline")
    new_headroom: float | None
    expected_ratio: float | None = Field(description="the model's new / base ratio (device or shape change)")
    unexpected_pct: float | None = Field(description="the change beyond what the model expected")
    timing_suspect: str | None = Field(None, description="why a side's timing is faster than its device can go "
                                                          "(a recording artefact): not tested, never a regression")
    work_suspect: str | None = Field(None, description="both sides faster than the op's work allows: the matched "
                                                        "shapes are in doubt, the verdict stands")


class OnlyOut(BaseModel):
    kind: str
    name: str
    op: dict[str, Any] | None
    calls: int
    total_s: float


class TotalOut(BaseModel):
    name: str
    base_s: float
    new_s: float
    change_s: float


class TraceDiffOut(BaseModel):
    base: str
    new: str
    format: str
    base_device: str | None
    new_device: str | None
    base_hardware: str | None
    new_hardware: str | None
    threshold_pct: float
    alpha: float
    base_total_s: float
    new_total_s: float
    verdicts: dict[str, int]
    regressions: int
    timing_suspect: int = Field(0, description="groups whose timings no device can produce (not in regressions)")
    groups: list[GroupOut]
    only_base: list[OnlyOut]
    only_new: list[OnlyOut]
    kinds: list[TotalOut] = Field(description="device time by op kind")
    layers: list[TotalOut] = Field(description="device time by the layer / module the trace names")
    warnings: list[str]


def trace_diff(state: AppState, body: TraceDiffIn) -> dict[str, Any]:
    """What POST /trace-diffs answers (the dashboard calls it directly)."""
    try:
        base, base_hw_id = stored_side(state.store, body.base_trace)
        new, new_hw_id = stored_side(state.store, body.new_trace)
    except CompareError as exc:
        raise HTTPException(404 if "no stored trace" in str(exc) else 422, str(exc)) from None
    try:
        base_hw, _ = state.hardware(base_hw_id)
        new_hw, _ = state.hardware(new_hw_id)
    except UnknownHardware as exc:
        raise HTTPException(422, f"the trace's hardware {exc.args[0]!r} is no longer known") from None
    try:
        result = diff_sides(base, new, base_hw, new_hw, body.threshold_pct, body.alpha)
    except CompareError as exc:
        raise HTTPException(422, str(exc)) from None
    return diff_json(result, body.top)


@router.post("/trace-diffs", response_model=TraceDiffOut)
def post_trace_diff(body: TraceDiffIn, state: AppState = Depends(get_state)) -> dict[str, Any]:
    """Compare two stored traces op by op: per (name, op, shape) the change, its significance (Mann-Whitney U,
    paired Wilcoxon, bootstrap CI), each side's roofs and the change the model expected; unmatched groups;
    totals by op kind. 404 for an unknown trace, 422 for two that cannot be compared."""
    return trace_diff(state, body)


@router.post("/comparisons", response_model=TraceDiffOut)
def post_comparison(body: TraceDiffIn, state: AppState = Depends(get_state)) -> dict[str, Any]:
    """The same as POST /trace-diffs, under the name the CI gate's users look for (GET /comparisons is another
    thing: predicted vs measured of stored runs)."""
    return trace_diff(state, body)


class HistoryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    traces: list[int] | None = Field(None, min_length=2, max_length=50,
                                     description="stored trace ids, oldest first (or choose them by tags)")
    hardware: str | None = Field(None, max_length=80, description="with tags: the traces of this device only")
    tags: dict[str, str] | None = Field(None, description="without traces: the parsed traces carrying all of these "
                                        "tags (e.g. environment=silicon), oldest first, the latest 50")
    threshold_pct: float = Field(5.0, ge=0, le=1e6)
    alpha: float = Field(0.01, gt=0, lt=1)
    changed_only: bool = Field(True, description="only the ops with a change point")


class SeriesOut(BaseModel):
    kind: str
    name: str
    shape: str = Field(description="the op's parameters (JSON) or the kernel's category, grid and block")
    median_s: list[float | None] = Field(description="per trace, the median time per call")
    predicted_s: list[float | None] = Field(description="per trace, the model's time on that trace's device")
    change_points: list[dict[str, Any]] = Field(description="index of the later trace, verdict, change %")


class HistoryOut(BaseModel):
    traces: list[int]
    labels: list[dict[str, Any]] = Field(description="per trace: its id, file name, upload time and tags")
    series: list[SeriesOut]
    notes: list[str]


def _history_traces(state: AppState, body: HistoryIn) -> list[int]:
    """The trace ids a history request names, or those its tags (and device) choose: 422 if neither or both."""
    if (body.traces is None) == (body.tags is None):
        raise HTTPException(422, "history: give either traces (ids, oldest first) or tags (key -> value)")
    if body.traces is not None:
        return body.traces
    wanted = body.tags or {}
    chosen = [u.id for u in state.store.list_trace_uploads(body.hardware) if u.status == "parsed"
              and all(u.tags.get(k) == v for k, v in wanted.items())][-MAX_HISTORY_TRACES:]
    if len(chosen) < 2:
        raise HTTPException(422, f"history: {len(chosen)} parsed trace(s) carry the tags {wanted}; at least 2 "
                                 "are needed")
    return chosen


@router.post("/trace-diffs/history", response_model=HistoryOut)
def post_history(body: HistoryIn, state: AppState = Depends(get_state)) -> dict[str, Any]:
    """Per op, its median time across stored traces (oldest first) with the model's prediction beside it, and
    change points where neighbouring traces differ significantly (the same rules as POST /trace-diffs)."""
    from perfmodel.compare.history import history

    trace_ids = _history_traces(state, body)
    sides = []
    for trace_id in trace_ids:
        try:
            side, hardware_id = stored_side(state.store, trace_id)
        except CompareError as exc:
            raise HTTPException(404 if "no stored trace" in str(exc) else 422, str(exc)) from None
        try:
            hw, _ = state.hardware(hardware_id)
        except UnknownHardware:
            hw = None
        sides.append((side, hw))
    try:
        series, notes = history(sides, body.threshold_pct, body.alpha)
    except CompareError as exc:
        raise HTTPException(422, str(exc)) from None
    uploads = [state.store.get_trace_upload(i) for i in trace_ids]
    labels = [{"id": u.id, "filename": u.filename, "created_at": u.created_at.isoformat(), "tags": u.tags}
              for u in uploads if u is not None]
    return {"traces": trace_ids, "labels": labels, "notes": notes,
            "series": [{"kind": s.kind, "name": s.key[1], "shape": s.key[2], "median_s": s.median_s,
                        "predicted_s": s.predicted_s, "change_points": s.change_points}
                       for s in series if s.change_points or not body.changed_only]}
