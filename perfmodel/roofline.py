"""Hierarchical roofline: (ops, hardware) -> time, bound and breakdown, vectorised over ops.

    time = kernels · overhead + max(engine times, level times, collective time)

- engine time: executed FLOPs / (dtype peak of the path that runs them · efficiency ·
  share of units the op can occupy); GEMM-like work goes through the tile and wave model.
- level time: latency + bytes / (bandwidth · efficiency · share of units). DRAM carries the
  compulsory bytes unless the working set fits the last-level cache (then it stays there); the
  cache level carries every byte, and for GEMMs the re-reads the tiles cause.
- ``bound`` names the engine or level with the largest time, or ``latency`` when the fixed
  overhead exceeds it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

import numpy as np

from perfmodel import allocator, roofline_labels, uncalibrated_interval
from perfmodel import machine as _machine
from perfmodel.cost import Cost, CostBatch
from perfmodel.dtypes import DTYPE_NAMES
from perfmodel.efficiency import ModelDefaults
from perfmodel.gemm_sums import GEMM_SUMS, add_unique
from perfmodel.machine import MachineTables, derived, tables
from perfmodel.memory_time import in_flight_time, level_time, llc_hit_share
from perfmodel.nvidia_gemm_paths import converts_to_nhwc, simt_on_cudnn
from perfmodel.ops import Op, OpError, Work, make_op
from perfmodel.ops.base import DTYPE_BYTES, FloatArray, IntArray
from perfmodel.search.conv_space import channel_intervals, family_of, simt_conv_space, unit_concurrency
from perfmodel.search.distinct_gemms import best_distinct, merge_choices
from perfmodel.search.gemm_cost import GemmChoice
from perfmodel.search.gemm_space import GemmCandidates, compact_space, concat_spaces, full_space

# the collective and flash-attention models are imported where a batch has such ops (`perfmodel predict` of a
# GEMM needs neither: issue 25)
if TYPE_CHECKING:
    from perfmodel.hardware import Hardware
    from perfmodel.search.attention_cost import AttentionCandidates

Timing = Literal["kernel", "host"]
_FP32 = DTYPE_NAMES.index("fp32")
HardwareLike: TypeAlias = "Hardware | str"
OpLike = Op | dict[str, Any]

allocator.tune()  # batch results from the heap, reused call after call (glibc only; PERFMODEL_MALLOPT=0: off)


def evaluate(work: Work, ops: Sequence[Op], hardware: Hardware, timing: Timing = "kernel",
             warm_cache: bool = False, defaults: ModelDefaults | None = None,
             space: GemmCandidates | None = None) -> CostBatch:
    """The roofline of ``work`` (from ``ops``) on ``hardware``.

    ``defaults`` replace the model's; ``space`` is the GEMM schedule space to choose from (the
    compact fixed set by default; ``perfmodel.search`` passes the full space).
    """
    t = tables(hardware)
    if defaults is not None:
        t = dataclasses.replace(t, defaults=defaults)
    d = t.defaults
    n = work.n
    _check_supported(t, work, ops)
    busy = np.minimum(1.0, work.parallel_items / (t.units * d.blocks_per_unit_for_bandwidth))
    busy = np.maximum(busy, 1.0 / t.units)
    m_peak = t.matrix_peak[work.matrix_dtype]
    v_peak = t.vector_peak[work.vector_dtype]

    t_vector = work.flops_vector / (v_peak * d.vector_efficiency * busy)
    t_special = work.flops_special / (t.special_peak * d.vector_efficiency * busy)
    t_matrix = work.flops_matrix / (m_peak * d.matrix_efficiency * busy)
    compulsory = work.dram_bytes
    llc = t.llc
    llc_capacity = hardware.level_capacity_bytes(llc) if llc else None
    hit = llc_hit_share(compulsory, llc_capacity or 0.0, d.llc_resident_fraction) if warm_cache and llc \
        else np.zeros(n)
    gemm = (work.gemm_batch.sum(axis=1) > 0) & (work.flops_matrix > 0)
    flash = work.attention[:, 0] > 0
    totals = _GemmTotals(n)
    if gemm.any():
        idx = np.nonzero(gemm)[0]
        share = _library_share(d, work)
        if _machine.SIMT_INTEGER_OVERLAP:  # integer work beside the FMAs: a SIMT implicit GEMM at the GEMM's share
            overlap = (t.integer_overlap[work.matrix_dtype] > 0) & (work.conv_library > 0) & (work.conv_direct == 0)
            share = np.where(overlap, 1.0, share)
        _gemms(t, work, idx, m_peak * share, compulsory, space or compact_space(t), totals)
    if flash.any():
        from perfmodel.search.attention_cost import attention_space, compact_attention_space

        full = space is not None and space.size > compact_space(t).size
        attention = attention_space(t) if full else compact_attention_space(t)
        _flash(t, work, np.nonzero(flash)[0], m_peak, v_peak, compulsory, totals, attention)
    gemm = gemm | flash
    if gemm.any():
        t_matrix = np.where(gemm, totals.compute_s, t_matrix)
        busy = np.where(gemm, np.maximum(totals.busy, 1.0 / t.units), busy)

    hit = np.where(gemm, 0.0, hit)  # GEMMs count their own L2 reuse (raster groups, panels)
    resident = hit >= 1.0
    dram_bytes = np.where(gemm, totals.dram_bytes, compulsory * (1.0 - hit))
    levels = {t.dram.name: dram_bytes}
    dram_latency = t.latency_s(t.dram)
    # streaming kernels on GPUs: Little's law (below) already limits them by their threads
    mem_busy = np.where((work.threads > 0) & (t.hardware.kind == "gpu"), 1.0, busy)
    level_times = {t.dram.name: level_time(dram_bytes, t.bandwidth_bytes_per_s(t.dram), dram_latency,
                                            d.stream_dram, mem_busy)}
    # Little's law over every byte of the stream: a warm one's hits arrive at the LLC's latency, its misses
    # at DRAM's (a resident working set has no DRAM bytes: its stream is timed at the LLC below)
    llc_args = (t.latency_s(llc), t.bandwidth_bytes_per_s(llc)) if llc is not None else (0.0, 1.0)
    flight = in_flight_time(work, t, dram_latency, t.bandwidth_bytes_per_s(t.dram), hit, *llc_args,
                             dram_bytes=compulsory)
    first_trip = hit * llc_args[0] + (1.0 - hit) * dram_latency
    if work.fp32_instructions_between_loads.any():  # issued between a thread's loads: no load in flight meanwhile
        fp32_per_s = t.vector_peak[_FP32] / 2.0 * d.vector_efficiency * busy  # an FMA: 2 FLOPs, 1 instruction
        flight = flight + work.fp32_instructions_between_loads / fp32_per_s
    if t.hardware.kind == "gpu":  # indexSelectLargeIndex's first index sector (docs/model.md section 3)
        first_trip = first_trip + np.where(work.index_sector_elements > 0, dram_latency, 0.0)
    level_times[t.dram.name] = np.where(dram_bytes > 0, np.maximum(level_times[t.dram.name],
                                                                   first_trip + flight), 0.0)
    if t.hardware.kind == "gpu" and work.dependent_round_trips.any():  # a chain of loads: one latency each
        level_times[t.dram.name] = np.maximum(level_times[t.dram.name], work.dependent_round_trips * dram_latency)
    # each GEMM of an op is its own kernel: the op's level times add up over its GEMMs
    level_times[t.dram.name] = np.where(gemm, totals.dram_s, level_times[t.dram.name])
    if llc is not None:
        reuse_bytes = np.where(gemm, totals.reuse_bytes, compulsory)
        levels[llc.name] = reuse_bytes
        llc_s = level_time(reuse_bytes, t.bandwidth_bytes_per_s(llc), t.latency_s(llc), d.onchip_efficiency,
                            mem_busy)
        # a warm, resident stream is served by the LLC, and its loads in flight bound it there as at DRAM
        warm_stream = resident & ~gemm & (reuse_bytes > 0)
        if warm_stream.any():
            llc_s = np.where(warm_stream, np.maximum(llc_s, t.latency_s(llc) + flight), llc_s)
        level_times[llc.name] = np.where(gemm, totals.reuse_s, llc_s)

    pad = t.scratchpad
    if pad is not None and pad.bandwidth_bytes_per_s and work.scratchpad_bytes.any():
        levels[pad.name] = work.scratchpad_bytes
        level_times[pad.name] = np.where(work.scratchpad_bytes > 0, work.scratchpad_bytes / (
            pad.bandwidth_bytes_per_s * d.onchip_efficiency * busy), 0.0)

    comm = work.comm_kind > 0
    t_comm = np.zeros(n)
    if comm.any():
        from perfmodel.collectives import collective_time

        # the collectives' rows only (row by row, 0 elsewhere: a mix's other rows cost nothing there)
        at = slice(None) if comm.all() else np.flatnonzero(comm)
        t_comm[at] = collective_time(t, work.comm_kind[at], work.comm_bytes[at], work.comm_devices[at],
                                     work.comm_devices_per_node[at], work.comm_algorithm[at])

    engine_times = {"matrix": t_matrix, "vector": t_vector, "special": t_special}
    columns = [t_matrix, t_vector, t_special, *level_times.values(), t_comm]
    top, which = roofline_labels.top_bound(columns)
    body = np.where(gemm, np.maximum(totals.body_s, np.maximum(t_vector, t_special)), top)
    # an algorithm's transform kernels (Winograd non-fused) stream through DRAM after the GEMMs: their time adds;
    # so do NVIDIA's NCHW -> NHWC conversions (cuDNN's nchwToNhwcKernel) before a tensor-core convolution
    serial_bytes = work.serial_bytes + 2.0 * work.nhwc_bytes * converts_to_nhwc(t, work.matrix_dtype)
    serial_s = serial_bytes / (t.bandwidth_bytes_per_s(t.dram) * d.dram_efficiency)
    if serial_s.any():
        body = body + serial_s
        levels[t.dram.name] = levels[t.dram.name] + serial_bytes
        level_times[t.dram.name] = level_times[t.dram.name] + serial_s
        columns[3 + list(level_times).index(t.dram.name)] = level_times[t.dram.name]  # the bound counts them too
        which = roofline_labels.top_bound(columns)[1]
    if d.conv_wgrad_dram_efficiency is not None and work.wgrad_stream_bytes.any():
        body = np.maximum(body, _gradient_streams(t, d, work))
    if llc is not None and t.hardware.kind == "gpu" and work.llc_round_trips.any():  # a chain after the stream
        body = body + work.llc_round_trips * t.latency_s(llc)
    per_kernel = t.kernel_overhead_s + (d.host_overhead_s if timing == "host" else 0.0)
    if t.hardware.kind == "gpu":  # flushed caches: code and parameters come from DRAM first (efficiency.py)
        per_kernel += d.cold_start_round_trips * dram_latency
    extra_kernels = totals.extra_kernels
    overhead = (work.kernels + extra_kernels) * per_kernel
    # CPUs: an output above the allocator's mmap threshold is written to fresh pages (faults, zeroing)
    out_bytes = work.bytes_by_role.get("activations_out", np.zeros(n))
    fresh_s = np.where(out_bytes >= d.fresh_output_threshold_bytes, out_bytes / d.fresh_output_bytes_per_s, 0.0)
    if fresh_s.any():
        body = body + fresh_s
        level_times[t.dram.name] = level_times[t.dram.name] + fresh_s
    time_s = body + overhead
    labels = ["matrix", "vector", "special", *level_times.keys(), "interconnect"]
    bound = roofline_labels.bound_names(t, work, which, labels,
                                        (overhead >= body) & (work.kernels > 0), work.kernels + extra_kernels == 0)

    peak_used = np.where(work.flops_matrix > 0, m_peak, v_peak)
    flops = work.flops
    utilization = np.where(time_s > 0, flops / np.maximum(time_s, 1e-30) / peak_used, 0.0)
    return CostBatch(
        hardware=hardware, ops=ops, time_s=time_s, bound=bound, overhead_s=overhead,
        flops_by_engine={"matrix": work.flops_matrix, "vector": work.flops_vector,
                         "special": work.flops_special},
        bytes_by_level=levels, time_s_by_level=level_times,
        time_s_by_engine={**engine_times, "interconnect": t_comm},
        compulsory_bytes=compulsory, utilization=utilization, schedule=totals.schedule,
        notes=roofline_labels.row_notes(t, work, resident, llc is not None),
    )


def _library_share(d: ModelDefaults, work: Work) -> FloatArray:
    """Per op, the sustained share of matrix peak its GEMMs reach over the one the GEMM model applies
    (``matrix_efficiency``): ``conv_matrix_efficiency / matrix_efficiency`` for a convolution library's forward
    kernels (``conv_direct_matrix_efficiency`` for its direct ones, where set), ``conv_backward_matrix_efficiency``
    for its gradient kernels (an op with both: the harmonic mean weighted by their FLOPs,
    ``Work.conv_gradient_share``), 1 elsewhere (docs/model.md section 5)."""
    conv = d.conv_matrix_efficiency
    if conv is None or not work.conv_library.any():
        return np.ones(work.n)
    forward: FloatArray | float = conv
    if d.conv_direct_matrix_efficiency is not None:  # unset (shipped): direct kernels at the library's share
        forward = np.where(work.conv_direct > 0, d.conv_direct_matrix_efficiency, conv)
    library: FloatArray | float = forward
    grad = d.conv_backward_matrix_efficiency
    share = work.conv_gradient_share
    if grad is not None:  # unset (shipped): the gradients run at the forward's share
        library = 1.0 / ((1.0 - share) / forward + share / grad)
    elif d.conv_direct_matrix_efficiency is not None:  # a direct forward's gradients: the library's share
        library = np.where(share > 0, 1.0 / ((1.0 - share) / forward + share / conv), forward)
    out: FloatArray = np.where(work.conv_library > 0, library / d.matrix_efficiency, 1.0)
    return out


def _gradient_streams(t: MachineTables, d: ModelDefaults, work: Work) -> FloatArray:
    """A convolution backward's two library calls streamed one after the other: the data gradient's bytes at
    ``dram_efficiency``, the weight gradient's at ``conv_wgrad_dram_efficiency`` (docs/model.md section 5)."""
    bandwidth = t.bandwidth_bytes_per_s(t.dram)
    wgrad = d.conv_wgrad_dram_efficiency or d.dram_efficiency
    out: FloatArray = work.dgrad_stream_bytes / (bandwidth * d.dram_efficiency) + work.wgrad_stream_bytes / (
        bandwidth * wgrad)
    return out


