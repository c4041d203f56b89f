"""Device activities -> measured runs, kernels first: each activity gets the op of the first source that knows
its work, and records which source and how sure:

1. ``collective metadata``: what ``record_param_comms`` recorded for an NCCL/RCCL kernel (group size from
   ``distributedInfo.world_size`` where it recorded none), or a ``nccl:<collective>`` annotation;
2. ``framework shapes``: the outermost op perfmodel models that enclosed its launch (``Input Dims``,
   ``Concrete Inputs``), ``fwd/bwd link`` where the op's output shape came from its backward node;
3. ``memcpy/memset``: an on-device copy or fill with its recorded bytes;
4. ``grid/block``: an elementwise or copy kernel sized by its grid and block (``kernel_ops``);
5. ``counters``: the measured work of any other kernel with profiler counters (DRAM bytes, SIMT FLOPs:
   ``counter_ops``);
6. ``repeated kernel``: a kernel still unmatched whose name, grid and block were matched alone elsewhere in the
   file (another iteration of the step) takes that run's op, confidence low;
7. ``GEMM tile x grid``: a library GEMM kernel still unmatched, sized by its name's tile and its grid, K assumed
   (``gemm_ops``, confidence low);
8. ``launch geometry``: any other kernel no library rule names, with its grid and block: one element per launched
   thread, element type and arrays read / written from its signature's pointers (``geometry_ops``, confidence
   low; an offload region's launch is a lower bound of its loop).

Kernels of one op call are summed into one run; an activity no source explains is kept as *unmodelled* with
its time, its reason and a reason category: never dropped silently."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from perfmodel.traces import (
    aten_comms,
    aten_ops,
    counter_ops,
    fbgemm_ops,
    gemm_ops,
    geometry_ops,
    kernel_ops,
    triton_ops,
)
from perfmodel.traces.aten_args import Args, Unbuildable
from perfmodel.traces.gc_pause import without_gc
from perfmodel.traces.kernel_choices import kernel_choices
from perfmodel.traces.kernel_names import gemm_tile, kernel_family, offload_region
from perfmodel.traces.records import DEVICE_TIME_CATEGORIES, SELF_SUFFIX, KernelRecord, OpCall, ParsedTrace
from perfmodel.traces.shape_links import (
    NO_INPUT_TYPE,
    STRIDE_NOT_RECORDED,
    CallDtypes,
    ConvLinks,
    linked_call,
    typed_call,
)

MAX_KERNEL_NAMES = 16  # distinct kernel names kept per run
SHAPES, LINK, COLLECTIVE = "framework shapes", "fwd/bwd link", "collective metadata"
REPEATED = "repeated kernel"
OFFLOAD_REGION = "compiler-generated offload region"  # an OpenMP / OpenACC target region (``offload_region``)
OFFLOAD_CATEGORY = "offload region: work not in file"
SOURCES = (SHAPES, LINK, COLLECTIVE, "memcpy/memset", "grid/block", counter_ops.COUNTERS, gemm_ops.TILE_GRID,
           REPEATED, geometry_ops.GEOMETRY)
# unmatched kernels a matched launch of the same kernel (name, grid, block) elsewhere in the file may explain
REPEATABLE = frozenset({"shapes not recorded", "unrecognised kernel", "op not modelled"})


@dataclass(frozen=True)
class MatchedRun:
    """One op call with the summed device time of its kernels (SI units)."""

    op: dict[str, Any]
    measured_time_s: float
    kernel_names: tuple[str, ...]
    kernel_count: int
    op_name: str
    notes: tuple[str, ...] = ()
    source: str = SHAPES  # which source of the file gave the op (``SOURCES``)
    confidence: str = "high"  # high: read from the file; medium / low: bounded or assumed (see notes)


@dataclass(frozen=True)
class UnmodelledKernel:
    """Kernels (grouped by name and reason) that no modelled op explains: never dropped silently."""

    name: str
    time_s: float
    count: int
    reason: str
    category: str = "other"  # the reason's category (``reason_category``)


@dataclass
class MatchResult:
    runs: list[MatchedRun]
    unmodelled: list[UnmodelledKernel]
    total_kernel_time_s: float
    matched_time_s: float
    notes: list[str] = field(default_factory=list)
    kernel_runs: list[int | None] = field(default_factory=list)  # per input kernel: index into runs, or None
    kernel_reasons: list[str | None] = field(default_factory=list)  # per input kernel: why unmodelled, or None
    kernel_sources: list[str | None] = field(default_factory=list)  # per input kernel: its run's source, or None
    kernel_categories: list[str | None] = field(default_factory=list)  # per input kernel: reason category
    has_device_time: bool = True  # False: a CPU-only profile (its records are host op times)

    def time_by_source(self) -> dict[str, float]:
        """Matched time (s) per source, largest first."""
        out: dict[str, float] = {}
        for run in self.runs:
            out[run.source] = out.get(run.source, 0.0) + run.measured_time_s
        return dict(sorted(out.items(), key=lambda item: -item[1]))

    def time_by_category(self) -> dict[str, float]:
        """Unmodelled time (s) per reason category, largest first."""
        out: dict[str, float] = {}
        for u in self.unmodelled:
            out[u.category] = out.get(u.category, 0.0) + u.time_s
        return dict(sorted(out.items(), key=lambda item: -item[1]))

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
    source: str = SHAPES
    confidence: str = "high"
    first_kernel: int = -1  # index of its first kernel in the trace


# a run measured as 0 s would be predicted "infinitely" slow (the calibration saw 1e6x on ResNet-50's fills)
ZERO_DURATION = ("recorded duration 0: shorter than the trace's timer resolution (Kineto: 1 us), nothing to "
                 "compare a prediction with")
Found = tuple[OpCall, dict[str, Any], list[str], str, str]  # call, op, notes, source, confidence
Missed = tuple[str, str]  # reason, category
_Cache = dict[tuple[Any, ...], tuple[dict[str, Any], list[str]] | str]


def reason_category(reason: str) -> str:
    """A short, stable category of an unmodelled reason (the report and the benchmarks sum time by it)."""
    lowered = reason.lower()
    if lowered.startswith(OFFLOAD_REGION):
        return OFFLOAD_CATEGORY
    for keys, category in ((("group size", "no message size", "collective"), "collective metadata missing"),
                           (("input dims", "not recorded", "no recorded shape", "shapes unknown", "no input type",
                             "record_shapes"), "shapes not recorded"),
                           (("has no perfmodel equivalent", "known dtype"), "dtype not modelled"),
                           (("returns a view",), "view: no data moved"),
                           (("own time", "cpu op"), "framework time (CPU)"),
                           (("unrecognised",), "unrecognised kernel"),
                           (("launch grid is not in the file",), "grid not recorded"),
                           (("is not modelled", "not modelled", "only the"), "op not modelled")):
        if any(key in lowered for key in keys):
            return category
    return "shapes give no valid op"


def _collective_op(kernel: KernelRecord, index: int, world_size: int | None) -> Found | Missed | None:
    """The collective ``record_param_comms`` recorded for this kernel (one run per kernel: its launching op,
    else a call of its own), the reason it cannot be modelled, or None where nothing was recorded."""
    comm = kernel.collective
    if comm is None:
        return None
    notes = [] if comm.group_size is not None or world_size is None else [
        f"group size {world_size} from distributedInfo.world_size (the default process group)"]
    try:
        op = aten_comms.from_comm_args(aten_comms.group_from_world(comm, world_size))
    except Unbuildable as exc:
        return str(exc), "collective metadata missing"
    call = kernel.innermost_op or OpCall(-1 - index, f"nccl:{comm.collective}", kernel.start_s or 0.0,
                                         kernel.duration_s)
    return call, op, notes, COLLECTIVE, "high"


def _build(call: OpCall, world_size: int | None, cache: _Cache) -> tuple[dict[str, Any], list[str]] | str:
    signature = (call.name, call.input_dims, call.input_types, call.concrete_inputs, call.input_strides,
                 call.output_dims, call.input_lists)
    built = cache.get(signature)
    if built is None:
        try:
            if call.name.startswith(aten_comms.ANNOTATION_PREFIX):
                built = aten_comms.annotation_op(Args(call), world_size)
            else:
                built = aten_ops.build(call)
        except Unbuildable as exc:
            built = str(exc)
        cache[signature] = built
    return built


@dataclass
class Fallbacks:
    """What a call whose recorded arguments do not build may still be given: a dtype from its kernels' names,
    an output shape from a backward op of the same shapes (``shape_links``)."""

    links: ConvLinks
    embeddings: fbgemm_ops.EmbeddingLinks
    dtypes: CallDtypes = field(default_factory=dict)


def _build_fallback(call: OpCall, kernel: KernelRecord, reason: str, world_size: int | None, cache: _Cache,
                    fallbacks: Fallbacks) -> tuple[tuple[dict[str, Any], list[str]] | str, list[str]]:
    """Build a call that failed for ``reason`` again with what ``fallbacks`` know: (built or reason, notes)."""
    notes: list[str] = []
    if NO_INPUT_TYPE in reason:
        typed = typed_call(call, kernel, fallbacks.dtypes)
        if typed is None:
            return reason, notes
        call = typed[0]
        notes.append(typed[1])
        built = _build(call, world_size, cache)
        if not isinstance(built, str):
            return built, notes
        reason = built
    if fbgemm_ops.NEEDS_FORWARD in reason:
        return fbgemm_ops.linked_backward(call, fallbacks.embeddings) or reason, [fbgemm_ops.LINK_NOTE]
    if STRIDE_NOT_RECORDED in reason:
        linked = linked_call(call, fallbacks.links)
        if linked is not None:
            notes.append("linked to the backward convolution of the same input and weight shapes (no sequence "
                         "number recorded)")
            return _build(linked, world_size, cache), notes
    return reason, notes


def _modelled_op(kernel: KernelRecord, cache: _Cache, world_size: int | None,
                 fallbacks: Fallbacks | None = None) -> Found | Missed:
    """The outermost recognised op that builds, or the reason none does (``fallbacks``: what may complete a
    call the trace recorded only in part)."""
    first_reason: str | None = None
    for call in kernel.ops:
        annotation = call.name.startswith(aten_comms.ANNOTATION_PREFIX)
        if not (annotation or aten_ops.recognised(call.name)):
            continue
        built = cache.get(("#call", id(call)))  # a call of the trace: alive meanwhile
        if built is None:
            built = cache[("#call", id(call))] = _build(call, world_size, cache)
        extra: list[str] = []
        if isinstance(built, str) and fallbacks is not None:
            built, extra = _build_fallback(call, kernel, built, world_size, cache, fallbacks)
        if isinstance(built, str):
            first_reason = first_reason or built
            continue
        op, notes = built
        notes = [*notes, *extra]
        linked = any("backward node" in note for note in notes)
        source = COLLECTIVE if annotation or call.name.startswith("c10d::") else LINK if linked else SHAPES
        # Inductor outputs, FBGEMM's mean row length: assumed
        assumed = linked or bool(extra) or triton_ops.is_inductor_kernel(call.name) or fbgemm_ops.recognised(call.name)
        return call, op, notes, source, "medium" if assumed else "high"
    if first_reason is not None:
        return first_reason, reason_category(first_reason)
    reason = _reason_without_op(kernel)
    return reason, reason_category(reason)


def _reason_without_op(kernel: KernelRecord) -> str:
    if kernel.category in ("memcpy", "memset"):
        return f"{kernel.category}: a transfer or fill, not a modelled op"
    if kernel.category == "cpu_op":
        if kernel.name.endswith(SELF_SUFFIX):
            return f"{kernel.op_name}'s own time outside its child ops (framework work around them)"
        return f"CPU op {kernel.ops[-1].name if kernel.ops else kernel.name} is not modelled"
    region = offload_region(kernel.name) if kernel.category == "kernel" else None
    if region is not None:
        return _offload_reason(kernel, *region)
    family = kernel_family(kernel.name)
    where = f"op {kernel.ops[-1].name} is not modelled" if kernel.ops else "no op recorded for it"
    if kernel.category == "device":
        return f"{kernel.device_kind or 'device'} activity {kernel.name[:60]!r}: {where}"
    plain = kernel_ops.plain_kernel_name(kernel.name) if kernel.grid is None else None
    if family is None and plain is not None:
        return (f"{plain}: a streaming kernel by name, one element per thread, but its launch grid is not in the "
                "file (a summary): its element count is unknown")
    if family is None and kernel.grid is None and kernel.category == "kernel":
        return (f"no rule names this kernel ({where}) and its launch grid is not in the file: nothing sizes its "
                "work (a launch would give one element per thread)")
    if family is None:
        return f"unrecognised kernel, {where}"
    bound = _gemm_bound(kernel) if family == "gemm" else ""
    return f"{family} kernel (recognised by name), {where}: shapes unknown{bound}"


def _offload_reason(kernel: KernelRecord, function: str, line: int) -> str:
    """Why a compiler-generated offload region stays unmatched: its work is a loop of the user's source (trip
    count, arrays, element type), none of it in the file; its launch is the runtime's choice (LLVM's OpenMP runtime
    caps the teams from the device's compute units and strides the loop over them), so a recorded grid is only a
    lower bound of the loop (``geometry_ops`` sizes a region by it as such; this reason is for one without)."""
    launch = ""
    if kernel.grid is not None and kernel.block is not None:
        teams, threads = math.prod(kernel.grid), math.prod(kernel.block)
        launch = (f"; launched as {teams:,} teams x {threads} threads = {teams * threads:,} work-items, the runtime's "
                  "choice: a loop longer than that strides over them, so the grid bounds neither its trip count nor "
                  "its bytes")
    return (f"{OFFLOAD_REGION} {function} at source line {line}: the loop's trip count, arrays and element type "
            f"are in the program's source, not in the file{launch}")


def _gemm_bound(kernel: KernelRecord) -> str:
    """What a GEMM kernel's tile x grid says of its problem: M·N at most tile x grid.x·grid.y (grid.z: a batch or
    split-K); K is in neither (its time would only give it circularly)."""
    tile = gemm_tile(kernel.name)
    if tile is None or kernel.grid is None:
        return ""
    x, y, z = kernel.grid
    return (f" (tile {tile[0]}x{tile[1]} x grid ({x}, {y}, {z}): M·N <= {tile[0] * tile[1] * x * y:,}"
            f"{f', z {z}: a batch or split-K' if z > 1 else ''}; K is not in the file)")


def _kernel_op(kernel: KernelRecord, index: int, cache: _Cache, grid_cache: dict[Any, Any],
               world_size: int | None, fallbacks: Fallbacks | None = None) -> Found | Missed:
    """The first source that knows this activity's work (module docstring), or why none does."""
    found = _collective_op(kernel, index, world_size)
    if found is not None:
        return found
    if kernel.category in ("memcpy", "memset"):
        copied = kernel_ops.copy_op(kernel)
        if len(copied) == 2:
            return copied
        op, notes, source, confidence = copied
        return _own_call(kernel, index), op, notes, source, confidence
    found = _modelled_op(kernel, cache, world_size, fallbacks)
    if len(found) == 5 or kernel.category == "cpu_op":
        return found
    key = (kernel.name, kernel.grid, kernel.block)
    inferred = grid_cache.get(key, False)
    if inferred is False:
        inferred = grid_cache[key] = kernel_ops.grid_op(kernel)
    if inferred is None and kernel.counters:
        inferred = counter_ops.counter_op(kernel)
    if inferred is None:
        return found
    op, notes, source, confidence = inferred
    return _own_call(kernel, index), op, list(notes), source, confidence


