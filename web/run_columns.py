"""Stored runs as columns for the dashboard's aggregate views: the few columns a chart needs (no ORM objects, no
tags; text columns as integer codes, kept between pages by ``web/stored_runs.py``), each distinct op predicted
once per device, names fetched only for rows shown."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import Text, cast, select
from sqlalchemy.orm import Session

from api.state import AppState
from perfmodel.store import Store, TraceKernelRow
from perfmodel.store.kernels_repo import _kernel_row
from perfmodel.store.models import RunTagModel, TraceKernelModel
from web.access import device
from web.metrics import op_metrics

NAME_TAGS = ("name", "kernel", "op_name")  # the tags a run's display name comes from, first found wins
FloatArray = np.ndarray[Any, np.dtype[np.float64]]
IntArray = np.ndarray[Any, np.dtype[np.intp]]


def objects(values: list[Any]) -> np.ndarray[Any, np.dtype[np.object_]]:
    """A 1-D object array of ``values`` (never 2-D, whatever the values are)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


@dataclass(frozen=True)
class Coded:
    """A text column as integer codes into its distinct values: row ``i`` is ``values[code[i]]``."""

    values: np.ndarray[Any, np.dtype[np.object_]]
    code: IntArray

    @property
    def size(self) -> int:
        return int(self.code.size)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: Any) -> Any:
        """One row's value for an integer, else the rows selected (a ``Coded``)."""
        if isinstance(index, int | np.integer):
            return self.values[self.code[index]]
        return Coded(self.values, self.code[index])

    def tolist(self) -> list[Any]:
        out: list[Any] = self.values[self.code].tolist()
        return out


@dataclass
class RunColumns:
    """Matching runs by id: ids, device, op kind, measured time [s] and each op's stored JSON text."""

    run_id: np.ndarray[Any, np.dtype[np.int64]]
    hardware_id: Coded
    op_kind: Coded
    measured_s: FloatArray
    op_text: Coded

    @property
    def size(self) -> int:
        return int(self.run_id.size)

    def take(self, rows: Any) -> RunColumns:
        """The runs selected by an index or mask."""
        return RunColumns(self.run_id[rows], self.hardware_id[rows], self.op_kind[rows], self.measured_s[rows],
                          self.op_text[rows])


def read_run_columns(store: Store, hardware_id: str | None = None, op_kind: str | None = None,
                     source: str | None = None, trace_id: int | None = None) -> RunColumns:
    """Every run matching the filters (the ``/api/v1/runs`` filters), ordered by id, from the columns this
    process keeps of the store (``web/stored_runs.py``: only runs stored since the last read are read)."""
    from web.stored_runs import stored_runs

    return stored_runs(store).columns(store, hardware_id, op_kind, source, trace_id)


def codes(values: Coded | np.ndarray[Any, np.dtype[np.object_]]) -> tuple[list[Any], IntArray]:
    """(distinct values in first-seen order, each row's index among them): for a ``Coded`` column from its
    integer codes; for an object array a hash pass, where ``np.unique`` would sort Python strings."""
    if isinstance(values, Coded):
        present, first = np.unique(values.code, return_index=True)
        order = present[np.argsort(first, kind="stable")]
        remap = np.zeros(values.values.size, dtype=np.intp)
        remap[order] = np.arange(order.size)
        return values.values[order].tolist(), remap[values.code]
    seen: dict[Any, int] = {}
    inverse = np.fromiter((seen.setdefault(v, len(seen)) for v in values.tolist()), dtype=np.intp,
                          count=values.size)
    return list(seen), inverse


@dataclass
class RunPredictions:
    """Per run (aligned with its ``RunColumns``): predicted and roof (speed-of-light) time [s], bound; ``ok``
    is False where the run could not be predicted, ``skipped`` counts those by reason."""

    predicted_s: FloatArray
    roof_s: FloatArray
    bound: np.ndarray[Any, np.dtype[np.object_]]
    ok: np.ndarray[Any, np.dtype[np.bool_]]
    skipped: dict[str, int] = field(default_factory=dict)


def predict_columns(state: AppState, runs: RunColumns) -> RunPredictions:
    """Predict every run on its device; each distinct op (by stored JSON) is predicted once per device, so a
    trace that repeats a few hundred shapes costs a few hundred predictions, not one per run."""
    n = runs.size
    out = RunPredictions(np.full(n, np.nan), np.full(n, np.nan), np.full(n, "", dtype=object), np.zeros(n, bool))
    devices, device_of = codes(runs.hardware_id)
    for d, hardware_id in enumerate(devices):
        rows = np.nonzero(device_of == d)[0]
        hw = device(state, hardware_id)
        if hw is None:
            out.skipped[f"unknown device {hardware_id}"] = int(rows.size)
            continue
        texts, inverse = codes(runs.op_text[rows])
        m = op_metrics(hw, [json.loads(t) for t in texts])
        predicted, roof = np.full(len(texts), np.nan), np.full(len(texts), np.nan)
        bound = np.full(len(texts), "", dtype=object)
        predicted[m.index], roof[m.index], bound[m.index] = m.predicted_s, m.roof_s, m.bound
        good = np.isfinite(predicted)[inverse]
        if not good.all():
            out.skipped[f"ops the model rejects on {hardware_id}"] = int((~good).sum())
        out.predicted_s[rows], out.roof_s[rows], out.bound[rows] = predicted[inverse], roof[inverse], bound[inverse]
        out.ok[rows] = good
    return out


def run_names(store: Store, run_ids: list[int]) -> dict[int, str]:
    """Display names of a few runs: a name tag (``name``, ``kernel``, ``op_name``), else the longest kernel of a
    trace matched to it; runs with neither are absent."""
    if not run_ids:
        return {}
    tags = select(RunTagModel.run_id, RunTagModel.key, RunTagModel.value).where(
        RunTagModel.run_id.in_(run_ids), RunTagModel.key.in_(NAME_TAGS))
    kernels = (select(TraceKernelModel.run_id, TraceKernelModel.name).where(TraceKernelModel.run_id.in_(run_ids))
               .order_by(TraceKernelModel.duration_s.desc()))
    names: dict[int, str] = {}
    with store.engine.connect() as conn:
        by_tag = {(run_id, key): value for run_id, key, value in conn.execute(tags) if value}
        for run_id in run_ids:
            found = next((by_tag[(run_id, key)] for key in NAME_TAGS if (run_id, key) in by_tag), None)
            if found is not None:
                names[run_id] = found
        for kernel_run, name in conn.execute(kernels):
            if kernel_run is not None:
                names.setdefault(kernel_run, name)
    return names


def counter_kernel_rows(store: Store, upload_id: int) -> list[TraceKernelRow]:
    """The kernels of an upload that carry profiler counters, longest first (the others are not read)."""
    stmt = (select(TraceKernelModel).where(TraceKernelModel.trace_upload_id == upload_id,
                                           cast(TraceKernelModel.counters, Text) != "{}")
            .order_by(TraceKernelModel.duration_s.desc(), TraceKernelModel.id))
    with Session(store.engine) as session:
        return [_kernel_row(m) for m in session.scalars(stmt)]
