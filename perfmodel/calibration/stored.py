"""A calibration fitted on the runs stored in the database, stored as a new version (never overwriting one).

Serves ``POST /api/v1/calibrations`` (a job: ``perfmodel.jobs`` runs ``fit_selected`` in a worker process and
stores its result with the job's success) and ``perfmodel calibrate``; ``format_calibration_report`` prints a
fit's report as a table (per class: runs, where its parameters came from, error before and after, k-fold CV).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from perfmodel.calibration.build import MIN_RUNS, Progress, fit_calibration
from perfmodel.calibration.model import Calibration
from perfmodel.hardware import Hardware
from perfmodel.ops import make_op
from perfmodel.roofline import SpaceName
from perfmodel.store import RunRow, Store

MAX_FIT_RUNS = 200_000
# trace runs sized from their launch alone (one element per thread, offload regions' capped teams): lower
# bounds of their work, never fitted unless the selection asks for them by this tag
LOWER_BOUND_MATCH_SOURCES = frozenset({"launch geometry"})


class NoSuchCalibration(LookupError):
    """The base calibration asked for is not stored."""


@dataclass(frozen=True)
class FittedCalibration:
    """A fit not yet stored: what ``Store.add_calibration`` (or a job's ``finish_calibration_job``) takes."""

    hardware_id: str
    params: dict[str, Any]
    report: dict[str, Any]
    notes: str | None


def fit_selected(store: Store, hardware: Hardware, selection: dict[str, Any], *, folds: int = 5,
                 base_calibration: int | None = None, notes: str | None = None,
                 progress: Progress | None = None, space: SpaceName = "compact", min_runs: int = MIN_RUNS,
                 fastest_repeat: bool = False) -> FittedCalibration:
    """Fit ``hardware``'s model to its stored runs that ``selection`` picks (``op_kind``, ``source``, ``tags``,
    ``created_after``, ``created_before``, ``trace_upload_id``); nothing is stored. ``progress(stage,
    fraction)``: ``loading runs`` (0), then the fit's own stages (``fit_calibration``), ``storing`` (1.0) is the
    caller's. ``space``, ``min_runs``: as ``fit_calibration``'s; ``fastest_repeat``: fit each distinct op's fastest
    run only (``perfmodel measure``'s host timings: the repeats' spread is the neighbours' load). ValueError: no
    runs, or more than ``MAX_FIT_RUNS``, or a bad option; NoSuchCalibration: an unknown ``base_calibration``."""
    if space not in ("compact", "full"):
        raise ValueError(f"space: {space!r}: expected 'compact' or 'full'")
    if isinstance(min_runs, bool) or not isinstance(min_runs, int) or min_runs < 1:
        raise ValueError(f"min_runs: {min_runs!r}: expected a positive integer")
    report_progress = progress or (lambda _stage, _fraction: None)
    report_progress("loading runs", 0.0)
    chosen = {k: v for k, v in selection.items() if v not in (None, {}, "")}
    rows, total = store.list_runs(hardware_id=hardware.id, limit=MAX_FIT_RUNS, offset=0, **chosen)
    if total > MAX_FIT_RUNS:
        raise ValueError(f"filter: {total} runs; a calibration fits at most {MAX_FIT_RUNS}")
    base: Calibration | None = None
    if base_calibration is not None:
        base_row = store.get_calibration(base_calibration)
        if base_row is None:
            raise NoSuchCalibration(f"no calibration {base_calibration}")
        base = Calibration.from_params(base_row.params)
    if not rows and base is None:
        raise ValueError(f"filter: no stored runs of {hardware.id!r} match; store runs or upload a trace first, "
                         "or seed from a related device with a base calibration")
    asked_sources = {str((chosen.get("tags") or {}).get("match_source"))}
    kept = [r for r in rows if r.tags.get("match_source") not in LOWER_BOUND_MATCH_SOURCES - asked_sources]
    if not kept and base is None:
        raise ValueError(f"filter: the {len(rows)} matching runs of {hardware.id!r} are all sized from their kernel "
                         "launch alone (match_source 'launch geometry': lower bounds of their work); select them "
                         "by that tag to fit them anyway")
    runs = [(make_op(r.op), r.measured_time_s) for r in (fastest_of_repeats(kept) if fastest_repeat else kept)]
    calibration = fit_calibration(hardware, runs, folds=folds, base=base, progress=progress, space=space,
                                  min_runs=min_runs)
    report = {**calibration.report, "runs_used": len(kept), "runs_lower_bound_excluded": len(rows) - len(kept),
              "filter": _json_ready(chosen),
              "base_calibration": base_calibration}
    if fastest_repeat:
        report["fitted_runs"] = len(runs)  # one per distinct op: its fastest repeat
    return FittedCalibration(hardware.id, calibration.params, report, notes)


def fastest_of_repeats(rows: list[RunRow]) -> list[RunRow]:
    """One run per distinct op (its fields), the fastest of its repeats, in the order the ops first appear."""
    best: dict[str, RunRow] = {}
    for row in rows:
        key = repr(sorted(row.op.items()))
        if key not in best or row.measured_time_s < best[key].measured_time_s:
            best[key] = row
    return list(best.values())


def fit_stored(store: Store, hardware: Hardware, selection: dict[str, Any], *, folds: int = 5,
               base_calibration: int | None = None, notes: str | None = None,
               progress: Progress | None = None) -> int:
    """``fit_selected``, then store the fit as a new version (stage ``storing``); its id."""
    fitted = fit_selected(store, hardware, selection, folds=folds, base_calibration=base_calibration, notes=notes,
                          progress=progress)
    if progress is not None:
        progress("storing", 1.0)
    return store.add_calibration(fitted.hardware_id, fitted.params, fitted.report, fitted.notes)


def _json_ready(selection: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in selection.items()}


def _pct(entry: dict[str, Any], key: str) -> str:
    part = entry.get(key) or {}
    median, p90 = part.get("median_abs_pct"), part.get("p90_abs_pct")
    return f"{median:5.1f} /{p90:6.1f}" if median is not None and p90 is not None else f"{'-':>5} /{'-':>6}"


def format_calibration_report(report: dict[str, Any]) -> str:
    """Per class: runs, source (fitted, fallback, transferred), form, abs % error median / p90 of the model
    alone, of the fit on its own runs, and k-fold cross-validated; then the device-level fit."""
    lines = [f"{'class':<34}{'runs':>6}  {'source':<22}{'form':<14}{'uncalibrated':>15}{'in sample':>15}"
             f"{'k-fold CV':>15}"]
    entries = [*sorted((report.get("classes") or {}).items())]
    if report.get("hardware_level"):
        entries.append(("(device level)", report["hardware_level"]))
    for key, entry in entries:
        lines.append(f"{key[:33]:<34}{entry.get('runs', 0):>6}  {str(entry.get('source', ''))[:21]:<22}"
                     f"{str(entry.get('form') or '-')[:13]:<14}{_pct(entry, 'uncalibrated'):>15}"
                     f"{_pct(entry, 'in_sample'):>15}{_pct(entry, 'cv'):>15}")
    runs = report.get("runs_used", report.get("runs", 0))
    lines.append(f"{runs} runs; errors are median / p90 abs % of the fitted runs; other classes: "
                 f"{report.get('other_classes', 'the device level')}")
    trees = report.get("residual_trees")
    if trees:
        cv = trees.get("cv") or {}
        errors = {name: _pct(cv, name).strip() for name in ("without_trees", "with_trees", "trees_alone")}
        held_out = (f" (held out over {trees.get('folds')} folds of distinct ops, {cv.get('scored_runs', 0)} runs: "
                    f"calibration {errors['without_trees']}, with the trees {errors['with_trees']}, "
                    f"trees alone {errors['trees_alone']})" if cv else "")
        verdict = "kept" if trees.get("kept") else f"not kept: {trees.get('reason', '')}"
        lines.append(f"residual trees over the fitted classes ({trees.get('distinct_ops', 0)} distinct ops): "
                     f"{verdict}{held_out}")
    return "\n".join(lines)


__all__ = ["MAX_FIT_RUNS", "FittedCalibration", "NoSuchCalibration", "fastest_of_repeats", "fit_selected", "fit_stored",
           "format_calibration_report"]
