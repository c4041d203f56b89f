"""Kernels -> measured runs: each kernel is summed into the run of the outermost op perfmodel models
that enclosed its launch; a kernel with no such op is kept as *unmodelled* with its time and why."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from perfmodel.ops import OpError, make_op
from perfmodel.traces import aten_comms, aten_ops
from perfmodel.traces.aten_args import Unbuildable
from perfmodel.traces.kernel_names import kernel_family
from perfmodel.traces.records import SELF_SUFFIX, KernelRecord, OpCall, ParsedTrace

MAX_KERNEL_NAMES = 16  # distinct kernel names kept per run


@dataclass(frozen=True)
class MatchedRun:
    """One op call with the summed device time of its kernels (SI units)."""

    op: dict[str, Any]
    measured_time_s: float
    kernel_names: tuple[str, ...]
    kernel_count: int
    op_name: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class UnmodelledKernel:
    """Kernels (grouped by name and reason) that no modelled op explains: never dropped silently."""

    name: str
    time_s: float
    count: int
    reason: str


@dataclass
class MatchResult:
    runs: list[MatchedRun]
    unmodelled: list[UnmodelledKernel]
    total_kernel_time_s: float
    matched_time_s: float
    notes: list[str] = field(default_factory=list)
    kernel_runs: list[int | None] = field(default_factory=list)  # per input kernel: index into runs, or None
    kernel_reasons: list[str | None] = field(default_factory=list)  # per input kernel: why unmodelled, or None

    @property
    def unmodelled_time_s(self) -> float:
        return self.total_kernel_time_s - self.matched_time_s

    @property
    def unmodelled_time_share(self) -> float:
        """Share of the kernel time no run explains (0 when there is no kernel time)."""
        return self.unmodelled_time_s / self.total_kernel_time_s if self.total_kernel_time_s > 0 else 0.0


@dataclass
class _Run:
    call: OpCall
    op: dict[str, Any]
    notes: list[str]
    time_s: float = 0.0
    count: int = 0
    names: dict[str, None] = field(default_factory=dict)


def _collective_op(kernel: KernelRecord, index: int) -> tuple[OpCall, dict[str, Any], list[str]] | str | None:
    """The collective ``record_param_comms`` recorded for this kernel (one run per kernel: its launching op,
    else a call of its own), the reason it cannot be modelled, or None where nothing was recorded."""
    comm = kernel.collective
    if comm is None:
        return None
    try:
        op = aten_comms.from_comm_args(comm)
    except Unbuildable as exc:
        return str(exc)
    call = kernel.innermost_op or OpCall(-1 - index, f"nccl:{comm.collective}", kernel.start_s or 0.0,
                                         kernel.duration_s)
    return call, op, []


def _modelled_op(kernel: KernelRecord, cache: dict[tuple[Any, ...], tuple[dict[str, Any], list[str]] | str]
                 ) -> tuple[OpCall, dict[str, Any], list[str]] | str:
    """The outermost recognised op that builds, or the reason none does."""
    first_reason: str | None = None
    for call in kernel.ops:
        if not aten_ops.recognised(call.name):
            continue
        signature = (call.name, call.input_dims, call.input_types, call.concrete_inputs, call.input_strides)
        built = cache.get(signature)
        if built is None:
            try:
                built = aten_ops.build(call)
            except Unbuildable as exc:
                built = str(exc)
            cache[signature] = built
        if isinstance(built, str):
            first_reason = first_reason or built
            continue
        return call, built[0], built[1]
    if first_reason is not None:
        return first_reason
    return _reason_without_op(kernel)


def _reason_without_op(kernel: KernelRecord) -> str:
    if kernel.category in ("memcpy", "memset"):
        return f"{kernel.category}: a transfer or fill, not a modelled op"
    if kernel.category == "cpu_op":
        if kernel.name.endswith(SELF_SUFFIX):
            return f"{kernel.op_name}'s own time outside its child ops (framework work around them)"
        return f"CPU op {kernel.ops[-1].name if kernel.ops else kernel.name} is not modelled"
    family = kernel_family(kernel.name)
    where = f"op {kernel.ops[-1].name} is not modelled" if kernel.ops else "no op recorded for it"
    if family is None:
        return f"unrecognised kernel, {where}"
    return f"{family} kernel (recognised by name), {where}: shapes unknown"


def _kernel_choices(run: _Run) -> None:
    """What the library chose, read from the run's kernel names: TF32 math for an fp32 GEMM or convolution
    (``..._tf32f32_...``, ``ampere_tf32_s1688gemm...``: PyTorch's cuDNN default on Ampere and newer), and a
    convolution's algorithm (``_conv_algorithm``). The library's choice is part of the measurement, so the
    model runs the same one."""
    names = " ".join(run.names).lower()
    kind = run.op.get("kind")
    if kind in ("matmul", "conv2d") and run.op.get("dtype") == "fp32" and "compute_dtype" not in run.op \
            and "tf32" in names:
        run.op["compute_dtype"] = "tf32"
        run.notes.append("tf32 math, from its kernel names")
    algorithm = _conv_algorithm(names, run.op) if kind == "conv2d" else None
    if algorithm is None:
        return
    try:
        make_op({**run.op, "algorithm": algorithm})
    except OpError as exc:
        run.notes.append(f"{algorithm} kernels, but modelled as implicit GEMM ({exc.reason})")
        return
    run.op["algorithm"] = algorithm
    run.notes.append(f"algorithm {algorithm}, from its kernel names")


_FFT_SIZE = re.compile(r"fft2d_r2c_(\d+)x(\d+)")


def _conv_algorithm(names: str, op: dict[str, Any]) -> str | None:
    """cuDNN's/MIOpen's Winograd (``winogradForwardData4x4`` & co.: non-fused) or FFT (``fft2d_r2c_32x32``:
    FFT_TILING where the transform is smaller than the padded map, else FFT) from a conv's kernel names."""
    if "winograd" in names:
        return "winograd_nonfused" if "winograd_nonfused" in names else "winograd"
    if "fft" not in names:
        return None
    size = _FFT_SIZE.search(names)
    padded = int(op.get("height", 0)) + 2 * int(op.get("padding", 0))
    return "fft_tiling" if size is not None and int(size.group(1)) < padded else "fft"


def match_runs(parsed: ParsedTrace | Iterable[KernelRecord]) -> MatchResult:
    """Group the kernels of a parsed trace into measured runs of perfmodel ops."""
    kernels = parsed.kernels if isinstance(parsed, ParsedTrace) else list(parsed)
    cache: dict[tuple[Any, ...], tuple[dict[str, Any], list[str]] | str] = {}
    runs: dict[int, _Run] = {}
    unmodelled: dict[tuple[str, str], list[float]] = {}
    total = 0.0
    call_of_kernel: list[int | None] = []
    reasons: list[str | None] = []
    for index, kernel in enumerate(kernels):
        total += kernel.duration_s
        call_of_kernel.append(None)
        found = _collective_op(kernel, index)
        if found is None:
            found = _modelled_op(kernel, cache) if kernel.category != "memcpy" and kernel.category != "memset" \
                else _reason_without_op(kernel)
        reasons.append(found if isinstance(found, str) else None)
        if isinstance(found, str):
            entry = unmodelled.setdefault((kernel.name, found), [0.0, 0])
            entry[0] += kernel.duration_s
            entry[1] += kernel.instances
            continue
        call, op, notes = found
        call_of_kernel[-1] = call.call_id
        run = runs.get(call.call_id)
        if run is None:
            run = runs[call.call_id] = _Run(call, dict(op), list(notes))
        run.time_s += kernel.duration_s
        run.count += kernel.instances
        if len(run.names) < MAX_KERNEL_NAMES:
            run.names[kernel.name] = None
    ordered = sorted(runs.values(), key=lambda r: r.call.start_s)
    for r in ordered:
        _kernel_choices(r)
    matched = [MatchedRun(r.op, r.time_s, tuple(r.names), r.count, r.call.name, tuple(r.notes)) for r in ordered]
    index_of_call = {r.call.call_id: i for i, r in enumerate(ordered)}
    kernel_runs = [None if c is None else index_of_call[c] for c in call_of_kernel]
    leftovers = [UnmodelledKernel(name, time_s, int(count), reason)
                 for (name, reason), (time_s, count) in unmodelled.items()]
    leftovers.sort(key=lambda u: -u.time_s)
    return MatchResult(matched, leftovers, total, sum(r.measured_time_s for r in matched), kernel_runs=kernel_runs,
                       kernel_reasons=reasons)
