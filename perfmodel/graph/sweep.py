"""Design-space sweeps: hardware variants (``derive_variant`` overrides, device count) × workloads.

A spec (JSON-able)::

    {"base": "nvidia-h100-sxm5-80gb",
     "axes": {"levels.dram.bandwidth_bytes_per_s": ["x0.5", "x1", "x2"],
              "engines.*.peak_flops_per_s": ["x1", "x2"], "devices": [1, 2, 4, 8]},
     "mode": "grid" | "random", "samples": 2000, "seed": 0,
     "workloads": [{"model": "llama-3-8b", "phase": "decode", "batch": 8, "kv_len": 4096}]}

``devices`` sets the tensor-parallel degree; every other axis is an override path. Each task
takes a chunk of variants, builds and fuses each workload graph once, and costs its distinct ops
per variant with one vectorised ``predict_many`` (repeated layers predicted once). Rows carry
``time_s`` and ``cost_proxy`` = devices × (DRAM bandwidth / base) × (matrix peak / base); the
Pareto front per workload is the set no other variant beats on both.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfmodel.graph.estimate import CompiledGraph, compile_graph, predict_compiled
from perfmodel.graph.fusion import fuse
from perfmodel.graph.ir import GraphError
from perfmodel.graph.llm_build import LlmWorkload, build_llm
from perfmodel.graph.llm_config import bundled
from perfmodel.graph.memory import memory
from perfmodel.graph.parallel import Parallelism
from perfmodel.graph.schedule import schedule
from perfmodel.hardware import Hardware
from perfmodel.search import call_memo
from perfmodel.specs import derive_variant, load_hardware

Progress = Callable[[int, int], None]
WORKLOAD_FIELDS = {f.name for f in dataclasses.fields(LlmWorkload)}


@dataclass
class SweepSpec:
    base: str
    axes: dict[str, list[Any]]
    workloads: list[dict[str, Any]]
    mode: str = "grid"
    samples: int | None = None
    seed: int = 0
    space: str = "compact"
    extra: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def from_json(data: dict[str, Any]) -> SweepSpec:
        try:
            spec = SweepSpec(base=str(data["base"]), axes=dict(data.get("axes") or {}),
                             workloads=list(data["workloads"]), mode=str(data.get("mode", "grid")),
                             samples=data.get("samples"), seed=int(data.get("seed", 0)),
                             space=str(data.get("space", "compact")))
        except KeyError as exc:
            raise GraphError("sweep", f"missing field {exc.args[0]!r}") from None
        spec.check()
        return spec

    def to_json(self) -> dict[str, Any]:
        return {"base": self.base, "axes": self.axes, "workloads": self.workloads, "mode": self.mode,
                "samples": self.samples, "seed": self.seed, "space": self.space}

    def check(self) -> None:
        if self.mode not in ("grid", "random"):
            raise GraphError("sweep", f"mode {self.mode!r}: expected grid or random")
        if self.space not in ("compact", "full"):
            raise GraphError("sweep", f"space {self.space!r}: expected compact or full")
        if not self.workloads:
            raise GraphError("sweep", "no workloads")
        for name, values in self.axes.items():
            if not isinstance(values, list) or not values:
                raise GraphError("sweep", f"axis {name!r}: expected a non-empty list of values")
        base = load_hardware(self.base)
        for name, values in self.axes.items():  # every override must apply to the base device
            if name != "devices":
                derive_variant(base, "check", {name: values[0]})
        for w in self.workloads:
            unknown = set(w) - WORKLOAD_FIELDS - {"model", "tp", "pp", "ep", "microbatches"}
            if unknown:
                raise GraphError("sweep", f"workload fields {sorted(unknown)} unknown")


def variants(spec: SweepSpec) -> list[dict[str, Any]]:
    """The override dicts: the full grid, or ``samples`` distinct random points of it."""
    names = list(spec.axes)
    if spec.mode == "grid":
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*spec.axes.values())]
    rng = random.Random(spec.seed)
    total = int(np.prod([len(v) for v in spec.axes.values()])) if names else 1
    wanted = min(int(spec.samples or 100), total)
    seen: set[tuple[int, ...]] = set()
    out: list[dict[str, Any]] = []
    while len(out) < wanted:
        pick = tuple(rng.randrange(len(spec.axes[n])) for n in names)
        if pick not in seen:
            seen.add(pick)
            out.append({n: spec.axes[n][k] for n, k in zip(names, pick, strict=True)})
    return out


def _matrix_peak(hw: Hardware) -> float:
    return max((max(e.peak_flops_per_s.values()) for e in hw.engines_of("matrix")), default=0.0)


def run_chunk(base_id: str | Hardware, chunk: list[tuple[int, dict[str, Any]]], workloads: list[dict[str, Any]],
              space: str = "compact") -> list[dict[str, Any]]:
    """Cost every (variant, workload) of one chunk; one process or Dask task runs this. ``base_id``: the base
    device's id, or the device itself (a Dask sweep scatters it to the workers once)."""
    base = load_hardware(base_id) if isinstance(base_id, str) else base_id
    base_id = base.id
    base_bw, base_peak = base.dram.bandwidth_bytes_per_s or 1.0, _matrix_peak(base) or 1.0
    compiled: dict[tuple[int, int], tuple[CompiledGraph, float]] = {}
    rows = []
    for index, overrides in chunk:
        devices = int(overrides.get("devices", 1))
        hw_over = {k: v for k, v in overrides.items() if k != "devices"}
        hw = derive_variant(base, f"{base_id}-v{index}", hw_over) if hw_over else base
        for w_index, w in enumerate(workloads):
            key = (w_index, devices)
            if key not in compiled:
                c = _compile_workload(w, devices, hw)
                compiled[key] = (c, memory(c.graph, hw).total_bytes)  # the footprint does not depend on speed
            c, footprint = compiled[key]
            with call_memo.not_kept():  # a variant's device is new: its choices would not come back
                batch = predict_compiled(c, hw, "full" if space == "full" else "compact")
            tl = schedule(c.graph, c.node_times(batch), int(w.get("microbatches", 1)))
            capacity = hw.level_capacity_bytes(hw.dram)
            step = tl.step_s
            tokens = int(c.graph.meta.get("tokens_per_step", 0))
            bw, peak = hw.dram.bandwidth_bytes_per_s or 0.0, _matrix_peak(hw)
            rows.append({"variant": index, "overrides": overrides, "workload": w_index,
                         "label": _label(w), "devices": devices, "time_s": step,
                         "tokens_per_s": tokens * int(w.get("dp", 1)) / step if step > 0 and tokens else None,
                         "fits": capacity is None or footprint <= capacity, "memory_bytes": footprint,
                         "dram_bandwidth_bytes_per_s": bw, "matrix_peak_flops_per_s": peak,
                         "cost_proxy": devices * (bw / base_bw) * (peak / base_peak)})
    return rows


