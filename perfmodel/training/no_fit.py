"""When no layout of a search fits: why (the nearest miss: the layout needing the least memory, or the
rule that ruled the others out), and the smallest changes of the request itself — devices, global batch,
sequence length, optimizer offload — that give a layout that fits, each checked by a search of its own."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from perfmodel.graph.ir import GraphError
from perfmodel.graph.llm_config import LlmConfig
from perfmodel.hardware import Hardware
from perfmodel.training.layout import TrainingSetup
from perfmodel.training.search import SearchResult, SearchSpace, search_layouts
from perfmodel.units import format_bytes

MAX_TRIES = 11  # searches spent looking for a change (one 16,384-device search: ~0.5 s CPU)
MAX_DEVICES = 1 << 20  # the API's limit on devices


def _nearest(value: int, steps: list[int], up_only: bool) -> list[int]:
    """Multiples of each step nearest ``value`` (below unless ``up_only``, and above), nearest first."""
    out = set()
    for step in steps:
        if step < 1:
            continue
        above = -(-value // step) * step
        out.add(above)
        below = value // step * step
        if not up_only and below >= 1:
            out.add(below)
    out.discard(value)
    return sorted(out, key=lambda v: (abs(v - value), v))


def _memory_bound(result: SearchResult) -> bool:
    """True when every layout that can be built needs more memory than the device has."""
    built = np.array([not r.startswith(("cannot build", "pipeline")) for r in result.reasons], dtype=bool)
    need = result.memory.total_bytes[built]
    return bool(need.size) and float(np.min(need)) > result.capacity_bytes


def nearest_miss(result: SearchResult) -> dict[str, Any] | None:
    """The layout that needs the least memory among those ruled out only by memory, as a row."""
    misses = [i for i, r in enumerate(result.reasons) if r.startswith("does not fit")]
    if not misses:
        return None
    return result.row(min(misses, key=lambda i: float(result.memory.total_bytes[i])))


def why_none_fits(result: SearchResult) -> str:
    """One sentence: what ruled the layouts out."""
    counts = sorted(result.reason_counts().items(), key=lambda kv: -kv[1])
    head = f"none of the {result.count:,} layouts of {result.devices:,} devices fits"
    miss = nearest_miss(result)
    if miss is not None and _memory_bound(result):
        lay = miss["layout"]
        return (
            f"{head}: the one needing least memory (tp={lay['tp']} cp={lay['cp']} pp={lay['pp']} "
            f"dp={lay['dp']} ZeRO-{lay['zero']} recompute={lay['recompute']}) needs "
            f"{format_bytes(miss['memory_bytes']['total'])} per device, the device has "
            f"{format_bytes(result.capacity_bytes)}"
        )
    first = next((r for r in result.reasons if r.startswith(counts[0][0])), "") if counts else ""
    return f"{head}; most are ruled out by {counts[0][0]} ({counts[0][1]:,}), e.g. {first}" if counts else head


def _candidates(result: SearchResult) -> list[tuple[str, int, TrainingSetup, float]]:
    """(what changes, devices, setup, relative size of the change) to try, smallest change first."""
    setup, devices = result.setup, result.devices
    memory_bound = _memory_bound(result)
    out: list[tuple[str, int, TrainingSetup, float]] = []
    # every layout unbuilt (an op past any real size): more devices add dp or pp, not a smaller per-device op
    all_unbuilt = all(r.startswith("cannot build") for r in result.reasons)
    some_too_big = any(r.startswith("does not fit") for r in result.reasons)  # offload only saves memory
    if setup.offload != "optimizer" and some_too_big:
        out.append(("offload the optimizer state to the host", devices, replace(setup, offload="optimizer"), 0.0))
    steps = [8 << k for k in range(max(devices.bit_length(), 1))]
    if memory_bound:  # more devices, doubling
        more = [devices << k for k in range(1, 21) if devices << k <= MAX_DEVICES]
    else:  # a batch or a sequence too small to spread over every device: fewer devices, halving
        more = [devices >> k for k in range(1, 7) if devices >> k >= 1]
    for n in [] if all_unbuilt else _nearest(devices, steps, memory_bound)[:3] + more:
        if n <= MAX_DEVICES and (memory_bound or n <= 2 * devices):
            out.append((f"devices {devices:,} -> {n:,}", n, setup, abs(n - devices) / devices))
    if not memory_bound:
        per_step = sorted(
            {
                int(d * m)
                for d, m, r in zip(result.layouts.dp, result.layouts.micro_batch, result.reasons, strict=True)
                if r.startswith("batch")
            }
        )
        for b in _nearest(setup.global_batch, per_step, False)[:3]:
            out.append(
                (
                    f"global batch {setup.global_batch:,} -> {b:,}",
                    devices,
                    replace(setup, global_batch=b),
                    abs(b - setup.global_batch) / setup.global_batch,
                )
            )
    miss = nearest_miss(result)
    state_bound = (
        miss is not None and miss["memory_bytes"]["total"] - miss["memory_bytes"]["activations"] > result.capacity_bytes
    )  # weights, gradients and optimizer alone overflow: a shorter sequence cannot help
    unbuilt = any(r.startswith("cannot build") for r in result.reasons)  # e.g. an op past any real size
    shorter = (memory_bound and not state_bound) or unbuilt
    seqs = [setup.seq_len >> k for k in range(1, 4) if setup.seq_len >> k >= 1] if shorter else []
    if setup.seq_len % 32:
        seqs = _nearest(setup.seq_len, [32], False)[:2] + seqs
    for s in seqs:
        out.append(
            (
                f"sequence {setup.seq_len:,} -> {s:,} tokens",
                devices,
                replace(setup, seq_len=s),
                abs(s - setup.seq_len) / setup.seq_len,
            )
        )
    seen: set[tuple[int, TrainingSetup]] = set()
    unique = []
    for c in sorted(out, key=lambda c: c[3]):
        if (c[1], c[2]) not in seen:
            seen.add((c[1], c[2]))
            unique.append(c)
    return unique


def fits_with(
    cfg: LlmConfig, hardware: Hardware, result: SearchResult, space: SearchSpace | None = None, tries: int = MAX_TRIES
) -> list[dict[str, Any]]:
    """The smallest changes of the request that make a layout fit, smallest first (at most one per kind:
    devices, global batch, sequence, offload), each with its fastest layout's row and ``change``."""
    fixes: list[dict[str, Any]] = []
    kinds: set[str] = set()
    failed_devices = [result.devices]

    def first_fit(devices: int, setup: TrainingSetup) -> dict[str, Any] | None:
        try:
            trial = search_layouts(cfg, hardware, devices, setup, space)
        except GraphError:
            return None
        ranked = trial.ranked()
        return trial.row(ranked[0]) if ranked else None

    for what, devices, setup, size in _candidates(result):
        kind = what.split(" ", 1)[0]
        if tries <= 0:
            break
        if kind in kinds:
            continue
        tries -= 1
        row = first_fit(devices, setup)
        if row is None:
            if kind == "devices":
                failed_devices.append(devices)
            continue
        if kind == "devices" and devices > 2 * result.devices:  # doubled past a count that failed: bisect
            lo, hi = max(d for d in failed_devices if d < devices), devices  # over multiples of a node
            step = 8
            while tries > 0 and (hi - lo) > step and (mid := (lo + hi) // 2 // step * step) > lo:
                tries -= 1
                found = first_fit(mid, setup)
                lo, hi = (lo, mid) if found else (mid, hi)
                if found:
                    devices, row = mid, found
            what, size = f"devices {result.devices:,} -> {devices:,}", abs(devices - result.devices) / result.devices
        kinds.add(kind)
        fixes.append(
            {
                "change": what,
                "relative_change": size,
                "devices": devices,
                "global_batch": setup.global_batch,
                "seq_len": setup.seq_len,
                "offload": setup.offload == "optimizer",
                **row,
            }
        )
    return sorted(fixes, key=lambda f: float(f["relative_change"]))


def does_not_fit(
    cfg: LlmConfig, hardware: Hardware, result: SearchResult, space: SearchSpace | None = None
) -> dict[str, Any]:
    """The reason no layout fits, the nearest miss and the smallest changes that make one fit."""
    fixes = fits_with(cfg, hardware, result, space)
    return {"reason": why_none_fits(result), "nearest_miss": nearest_miss(result), "fits_with": fixes}
