"""Workloads for the roofline explorer and what-if: presets, ops pasted as JSON, a stored trace, stored runs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfmodel.store import Store
from perfmodel.traces import KernelRecord
from perfmodel.traces.ingest import stored_counter_kernels
from web.run_columns import codes, counter_kernel_rows, read_run_columns, run_names

MAX_OPS = 5000
NAME_CHUNK = 500  # run ids per name query (SQLite binds at most 32,766 variables)


@dataclass
class Workload:
    """Ops with a display name and a repeat count; ``measured_s`` is per op where a run measured it."""

    label: str
    names: list[str] = field(default_factory=list)
    ops: list[dict[str, Any]] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    measured_s: list[float | None] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    counter_kernels: list[KernelRecord] = field(default_factory=list)  # a trace's kernels with profiler counters

    def add(self, name: str, op: dict[str, Any], count: int = 1, measured_s: float | None = None) -> None:
        self.names.append(name)
        self.ops.append(op)
        self.counts.append(count)
        self.measured_s.append(measured_s)


def _mm(m: int, n: int, k: int) -> dict[str, Any]:
    return {"kind": "matmul", "m": m, "n": n, "k": k, "dtype": "bf16"}


def _llama(tokens: int, batch: int, context: int, decode: bool) -> list[tuple[str, dict[str, Any], int]]:
    """One Llama-3-8B decoder layer (hidden 4096, 32 heads, 8 KV heads, MLP 14336) x 32 layers."""
    rows = batch * tokens
    seq_q = 1 if decode else tokens
    attention = {"kind": "attention", "batch": batch, "heads": 32, "kv_heads": 8, "seq_q": seq_q,
                 "seq_kv": context, "head_dim": 128, "dtype": "bf16", "causal": not decode}
    return [
        ("input rmsnorm", {"kind": "rmsnorm", "shape": [rows, 4096], "dtype": "bf16"}, 32),
        ("qkv_proj", _mm(rows, 6144, 4096), 32),
        ("attention", attention, 32),
        ("o_proj", _mm(rows, 4096, 4096), 32),
        ("post-attention rmsnorm", {"kind": "rmsnorm", "shape": [rows, 4096], "dtype": "bf16"}, 32),
        ("gate_up_proj", _mm(rows, 28672, 4096), 32),
        ("silu × up", {"kind": "elementwise", "shape": [rows, 14336], "dtype": "bf16", "inputs": 2,
                       "flops_per_element": 4, "transcendentals_per_element": 1}, 32),
        ("down_proj", _mm(rows, 4096, 14336), 32),
        ("lm_head", _mm(rows if decode else batch, 128256, 4096), 1),
    ]


def _resnet() -> list[tuple[str, dict[str, Any], int]]:
    """A ResNet-50 bottleneck block (stage 2, batch 32, 56x56, NCHW fp16)."""
    conv = {"kind": "conv2d", "batch": 32, "height": 56, "width": 56, "dtype": "fp16"}
    return [
        ("conv 1x1 256→64", {**conv, "in_channels": 256, "out_channels": 64, "kernel_h": 1, "kernel_w": 1}, 3),
        ("batchnorm 64", {"kind": "batchnorm", "shape": [32, 64, 56, 56], "dtype": "fp16"}, 6),
        ("conv 3x3 64→64", {**conv, "in_channels": 64, "out_channels": 64, "kernel_h": 3, "kernel_w": 3,
                            "padding": 1}, 3),
        ("conv 1x1 64→256", {**conv, "in_channels": 64, "out_channels": 256, "kernel_h": 1, "kernel_w": 1}, 3),
        ("batchnorm 256", {"kind": "batchnorm", "shape": [32, 256, 56, 56], "dtype": "fp16"}, 3),
        ("relu + residual", {"kind": "elementwise", "shape": [32, 256, 56, 56], "dtype": "fp16", "inputs": 2}, 3),
    ]


PRESETS: dict[str, tuple[str, list[tuple[str, dict[str, Any], int]]]] = {
    "llama3-8b-decode": ("Llama-3-8B decode, batch 16, context 4096", _llama(1, 16, 4096, True)),
    "llama3-8b-prefill": ("Llama-3-8B prefill, 4096 tokens", _llama(4096, 1, 4096, False)),
    "resnet50-stage2": ("ResNet-50 stage 2 (3 bottlenecks), batch 32", _resnet()),
}


def preset(name: str) -> Workload:
    label, rows = PRESETS[name]
    work = Workload(label)
    for op_name, op, count in rows:
        work.add(op_name, op, count)
    return work


def parse_ops(text: str) -> Workload:
    """A JSON list of ops (or ``{"ops": [...]}``, or one op per line); an op may carry ``name`` and ``count``."""
    work = Workload("ops pasted as JSON")
    text = text.strip()
    try:
        data: Any = json.loads(text) if text.startswith(("[", "{\"ops\"")) else [
            json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        work.problems.append(f"ops: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})")
        return work
    if isinstance(data, dict):
        data = data.get("ops", [])
    if not isinstance(data, list):
        work.problems.append("ops: expected a JSON list of ops")
        return work
    for i, raw in enumerate(data[:MAX_OPS]):
        if not isinstance(raw, dict):
            work.problems.append(f"ops[{i}]: expected an object with a 'kind', got {type(raw).__name__}")
            continue
        op = {k: v for k, v in raw.items() if k not in ("name", "count")}
        count = raw.get("count", 1)
        work.add(str(raw.get("name") or f"{op.get('kind', '?')} #{i}"), op,
                 count if isinstance(count, int) and count > 0 else 1)
    if len(data) > MAX_OPS:
        work.problems.append(f"only the first {MAX_OPS} of {len(data)} ops are shown")
    return work


def from_runs(store: Store, hardware_id: str, trace_id: int | None) -> Workload:
    """The stored runs of a device (or of one uploaded trace), one entry per distinct op: its runs as the
    count, their mean measured time per run; the ``MAX_OPS`` ops of most measured time when there are more."""
    runs = read_run_columns(store, hardware_id=hardware_id, trace_id=trace_id)
    label = f"trace {trace_id}" if trace_id is not None else f"stored runs on {hardware_id}"
    work = Workload(label)
    upload = store.get_trace_upload(trace_id) if trace_id is not None else None
    texts, inverse = codes(runs.op_text)
    counts = np.bincount(inverse, minlength=len(texts))
    total_s = np.bincount(inverse, weights=runs.measured_s, minlength=len(texts))
    first = np.zeros(len(texts), dtype=np.intp)
    first[inverse[::-1]] = np.arange(runs.size)[::-1]  # each op's first run
    kept = np.argsort(-total_s, kind="stable")[:MAX_OPS]
    ids = [int(runs.run_id[first[o]]) for o in kept]
    names: dict[int, str] = {}
    for start in range(0, len(ids), NAME_CHUNK):
        names.update(run_names(store, ids[start:start + NAME_CHUNK]))
    for o, run_id in zip(kept.tolist(), ids, strict=True):
        kind = runs.op_kind[first[o]]
        work.add(names.get(run_id, f"{kind} run {run_id}"), json.loads(texts[o]), int(counts[o]),
                 float(total_s[o] / counts[o]))
    if len(texts) > len(kept):
        work.problems.append(f"showing the {len(kept)} ops of most measured time of {len(texts)} distinct ops "
                             f"({runs.size} runs)")
    if upload is not None:
        work.counter_kernels = stored_counter_kernels(counter_kernel_rows(store, upload.id), upload.format)
    if not runs.size:
        also = (f"; its {len(work.counter_kernels)} kernels with profiler counters stand where their own counters "
                "put them (the table below; those with counted FLOPs also on the chart)" if work.counter_kernels
                else "")
        other = (f" on {hardware_id}: it was uploaded for {upload.hardware_id}, choose that device"
                 if upload is not None and upload.hardware_id != hardware_id else "")
        failed = (f": the upload failed to parse ({upload.error}), so it made no runs"
                  if upload is not None and upload.status == "failed" else "")
        work.problems.append(f"no stored runs for {label}{failed or other}{also}")
    return work