def _own_call(kernel: KernelRecord, index: int) -> OpCall:
    """A call of its own for an activity matched without a framework op (one run per activity)."""
    return OpCall(-1 - index, kernel.innermost_op.name if kernel.innermost_op else kernel.name,
                  kernel.start_s or 0.0, kernel.duration_s)


def _add(runs: dict[int, _Run], index: int, kernel: KernelRecord, found: Found) -> None:
    """Add one matched kernel to its call's run (made on its first kernel)."""
    call, op, notes, source, confidence = found
    run = runs.get(call.call_id)
    if run is None:
        run = runs[call.call_id] = _Run(call, dict(op), list(notes), source=source, confidence=confidence,
                                        first_kernel=index)
    run.time_s += kernel.duration_s
    run.count += kernel.instances
    if len(run.names) < MAX_KERNEL_NAMES:
        run.names[kernel.name] = None


def _repeated(kernels: list[KernelRecord], runs: dict[int, _Run], missed: list[int],
              categories: list[str | None]) -> list[int]:
    """Unmatched kernels launched again elsewhere in the file where a run of that kernel alone was matched (the
    same name, grid and block: another iteration of the same step): each becomes a run of that op, source
    ``repeated kernel``, confidence low (a GEMM's K is not in its grid: assumed the same). Their indices."""
    known: dict[tuple[Any, ...], _Run] = {}
    if not any(categories[i] in REPEATABLE and kernels[i].grid is not None for i in missed):
        return []
    for run in runs.values():
        kernel = kernels[run.first_kernel]
        if run.count == 1 and kernel.grid is not None and run.source != REPEATED:
            known.setdefault((kernel.name, kernel.grid, kernel.block), run)
    done = []
    for index in missed:
        kernel = kernels[index]
        if categories[index] not in REPEATABLE or kernel.grid is None:
            continue
        source = known.get((kernel.name, kernel.grid, kernel.block))
        if source is None:
            continue
        note = (f"same kernel, grid and block as the {source.call.name} run matched elsewhere in this file by "
                f"{source.source}: its op, assumed repeated (a GEMM's K is not in its grid)")
        _add(runs, index, kernel, (_own_call(kernel, index), source.op, [*source.notes, note], REPEATED, "low"))
        done.append(index)
    return done


