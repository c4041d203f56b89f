"""One side of a comparison: the calls of a trace (or stored runs) grouped by (name, op, shape).

A modelled op call (``match_runs``) is one sample of its group, keyed by its op name and its op's
parameters (kind, shapes, dtype); a kernel no op explains is one sample of the group of its normalised
kernel name. Samples stay in trace order, so two profiles of one program pair call by call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from perfmodel.compare.names import normalise_kernel_name
from perfmodel.traces.gc_pause import without_gc
from perfmodel.traces.kernel_names import kernel_family
from perfmodel.traces.matching import MatchResult, match_runs
from perfmodel.traces.records import DEVICE_TIME_CATEGORIES, KernelRecord, ParsedTrace

if TYPE_CHECKING:  # the store (SQLAlchemy, ~0.4 s to import) only where stored runs are compared
    from perfmodel.store import RunRow

GroupKey = tuple[str, str, str]  # ("op", op name, op JSON) or ("kernel", normalised name, kernel_shape)
_STEP = re.compile(r"^ProfilerStep#\d+$")
_PREFIX = "autograd::engine::evaluate_function: "
_NUMBER = re.compile(r"#\d+")
MAX_NAMES = 16  # kernel names kept per group
_UNSEEN = object()


@dataclass
class Group:
    """The repeated calls of one (name, op, shape) on one side: per-call times (s) in trace order."""

    key: GroupKey
    kind: str  # the op kind ('conv2d', 'matmul', ...), or 'unmodelled: <kernel family>'
    op: dict[str, Any] | None  # the perfmodel op (None for an unmodelled kernel)
    times_s: list[float] = field(default_factory=list)
    launches: int = 0  # kernel launches (an op call may launch several)
    kernel_names: list[str] = field(default_factory=list)
    layers: dict[str, float] = field(default_factory=dict)  # seconds per layer / module the trace names

    @property
    def total_s(self) -> float:
        return sum(self.times_s)


@dataclass
class Side:
    """One side of a comparison: its groups, its format and the device it names (where it does)."""

    label: str
    format: str
    device_name: str | None
    groups: dict[GroupKey, Group]
    total_time_s: float
    warnings: list[str] = field(default_factory=list)


def op_key(op_name: str, op: dict[str, Any]) -> GroupKey:
    return ("op", op_name, json.dumps(op, sort_keys=True, separators=(",", ":"), default=str))


class OpKeys:
    """``op_key`` once per distinct op: an op's orjson text (about 20x cheaper than ``json.dumps``; equal ops give
    equal text, distinct ops distinct text) finds the key made before. Ops orjson cannot write are keyed
    directly."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, bytes], GroupKey] = {}

    def __call__(self, op_name: str, op: dict[str, Any]) -> GroupKey:
        try:
            text = orjson.dumps(op, option=orjson.OPT_SORT_KEYS)
        except (TypeError, orjson.JSONEncodeError):
            return op_key(op_name, op)
        if b"null" in text:  # orjson writes NaN as null: such an op is keyed directly
            return op_key(op_name, op)
        key = self._known.get((op_name, text))
        if key is None:
            key = self._known[(op_name, text)] = op_key(op_name, op)
        return key


def kernel_shape(kernel: KernelRecord) -> str:
    """The shape of a kernel no op explains: its category, grid and block, bytes moved where recorded."""
    parts: list[str] = [kernel.category]
    if kernel.grid is not None:
        parts.append(f"grid={'x'.join(map(str, kernel.grid))}")
    if kernel.block is not None:
        parts.append(f"block={'x'.join(map(str, kernel.block))}")
    if kernel.transfer_bytes is not None:
        parts.append(f"bytes={kernel.transfer_bytes}")
    return " ".join(parts)


def layer_of(kernel: KernelRecord) -> str | None:
    """The outermost op the trace names around a kernel (a module, a forward / backward node), step numbers
    dropped; None where it names none."""
    for call in kernel.ops:
        if _STEP.match(call.name):
            continue
        name = call.name[len(_PREFIX):] if call.name.startswith(_PREFIX) else call.name
        return _NUMBER.sub("", name)[:200]
    return None


def _add(group: Group, name: str, launches: int, layer: str | None, time_s: float) -> None:
    group.launches += launches
    if len(group.kernel_names) < MAX_NAMES and name not in group.kernel_names:
        group.kernel_names.append(name)
    if layer is not None:
        group.layers[layer] = group.layers.get(layer, 0.0) + time_s


@without_gc  # matching and grouping build ~10 small acyclic objects per kernel: see gc_pause
def side_from_parsed(parsed: ParsedTrace, label: str, matched: MatchResult | None = None) -> Side:
    """Group a parsed trace's modelled op calls and its unmodelled kernels (device time only, unless the
    profile has none: then its CPU ops)."""
    matched = matched or match_runs(parsed)
    groups: dict[GroupKey, Group] = {}
    keys = OpKeys()
    run_keys = [keys(run.op_name, run.op) for run in matched.runs]
    for key, run in zip(run_keys, matched.runs, strict=True):
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(key, str(run.op.get("kind", "?")), dict(run.op))
        group.times_s.append(run.measured_time_s)
    total = 0.0
    device_only = matched.has_device_time
    names: dict[str, str] = {}  # raw -> normalised: a trace repeats a few hundred names many times
    layers: dict[int, Any] = {}  # id of a kernel's op chain (the parser shares one per op call) -> its layer
    for kernel, run_index in zip(parsed.kernels, matched.kernel_runs, strict=True):
        if device_only and kernel.category not in DEVICE_TIME_CATEGORIES:
            continue
        total += kernel.duration_s
        name = names.get(kernel.name)
        if name is None:
            name = names[kernel.name] = normalise_kernel_name(kernel.name)
        layer = layers.get(id(kernel.ops), _UNSEEN)
        if layer is _UNSEEN:
            layer = layers[id(kernel.ops)] = layer_of(kernel)
        if run_index is not None:
            _add(groups[run_keys[run_index]], name, kernel.instances, layer, kernel.duration_s)
            continue
        key = ("kernel", name, kernel_shape(kernel))
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(key, f"unmodelled: {kernel_family(kernel.name) or kernel.category}", None)
        group.times_s.append(kernel.duration_s)
        _add(group, name, kernel.instances, layer, kernel.duration_s)
    return Side(label, parsed.format, parsed.device_name, groups, total, list(parsed.warnings))


def side_from_runs(runs: Iterable[RunRow], label: str, format: str = "stored runs",
                   kernels: Mapping[int, Sequence[str]] | None = None) -> Side:
    """Group stored runs (e.g. of one trace upload) by op name and op; each run is one call. ``kernels``: the
    kernel names stored for each run id (normalised here), so that a changed algorithm reads as *kernels
    changed* as it does from the files."""
    groups: dict[GroupKey, Group] = {}
    total = 0.0
    keys = OpKeys()
    names: dict[str, str] = {}
    for run in sorted(runs, key=lambda r: r.id):
        key = keys(run.tags.get("op_name", run.op_kind), run.op)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(key, run.op_kind, dict(run.op))
        group.times_s.append(run.measured_time_s)
        group.launches += 1
        total += run.measured_time_s
        for raw in (kernels or {}).get(run.id, ()):
            name = names.get(raw)
            if name is None:
                name = names[raw] = normalise_kernel_name(raw)
            _add(group, name, 0, None, 0.0)
    return Side(label, format, None, groups, total)