def _gemms(t: MachineTables, work: Work, idx: np.ndarray[Any, np.dtype[np.intp]], m_peak: FloatArray,
           compulsory: FloatArray, space: GemmCandidates, out: _GemmTotals) -> None:
    """Choose a schedule for every GEMM slot of the ops in ``idx``; add its figures to ``out``.

    The GEMMs of one op (forward, data- and weight-gradient) run one after the other: their
    times and bytes add up.
    """
    every = idx.size == work.n  # every op (a table's chunk of matmuls): the arrays as they are, not copies

    def ops_(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return values if every else values[idx]

    batch = ops_(work.gemm_batch)
    rows, slots = np.nonzero(batch > 0)
    # one GEMM per op, in slot 0 (forward matmuls): each slot-0 column read as it is, not gathered
    first_slot = rows.size == idx.size and not slots.any()

    def gemm_(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        return np.ascontiguousarray(values[:, 0]) if first_slot else values[rows, slots]

    op_rows = idx[rows]
    gm, gn, gk = ops_(work.gemm_m), ops_(work.gemm_n), ops_(work.gemm_k)
    gemm_flops = 2.0 * batch * gm * gn * gk
    total_flops = gemm_flops.sum(axis=1)
    share = gemm_(gemm_flops) / np.maximum(total_flops if first_slot else total_flops[rows], 1.0)
    elem = DTYPE_BYTES[work.matrix_dtype[op_rows]]
    # GEMMs issued one after another (a per-image loop): one is searched, each repeat adds its time and launch
    serial = np.maximum(gemm_(ops_(work.gemm_serial)), 1.0)
    # B stored narrower than the matrix dtype (weight-only int4 / int8) is loaded at its own width
    b_bytes = gemm_(ops_(work.gemm_b_bytes))
    columns = (gemm_(batch), gemm_(gm), gemm_(gn), gemm_(gk), elem, m_peak[op_rows],
               compulsory[op_rows] * share / serial, np.where(b_bytes > 0, b_bytes / elem, 1.0))
    # cuDNN's SIMT convolutions run their own fixed tiles (conv_space), one family per code: searched apart, their
    # candidates indexed after ``space``'s
    simt = simt_on_cudnn(t, work.matrix_dtype[op_rows])
    nvidia_gpu = t.hardware.kind == "gpu" and t.hardware.vendor == "nvidia"
    if nvidia_gpu:
        # the MMAs of the padded reduction at the peak, the loads of the real one: a lower peak per useful FLOP
        padded = channel_intervals(columns[3], gemm_(ops_(work.gemm_channels)), elem, ~simt)
        columns = (*columns[:5], columns[5] * columns[3] / padded, *columns[6:])
    family = family_of(gemm_(ops_(work.gemm_simt_conv)), simt, ~simt & nvidia_gpu, t.mma_k)
    if family.any():
        parts, spaces = [], [space]
        for code in np.unique(family):
            own = space if code == 0 else simt_conv_space(t, int(code))
            where = family == code
            part = best_distinct(t, own, *(c[where] for c in columns))
            if code != 0:
                part = unit_concurrency(t, part, int(code))
                part = dataclasses.replace(part, index=part.index + sum(s.size for s in spaces))
                spaces.append(own)
            parts.append((where, part))
        choice = GemmChoice(*(merge_choices(parts, f.name) for f in dataclasses.fields(GemmChoice)))
        space = concat_spaces(*spaces)
    else:
        choice = best_distinct(t, space, *columns)
    if (serial > 1).any():
        choice = dataclasses.replace(choice, **{f: getattr(choice, f) * serial for f in GEMM_SUMS})
    first = np.ones(len(rows), dtype=bool)
    first[1:] = rows[1:] != rows[:-1]
    add = add_unique if first.all() else np.add.at
    for name in GEMM_SUMS:
        add(getattr(out, name), op_rows, getattr(choice, name))
    # a split-K reduction kernel, except in weight-only kernels (B narrower: reduced in-kernel, ``gemm_cost``)
    reduction = (space.split[choice.index] > 1) & (columns[7] >= 1.0)
    add(out.extra_kernels, op_rows, np.where(reduction, serial, 0.0) + serial - 1.0)
    add(out.busy, op_rows, choice.busy * share)
    chosen = {"tile_m": space.bm[choice.index], "tile_n": space.bn[choice.index],
              "tile_k": np.maximum(np.ceil(space.bk_bytes[choice.index] / elem / t.mma_k) * t.mma_k, t.mma_k),
              "stages": space.stages[choice.index], "split_k": space.split[choice.index],
              "raster_group": space.group[choice.index], "waves": choice.waves, "tiles": choice.tiles,
              "resident_tiles": choice.resident, "footprint_bytes": choice.footprint_bytes}
    for key, values in chosen.items():
        if every and first_slot:  # each op's one GEMM, in op order
            out.schedule[key][:] = values
        else:
            out.schedule[key][op_rows[first]] = values[first]


def _flash(t: MachineTables, work: Work, idx: np.ndarray[Any, np.dtype[np.intp]], m_peak: FloatArray,
           v_peak: FloatArray, compulsory: FloatArray, out: _GemmTotals, space: AttentionCandidates) -> None:
    """Choose Q and KV tiles for the flash-attention ops in ``idx``; write their figures to ``out``."""
    from perfmodel.search.attention_cost import best_attention

    a = work.attention[idx]
    elem = DTYPE_BYTES[work.matrix_dtype[idx]]
    choice = best_attention(t, space, bh=a[:, 0], group=a[:, 1], sq=a[:, 2], skv=a[:, 3], d=a[:, 4], dv=a[:, 5],
                            causal=a[:, 6], elem=elem, peak=m_peak[idx], vector_peak=v_peak[idx],
                            compulsory=compulsory[idx], kv_bytes=a[:, 7], fwd=a[:, 8], bwd=a[:, 9])
    for name in ("compute_s", "dram_s", "reuse_s", "body_s", "dram_bytes", "reuse_bytes"):
        getattr(out, name)[idx] = getattr(choice, name)
    out.busy[idx] = np.clip(choice.ctas / (t.units * t.defaults.blocks_per_unit_for_bandwidth), 0.0, 1.0)
    chosen = {"tile_m": space.bq[choice.index], "tile_n": space.bkv[choice.index],
              "stages": space.stages[choice.index], "split_k": space.split[choice.index], "tiles": choice.ctas,
              "kv_tile_pairs": choice.pairs,
              "waves": choice.ctas / (t.units * choice.resident), "resident_tiles": choice.resident,
              "footprint_bytes": choice.footprint_bytes}
    for key, values in chosen.items():
        out.schedule.setdefault(key, np.zeros(work.n))[idx] = values


@dataclasses.dataclass
class _GemmTotals:
    """Per-op sums over an op's GEMMs (zeros for ops without GEMMs)."""

    n: int
    compute_s: FloatArray = dataclasses.field(init=False)
    dram_s: FloatArray = dataclasses.field(init=False)
    reuse_s: FloatArray = dataclasses.field(init=False)
    body_s: FloatArray = dataclasses.field(init=False)
    dram_bytes: FloatArray = dataclasses.field(init=False)
    reuse_bytes: FloatArray = dataclasses.field(init=False)
    busy: FloatArray = dataclasses.field(init=False)
    extra_kernels: FloatArray = dataclasses.field(init=False)
    schedule: dict[str, FloatArray] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        for name in ("compute_s", "dram_s", "reuse_s", "body_s", "dram_bytes", "reuse_bytes", "busy",
                     "extra_kernels"):
            setattr(self, name, np.zeros(self.n))
        self.schedule = {k: np.zeros(self.n) for k in SCHEDULE_KEYS}


SCHEDULE_KEYS = ("tile_m", "tile_n", "tile_k", "stages", "split_k", "raster_group", "waves", "tiles",
                 "resident_tiles", "footprint_bytes")


def _check_supported(t: MachineTables, work: Work, ops: Sequence[Op]) -> None:
    """An op whose dtype no engine of the device can run is an error, not a guess."""
    matrix_ok = derived(t, "matrix_supported", lambda t: np.array([p.supported for p in t.matrix_paths])
                        )[work.matrix_dtype]
    vector_ok = derived(t, "vector_supported", lambda t: np.array([p.supported for p in t.vector_paths])
                        )[work.vector_dtype]
    bad = ((work.flops_matrix > 0) & ~matrix_ok) | ((work.flops_vector + work.flops_special > 0) & ~vector_ok)
    if bad.any():
        i = int(np.nonzero(bad)[0][0])
        matrix_path, vector_path = t.matrix_paths[int(work.matrix_dtype[i])], t.vector_paths[int(work.vector_dtype[i])]
        path = vector_path if matrix_ok[i] else matrix_path
        raise OpError(ops[i].kind if i < len(ops) else "?", "dtype", path.note)


def resolve_hardware(hardware: HardwareLike) -> Hardware:
    """A ``Hardware`` as given, or the bundled device of that id."""
    if not isinstance(hardware, str):
        return hardware
    from perfmodel.specs import load_hardware

    return load_hardware(hardware)


# ops grouped by class: (class, its rows ascending, its ops in that order), classes in first-seen order
# (``calibration.op_groups.by_type``)
OpGroups: TypeAlias = Sequence[tuple[type[Op], IntArray, list[Op]]]


def work_of(ops: Sequence[Op], granularity_bytes: float, groups: OpGroups | None = None) -> Work:
    """Work of mixed ops, grouped by class for vectorised extraction, in the given order (``groups``: the ops
    grouped so already, where the caller has them: the same groups, the same Work)."""
    if groups is None:
        rows: dict[type[Op], list[int]] = {}
        for i, op in enumerate(ops):
            rows.setdefault(type(op), []).append(i)
        if len(rows) == 1:
            cls = next(iter(rows))
            return cls.work(list(ops), granularity_bytes)
        parts = [cls.work([ops[i] for i in idx], granularity_bytes) for cls, idx in rows.items()]
        order = np.argsort(np.concatenate([np.array(idx) for idx in rows.values()]), kind="stable")
        return Work.concat(parts).take(order)
    if len(groups) == 1:
        cls, _, members = groups[0]
        return cls.work(list(members), granularity_bytes)
    parts = [cls.work(members, granularity_bytes) for cls, _, members in groups]
    order = np.argsort(np.concatenate([index for _, index, _ in groups]), kind="stable")
    return Work.concat(parts).take(order)


SpaceName = Literal["compact", "full"]


def predict_many(hardware: HardwareLike, ops: Iterable[OpLike], timing: Timing = "kernel",
                 warm_cache: bool = False, defaults: ModelDefaults | None = None,
                 space: SpaceName = "compact") -> CostBatch:
    """Predict many ops at once (vectorised with numpy); ops are ``Op`` or plain dicts.

    GEMM-like ops choose their schedule from the compact fixed space by default (fast for
    thousands of ops); ``space="full"`` searches the whole schedule space for each. Every op carries
    ``uncalibrated_interval_s``, the 10-90 % band of its class on devices the model was not fitted on.
    """
    hw = resolve_hardware(hardware)
    given = ops if isinstance(ops, list) else list(ops)
    if given and (set(map(type, given)) == {dict} or all(isinstance(op, Mapping) for op in given)):
        from perfmodel.columnar import predict_dicts  # JSON dicts: columns, repeats predicted once

        return predict_dicts(hw, given, timing, warm_cache, defaults, space)  # type: ignore[arg-type]
    built = [make_op(op) for op in given]
    batch = predict_built(hw, built, timing, warm_cache, defaults, space)
    batch.uncalibrated_interval_s = uncalibrated_interval.interval_s(built, batch.time_s)
    return batch


def predict_built(hw: Hardware, built: list[Op], timing: Timing = "kernel", warm_cache: bool = False,
                  defaults: ModelDefaults | None = None, space: SpaceName = "compact",
                  groups: OpGroups | None = None) -> CostBatch:
    """``predict_many`` of ops already built (``Op`` instances), without ``uncalibrated_interval_s`` (None): for a
    caller that replaces the model's interval with its own (``calibration.predict_calibrated``, which hands over
    the ops grouped by class, ``groups``, for ``work_of``)."""
    granularity = float(hw.dram.access_granularity_bytes or 1)
    work = work_of(built, granularity, groups)
    t = tables(hw)
    return evaluate(work, built, hw, timing, warm_cache, defaults,
                    full_space(t) if space == "full" else compact_space(t))


Predicted = TypeVar("Predicted")


def predict_valid(raw: Sequence[OpLike], predict: Callable[[list[Op]], Predicted]
                  ) -> tuple[list[int], Predicted | None, dict[int, str]]:
    """``predict`` (e.g. ``predict_many`` on one device) on the ops of ``raw`` that build and that it accepts:
    their indices in ``raw``, its result (None when no op is left) and the reason for each other index. An op the
    device cannot run (its dtype: fp64 on a TPU) is found by trying the ops one by one, only when the batch fails."""
    errors: dict[int, str] = {}
    built: list[Op] = []
    index: list[int] = []
    for i, op in enumerate(raw):
        try:
            built.append(make_op(op))
            index.append(i)
        except (ValueError, TypeError) as exc:
            errors[i] = str(exc)
    if not built:
        return [], None, errors
    try:
        return index, predict(built), errors
    except ValueError:
        keep: list[int] = []
        for j, op in enumerate(built):
            try:
                predict([op])
                keep.append(j)
            except ValueError as exc:
                errors[index[j]] = str(exc)
        if not keep:
            return [], None, errors
        return [index[j] for j in keep], predict([built[j] for j in keep]), errors


def predict(hardware: HardwareLike, op: OpLike, timing: Timing = "kernel", warm_cache: bool = False,
            defaults: ModelDefaults | None = None, space: SpaceName = "full") -> Cost:
    """Predict one op: time, bound and breakdown.

    ``timing='host'`` adds the host launch and synchronisation that a wall clock around one op
    measures; the default is device time as a profiler (CUPTI, rocprof) reports it.
    ``warm_cache=True``: the inputs were just touched (produced by the previous op), so a
    working set that fits the last-level cache is served from it (its bandwidth, its latency in
    Little's law); a larger one streams from DRAM as when cold. The default is a cold cache,
    as Nsight Compute measures (it flushes caches between replays). GEMM-like ops search the
    full schedule space (``space="compact"``: the fixed set ``predict_many`` uses).
    """
    return predict_many(hardware, [op], timing, warm_cache, defaults, space)[0]