def _label(w: dict[str, Any]) -> str:
    return f"{w.get('model')}:{w.get('phase', 'decode')}:b{w.get('batch', 1)}"


_COMPILED: dict[str, CompiledGraph] = {}  # per process: tasks of one sweep reuse the fused graphs
_COMPILED_MAX = 64


def _compile_workload(w: dict[str, Any], devices: int, hw: Hardware) -> CompiledGraph:
    per_node = hw.interconnect.devices_per_node if hw.interconnect else None
    key = json.dumps([w, devices, per_node], sort_keys=True, default=str)
    if key not in _COMPILED:
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        _COMPILED[key] = _build_workload(w, devices, per_node)
    return _COMPILED[key]


def _build_workload(w: dict[str, Any], devices: int, per_node: int | None) -> CompiledGraph:
    fields = {k: v for k, v in w.items() if k in WORKLOAD_FIELDS}
    par = Parallelism(tp=int(w.get("tp", devices)), pp=int(w.get("pp", 1)), ep=int(w.get("ep", 1)),
                      microbatches=int(w.get("microbatches", 1)), devices_per_node=per_node or 8)
    graph = build_llm(bundled(str(w["model"])), LlmWorkload(**fields), par)
    fuse(graph)
    return compile_graph(graph)


def pareto(rows: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Per workload label: row indices no other row beats on both time and cost proxy."""
    fronts: dict[str, list[int]] = {}
    by_label: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        if r["fits"]:
            by_label.setdefault(r["label"], []).append(i)
    for label, idx in by_label.items():
        order = sorted(idx, key=lambda i: (rows[i]["cost_proxy"], rows[i]["time_s"]))
        best = float("inf")
        front = []
        for i in order:
            if rows[i]["time_s"] < best:
                front.append(i)
                best = rows[i]["time_s"]
        fronts[label] = front
    return fronts


def run_sweep(spec: SweepSpec, workers: int = 1, scheduler: str | None = None, client: Any = None,
              progress: Progress | None = None, chunks_per_worker: int | None = None) -> dict[str, Any]:
    """Run locally (``workers`` processes; 1: in this process) or on Dask (``scheduler`` or ``client``).

    ``chunks_per_worker``: tasks per worker (default: 4 for local processes; 1 on Dask, one task per worker
    thread, so a run pays Dask's per-task costs once per worker)."""
    spec.check()
    points = list(enumerate(variants(spec)))
    started = time.perf_counter()
    if scheduler or client is not None:
        from perfmodel.graph.sweep_exec import run_dask

        def split(lanes: int) -> list[list[tuple[int, dict[str, Any]]]]:
            return _chunks(points, max(lanes, 1) * (chunks_per_worker or 1))

        rows, executor = run_dask(spec, split, scheduler, client, progress), "dask"
    elif workers > 1:
        from perfmodel.graph.sweep_exec import run_processes

        chunks = _chunks(points, workers * (chunks_per_worker or 4))
        rows, executor = run_processes(spec, chunks, workers, progress), "processes"
    else:
        rows, executor = [], "serial"
        chunks = _chunks(points, chunks_per_worker or 4)
        for k, chunk in enumerate(chunks):
            rows.extend(run_chunk(spec.base, chunk, spec.workloads, spec.space))
            if progress:
                progress(k + 1, len(chunks))
    elapsed = time.perf_counter() - started
    rows.sort(key=lambda r: (r["variant"], r["workload"]))
    return {"rows": rows, "pareto": pareto(rows), "variants": len(points), "workloads": len(spec.workloads),
            "elapsed_s": elapsed, "executor": executor,
            "evaluations_per_s": len(rows) / elapsed if elapsed > 0 else None}


def _chunks(points: list[tuple[int, dict[str, Any]]], count: int) -> list[list[tuple[int, dict[str, Any]]]]:
    """``points`` in at most ``count`` consecutive chunks of equal size (the last one shorter)."""
    size = max(1, -(-len(points) // count))
    return [points[i:i + size] for i in range(0, len(points), size)]
