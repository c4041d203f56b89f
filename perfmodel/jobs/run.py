"""One job's work, in the worker process the pool starts (``python -m perfmodel.jobs``, config on stdin).

The worker caps its own address space (``RLIMIT_AS``), reads the job's request from the store, fits, and stores
the calibration and the job's success in one transaction; a bad request or a fit that fails ends the job
``failed`` with the reason. Nothing is stored half: a cancelled job stores no calibration.
"""

from __future__ import annotations

import resource
import traceback
from collections.abc import Callable
from datetime import datetime
from typing import Any

from perfmodel.hardware import Hardware
from perfmodel.jobs.progress import JobCancelled, StoredProgress
from perfmodel.specs import library, parse_spec
from perfmodel.store import Store

CALIBRATION = "calibration"


def stored_hardware(store: Store, hardware_id: str) -> Hardware:
    """A bundled device, else a custom one stored in ``store``; ValueError if neither."""
    bundled = library().get(hardware_id)
    if bundled is not None:
        return bundled
    row = store.get_hardware(hardware_id)
    if row is None:
        raise ValueError(f"hardware: unknown device {hardware_id!r}")
    return parse_spec(row.spec, f"stored hardware {hardware_id!r}")


def selection(run_filter: dict[str, Any]) -> dict[str, Any]:
    """A job's stored filter (JSON) as ``fit_selected`` takes it: the ``created_*`` bounds as datetimes."""
    out = dict(run_filter)
    for key in ("created_after", "created_before"):
        if isinstance(out.get(key), str):
            out[key] = datetime.fromisoformat(out[key])
    return out


def run_calibration_job(store: Store, job_id: int, *, memory_bytes: int | None = None,
                        observer: Callable[[str, float], None] | None = None) -> str:
    """Fit the calibration job ``job_id`` (claimed: status running) and record the outcome; the job's final
    status (``succeeded``, ``failed``, or what a cancel or restart made it). ``observer(stage, fraction)``: also
    told every progress step (a command's progress bar)."""
    job = store.get_job(job_id)
    if job is None:
        raise ValueError(f"no job {job_id}")
    request: dict[str, Any] = job.request
    stored = StoredProgress(store, job_id)

    def progress(stage: str, fraction: float) -> None:
        if observer is not None:
            observer(stage, fraction)
        stored(stage, fraction)
    try:
        from perfmodel.calibration.build import MIN_RUNS
        from perfmodel.calibration.stored import fit_selected

        hardware = stored_hardware(store, str(request.get("hardware")))
        # space, min_runs, fastest_repeat and report_extra: set by perfmodel measure's own job (not the API's body)
        fitted = fit_selected(store, hardware, selection(request.get("filter") or {}),
                              folds=int(request.get("folds", 5)), base_calibration=request.get("base_calibration"),
                              notes=request.get("notes"), progress=progress, space=request.get("space", "compact"),
                              min_runs=request.get("min_runs", MIN_RUNS),
                              fastest_repeat=bool(request.get("fastest_repeat", False)))
        progress("storing", 1.0)
        report = {**fitted.report, **(request.get("report_extra") or {})}
        store.finish_calibration_job(job_id, fitted.hardware_id, fitted.params, report, fitted.notes)
    except JobCancelled:
        pass  # cancelled or marked interrupted mid-fit: its row already says so, nothing is stored; read below
    except MemoryError:
        cap = f"{memory_bytes / 2**20:.0f} MiB" if memory_bytes else "the memory available"
        store.finish_job(job_id, "failed", f"the fit needed more than {cap} (PERFMODEL_JOB_MEMORY_BYTES); "
                                           "fit fewer runs (a narrower filter)")
    except (ValueError, LookupError) as exc:  # bad input: no runs, unknown base calibration, a fit refusal
        store.finish_job(job_id, "failed", str(exc.args[0]) if exc.args else type(exc).__name__)
    except Exception as exc:
        traceback.print_exc()
        store.finish_job(job_id, "failed", f"internal error in the fit: {type(exc).__name__}: {exc}")
    final = store.get_job(job_id)
    return final.status if final is not None else "unknown"


def cap_memory(memory_bytes: int | None) -> None:
    """Limit this process's address space to ``memory_bytes`` (an allocation beyond it is a MemoryError)."""
    if memory_bytes:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