def _retyped(kernels: list[KernelRecord], missed: list[int], reasons: list[str | None], cache: _Cache,
             world_size: int | None, fallbacks: Fallbacks) -> list[tuple[int, Found]]:
    """Kernels missed for want of an ``Input type`` whose call a later kernel's name typed (cuDNN's
    ``computeOffsetsKernel`` runs before the convolution kernel that names ``float``): their runs."""
    if not fallbacks.dtypes:
        return []
    out: list[tuple[int, Found]] = []
    for index in missed:
        reason = reasons[index]
        if reason is not None and NO_INPUT_TYPE in reason:
            found = _modelled_op(kernels[index], cache, world_size, fallbacks)
            if len(found) == 5:
                out.append((index, found))
    return out


@without_gc  # ~10 small acyclic objects per kernel: see gc_pause
def match_runs(parsed: ParsedTrace | Iterable[KernelRecord]) -> MatchResult:
    """Group the device activities of a parsed trace into measured runs of perfmodel ops."""
    kernels = parsed.kernels if isinstance(parsed, ParsedTrace) else list(parsed)
    world_size = parsed.world_size if isinstance(parsed, ParsedTrace) else None
    cache: _Cache = {}
    grid_cache: dict[Any, Any] = {}
    runs: dict[int, _Run] = {}
    unmodelled: dict[tuple[str, str, str], list[float]] = {}
    total = 0.0
    call_of_kernel: list[int | None] = []
    reasons: list[str | None] = []
    categories: list[str | None] = []
    missed: list[int] = []  # indices of the kernels no source explained (yet)
    fallbacks = Fallbacks(ConvLinks(kernels), fbgemm_ops.EmbeddingLinks(kernels))
    for index, kernel in enumerate(kernels):
        total += kernel.duration_s
        found = (ZERO_DURATION, "below timer resolution") if kernel.duration_s <= 0 else _kernel_op(
            kernel, index, cache, grid_cache, world_size, fallbacks)
        if len(found) == 2:
            reason, category = found
            call_of_kernel.append(None)
            reasons.append(reason)
            categories.append(category)
            missed.append(index)
            continue
        _add(runs, index, kernel, found)
        call_of_kernel.append(found[0].call_id)
        reasons.append(None)
        categories.append(None)
    for index, found in _retyped(kernels, missed, reasons, cache, world_size, fallbacks):
        _add(runs, index, kernel=kernels[index], found=found)
        call_of_kernel[index], reasons[index], categories[index] = found[0].call_id, None, None
    missed = [index for index in missed if call_of_kernel[index] is None]
    for index in _repeated(kernels, runs, missed, categories):
        call_of_kernel[index], reasons[index], categories[index] = -1 - index, None, None
    for index in missed:  # last, after a repeated launch could give the op with its real K; the launch alone last
        kernel = kernels[index]
        done = call_of_kernel[index] is not None or kernel.duration_s <= 0
        inferred = None if done else gemm_ops.tile_grid_op(kernel) or geometry_ops.geometry_op(kernel)
        if inferred is not None:
            _add(runs, index, kernel, (_own_call(kernel, index), *inferred))
            call_of_kernel[index], reasons[index], categories[index] = -1 - index, None, None
    for index in missed:
        if call_of_kernel[index] is None:
            kernel = kernels[index]
            entry = unmodelled.setdefault((kernel.name, reasons[index] or "", categories[index] or "other"), [0.0, 0])
            entry[0] += kernel.duration_s
            entry[1] += kernel.instances
    ordered = sorted(runs.values(), key=lambda r: r.call.start_s)
    for r in ordered:
        if kernel_choices(r.op, r.names, r.notes) == "low":
            r.confidence = "low"
    matched = [MatchedRun(r.op, r.time_s, tuple(r.names), r.count, r.call.name, tuple(r.notes), r.source,
                          r.confidence) for r in ordered]
    index_of_call = {r.call.call_id: i for i, r in enumerate(ordered)}
    kernel_runs = [None if c is None else index_of_call[c] for c in call_of_kernel]
    sources = [None if i is None else matched[i].source for i in kernel_runs]
    leftovers = [UnmodelledKernel(name, time_s, int(count), reason, category)
                 for (name, reason, category), (time_s, count) in unmodelled.items()]
    leftovers.sort(key=lambda u: -u.time_s)
    return MatchResult(matched, leftovers, total, sum(r.measured_time_s for r in matched), kernel_runs=kernel_runs,
                       kernel_reasons=reasons, kernel_sources=sources, kernel_categories=categories,
                       has_device_time=any(k.category in DEVICE_TIME_CATEGORIES for k in kernels))
