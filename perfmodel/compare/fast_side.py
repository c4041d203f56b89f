"""A Kineto trace file's side without a ``KernelRecord`` per kernel: the same side ``side_from_parsed`` gives
(``tests/compare/test_compare_columns.py`` checks it on every real trace), in a fraction of the time.

The kernels are read into columns (``kineto_columns``). Kernels alike in everything the matcher reads (name,
category, grid, block, bytes, a zero duration, and the contents of their op chain) are matched once, by the
reference matcher (``matching._kernel_op``) on one of them; its answer is carried to the others: the op call of
the same depth in each one's chain is its run (an own call per kernel where the answer is not a framework op).
The later passes of ``match_runs`` (a repeated kernel, GEMM tile x grid, launch geometry) and the grouping of
``side_from_parsed`` are done on the columns in the same order, with the same float sums (``np.bincount`` and
``np.cumsum`` add in index order). What the matcher would complete with a file-wide fallback (an op missing its
``Input type`` or strides, an embedding backward needing its forward) is not taken: ``None``, and the caller
parses the file by the reference path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.compare.names import normalise_kernel_name
from perfmodel.compare.sides import MAX_NAMES, Group, GroupKey, OpKeys, Side, kernel_shape, layer_of
from perfmodel.traces import aten_comms, aten_ops, fbgemm_ops, gemm_ops, geometry_ops, kernel_ops, kineto
from perfmodel.traces.detect import detect
from perfmodel.traces.gc_pause import without_gc
from perfmodel.traces.kernel_choices import kernel_choices
from perfmodel.traces.kernel_names import kernel_family
from perfmodel.traces.kineto_columns import MAX_CHAIN, US, KinetoColumns, OpCalls, Unsupported
from perfmodel.traces.matching import MAX_KERNEL_NAMES, REPEATABLE, REPEATED, ZERO_DURATION, _Cache, _kernel_op
from perfmodel.traces.records import KernelRecord
from perfmodel.traces.shape_links import NO_INPUT_TYPE, STRIDE_NOT_RECORDED
from perfmodel.traces.source import Source, byte_stream, open_source

FALLBACK_MARKERS = (NO_INPUT_TYPE, STRIDE_NOT_RECORDED, fbgemm_ops.NEEDS_FORWARD)
_MISSED, _CHAIN, _OWN = 0, 1, 2  # what the matcher made of a kernel: no op, an op call of its chain, its own
# what sends a file to the reference path: an event shape it does not take, a broken file (``TraceError`` is a
# ValueError), or any value odd enough to trip a conversion: the reference then answers (or says what is wrong)
_LEFT_TO_REFERENCE = (Unsupported, ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError)


@without_gc
def fast_file_side(source: Source, label: str) -> Side | None:
    """The side of a Kineto trace (bytes or a path), or None where the file is not one this path takes exactly
    as the reference does (another format, a broken file, an event shape it leaves to the reference)."""
    read = read_columns(source)
    if read is None:
        return None
    try:
        return side_from_columns(read[0], label, read[1], read[2])
    except _LEFT_TO_REFERENCE:
        return None


@without_gc
def read_columns(source: Source) -> tuple[KinetoColumns, str | None, int | None] | None:
    """A Kineto trace's columns, device name and world size; None where this path does not take the file."""
    try:
        opened = open_source(source)
        if detect(opened).format != kineto.FORMAT:
            return None
        top_list = opened.head.decode("utf-8", "replace").lstrip("\ufeff \t\r\n").startswith("[")
        with byte_stream(opened) as stream:
            columns = KinetoColumns(stream, top_list)
    except _LEFT_TO_REFERENCE:
        return None
    return (columns, *kineto.head_metadata(opened.head))


def _chains(columns: KinetoColumns, calls: OpCalls) -> np.ndarray:
    """Per op, an id of its chain's contents (equal ids: equal calls outermost to innermost, times and ids
    aside); -1 for ops no kernel's chain holds."""
    parent = columns.parent
    chain = np.full(len(columns.ops), -1, dtype=np.int64)
    mark = np.zeros(len(columns.ops), dtype=bool)
    current = np.unique(columns.kernel_op[columns.kernel_op >= 0])
    while current.size:
        mark[current] = True
        current = parent[current]
        current = np.unique(current[current >= 0])
        current = current[~mark[current]]
    held = np.flatnonzero(mark)
    held = held[np.argsort(columns.call_ids[held], kind="stable")]  # parents first
    known: dict[tuple[int, tuple[Any, ...]], int] = {}
    chain_of: dict[int, int] = {-1: -1}
    depth_of: dict[int, int] = {-1: 0}
    held_list = held.tolist()
    for i, p, op_keys in zip(held_list, parent[held].tolist(), calls.keys(held_list, reads_args), strict=True):
        chain_of[i] = known.setdefault((chain_of[p], op_keys), len(known))
        depth_of[i] = depth_of[p] + 1
    if max(depth_of.values()) > MAX_CHAIN:
        raise Unsupported("an op chain deeper than the reference keeps")
    chain[held] = [chain_of[i] for i in held_list]
    return chain


def reads_args(name: str) -> bool:
    """Whether the matcher reads the arguments of a call of this name: the ops it builds (``aten_ops``, a
    ``nccl:`` annotation) and the copy ops a memcpy takes its bytes from; of any other call only the name."""
    return aten_ops.recognised(name) or name.startswith(aten_comms.ANNOTATION_PREFIX) or name in kernel_ops._COPY_OPS


def _representative(columns: KinetoColumns, calls: OpCalls, k: int) -> KernelRecord:
    """The ``KernelRecord`` ``kineto._records`` makes of kernel ``k`` (what the matcher reads of it)."""
    op = int(columns.kernel_op[k])
    chain = kineto._chain(calls(op) if op >= 0 else None)
    inner = chain[-1] if chain else None
    return KernelRecord(
        name=columns.names[k], category=columns.categories[k], duration_s=float(columns.dur_us[k]) * US,
        source_format=kineto.FORMAT, start_s=float(columns.ts_us[k]) * US, grid=columns.grids[k],
        block=columns.blocks[k], op_name=inner.name if inner else None,
        input_dims=inner.input_dims if inner else None, input_types=inner.input_types if inner else None, ops=chain,
        transfer_bytes=columns.nbytes[k], device_kind=columns.device_kinds[k])


class _Runs:
    """Matched runs as columns: per run its first kernel, phase (the pass that made it), start, op and op name."""

    def __init__(self) -> None:
        self.first: list[int] = []
        self.phase: list[int] = []
        self.start: list[float] = []
        self.op: list[dict[str, Any]] = []
        self.name: list[str] = []

    def add(self, first: int, phase: int, start: float, op: dict[str, Any], name: str) -> int:
        self.first.append(first)
        self.phase.append(phase)
        self.start.append(start)
        self.op.append(op)
        self.name.append(name)
        return len(self.first) - 1


@without_gc
def side_from_columns(columns: KinetoColumns, label: str, device_name: str | None,
                      world_size: int | None) -> Side:
    calls = OpCalls(columns)
    chain = _chains(columns, calls)
    kernel_op = columns.kernel_op
    kernel_chain = np.where(kernel_op >= 0, np.r_[chain, -1][kernel_op], -1).tolist()
    dur_s = columns.dur_us * US
    zero = (dur_s <= 0).tolist()
    index: dict[tuple[Any, ...], int] = {}
    signature = np.array([index.setdefault(s, len(index)) for s in zip(
        columns.names, columns.categories, columns.device_kinds, columns.grids, columns.blocks, columns.nbytes,
        zero, kernel_chain, strict=True)], dtype=np.int64)
    _, first = np.unique(signature, return_index=True)
    reps = [_representative(columns, calls, k) for k in first.tolist()]  # alive meanwhile: the cache keys ids
    cache: _Cache = {}
    grid_cache: dict[Any, Any] = {}
    kind, levels, found = [], [], []
    for rep, k in zip(reps, first.tolist(), strict=True):
        result = (ZERO_DURATION, "below timer resolution") if rep.duration_s <= 0 else _kernel_op(
            rep, k, cache, grid_cache, world_size, None)
        found.append(result)
        if len(result) == 2:
            kind.append(_MISSED)
            levels.append(0)
            continue
        call = result[0]
        depth = next((d for d, c in enumerate(rep.ops) if c is call), None)
        if call.call_id >= 0 and depth is None:
            raise Unsupported("an op call outside the kernel's chain")
        kind.append(_CHAIN if depth is not None and call.call_id >= 0 else _OWN)
        levels.append(len(rep.ops) - 1 - depth if depth is not None else 0)
    if any(isinstance(v, str) and any(m in v for m in FALLBACK_MARKERS) for v in cache.values()):
        raise Unsupported("a call the matcher would complete from the rest of the file")
    return _group(columns, calls, label, device_name, signature, reps, found,
                  np.array(kind, dtype=np.int64), np.array(levels, dtype=np.int64), dur_s)


def _own_name(rep: KernelRecord) -> str:
    return rep.innermost_op.name if rep.innermost_op else rep.name  # matching._own_call


def _group(columns: KinetoColumns, calls: OpCalls, label: str, device_name: str | None, signature: np.ndarray,
           reps: list[KernelRecord], found: list[Any], kind: np.ndarray, levels: np.ndarray,
           dur_s: np.ndarray) -> Side:
    count = len(signature)
    k_kind = kind[signature]
    # pass 1: a run per op call (the call at the matched depth of each kernel's chain), or per kernel
    ancestor = columns.kernel_op.copy()
    k_levels = levels[signature]
    for step in range(1, int(k_levels.max(initial=0)) + 1):
        climb = k_levels >= step
        ancestor[climb] = columns.parent[ancestor[climb]]
    run_key = np.where(k_kind == _CHAIN, ancestor, -1 - np.arange(count))
    run_of = np.full(count, -1, dtype=np.int64)
    matched = np.flatnonzero(k_kind != _MISSED)
    keys, firsts, inverse = np.unique(run_key[matched], return_index=True, return_inverse=True)
    by_first = np.argsort(firsts, kind="stable")  # runs in the order of their first kernels (match_runs' dict)
    rank = np.empty(len(keys), dtype=np.int64)
    rank[by_first] = np.arange(len(keys))
    run_of[matched] = rank[inverse]
    first_kernel = matched[firsts[by_first]]
    run_signature = signature[first_kernel]
    on_chain = kind[run_signature] == _CHAIN
    call = run_key[first_kernel]
    start = np.where(on_chain, columns.op_ts[np.where(on_chain, call, 0)], columns.ts_us[first_kernel]) * US
    own = [None if len(f) == 2 else f[0].name for f in found]
    runs = _Runs()
    runs.first, runs.phase, runs.start = first_kernel.tolist(), [0] * len(keys), start.tolist()
    runs.op = [found[s][1] for s in run_signature.tolist()]
    runs.name = [columns.op_name(c) if c >= 0 and chained else own[s] for c, chained, s in zip(
        call.tolist(), on_chain.tolist(), run_signature.tolist(), strict=True)]
    sources = [None if len(f) == 2 else f[3] for f in found]
    _later_passes(columns, signature, reps, found, run_of, runs, sources)
    _choices(columns, run_of, runs)
    return _side(columns, label, device_name, signature, reps, run_of, runs, dur_s)


def _later_passes(columns: KinetoColumns, signature: np.ndarray, reps: list[KernelRecord], found: list[Any],
                  run_of: np.ndarray, runs: _Runs, sources: list[str | None]) -> None:
    """``match_runs`` after its first pass: repeated kernels, then GEMM tile x grid and launch geometry."""
    missed_all = np.flatnonzero(run_of < 0)
    missed = missed_all.tolist()
    repeatable = [len(f) == 2 and f[1] in REPEATABLE and rep.grid is not None for f, rep in zip(found, reps,
                                                                                               strict=True)]
    if np.array(repeatable, dtype=bool)[signature[missed_all]].any():
        counts = np.bincount(run_of[run_of >= 0], minlength=len(runs.first))
        known: dict[tuple[Any, ...], int] = {}
        for r, k in enumerate(runs.first):
            rep = reps[signature[k]]
            if counts[r] == 1 and rep.grid is not None and sources[signature[k]] != REPEATED:
                known.setdefault((rep.name, rep.grid, rep.block), r)
        for k in missed:
            rep = reps[signature[k]]
            source = known.get((rep.name, rep.grid, rep.block)) if repeatable[signature[k]] else None
            if source is not None:
                run_of[k] = runs.add(k, 1, float(columns.ts_us[k]) * US, dict(runs.op[source]), _own_name(rep))
    left = missed_all[run_of[missed_all] < 0]
    timed = np.array([rep.duration_s > 0 for rep in reps], dtype=bool)
    left = left[timed[signature[left]]]
    inferred: dict[int, dict[str, Any]] = {}  # signature -> the op its kernels are given
    for s in np.unique(signature[left]).tolist():
        found_op = gemm_ops.tile_grid_op(reps[s]) or geometry_ops.geometry_op(reps[s])
        if found_op is not None:
            inferred[s] = found_op[0]
    has = np.array([s in inferred for s in range(len(reps))], dtype=bool)
    left = left[has[signature[left]]]  # a run of its own each, in kernel order
    left_signature = signature[left].tolist()
    run_of[left] = np.arange(len(runs.first), len(runs.first) + len(left))
    runs.first += left.tolist()
    runs.phase += [2] * len(left)
    runs.start += (columns.ts_us[left] * US).tolist()
    runs.op += [inferred[s] for s in left_signature]
    runs.name += [_own_name(reps[s]) for s in left_signature]


def _choices(columns: KinetoColumns, run_of: np.ndarray, runs: _Runs) -> None:
    """``kernel_choices`` on each GEMM and convolution run, from its first ``MAX_KERNEL_NAMES`` distinct kernel
    names in kernel order (the op a run reports: ``match_runs``); once per op and names."""
    wanted = np.array([op.get("kind") in ("matmul", "conv2d") for op in runs.op] or [False], dtype=bool)
    kernels = np.flatnonzero((run_of >= 0) & wanted[np.maximum(run_of, 0)])
    if not kernels.size:
        return
    codes: dict[str, int] = {}
    name = np.array([codes.setdefault(columns.names[k], len(codes)) for k in kernels.tolist()], dtype=np.int64)
    texts = list(codes)
    _, first = np.unique(run_of[kernels] * len(texts) + name, return_index=True)
    names: dict[int, list[str]] = {}
    for position in np.sort(first).tolist():
        listed = names.setdefault(int(run_of[kernels[position]]), [])
        if len(listed) < MAX_KERNEL_NAMES:
            listed.append(texts[int(name[position])])
    chosen: dict[tuple[int, tuple[str, ...]], dict[str, Any]] = {}
    for r, listed in names.items():
        key = (id(runs.op[r]), tuple(listed))
        op = chosen.get(key)
        if op is None:
            op = chosen[key] = dict(runs.op[r])
            kernel_choices(op, listed, [])
        runs.op[r] = op


def _side(columns: KinetoColumns, label: str, device_name: str | None, signature: np.ndarray,
          reps: list[KernelRecord], run_of: np.ndarray, runs: _Runs, dur_s: np.ndarray) -> Side:
    """``side_from_parsed``'s grouping on the columns."""
    run_time = np.bincount(run_of[run_of >= 0], weights=dur_s[run_of >= 0], minlength=len(runs.first))
    ordered = np.lexsort((np.array(runs.first), np.array(runs.phase), np.array(runs.start)))
    groups: dict[GroupKey, Group] = {}
    listed: list[Group] = []
    position: dict[GroupKey, int] = {}
    pairs: dict[tuple[str, int], int] = {}  # (op name, op object) -> a code: runs of one signature share an op
    code = np.array([pairs.setdefault(p, len(pairs)) for p in zip(runs.name, map(id, runs.op), strict=True)],
                    dtype=np.int64)
    in_order = code[ordered]
    _, first = np.unique(in_order, return_index=True)
    group_of_code = np.empty(len(pairs), dtype=np.int64)
    op_keys = OpKeys()
    for at_run in np.sort(first).tolist():
        r = int(ordered[at_run])
        op = runs.op[r]
        key = op_keys(runs.name[r], op)
        at = position.get(key)
        if at is None:
            at = position[key] = len(listed)
            listed.append(Group(key, str(op.get("kind", "?")), dict(op)))
            groups[key] = listed[-1]
        group_of_code[code[r]] = at
    group_of_run = group_of_code[code]
    sequence = group_of_run[ordered]
    by_group = np.argsort(sequence, kind="stable")
    bounds = np.searchsorted(sequence[by_group], np.arange(len(listed) + 1))
    times = run_time[ordered[by_group]].tolist()
    for at, group in enumerate(listed):
        group.times_s = times[bounds[at]:bounds[at + 1]]
    group_of = np.where(run_of >= 0, group_of_run[np.maximum(run_of, 0)], -1)
    names: dict[str, str] = {}
    sig_name = [names.get(rep.name) or names.setdefault(rep.name, normalise_kernel_name(rep.name)) for rep in reps]
    for k in np.flatnonzero(group_of < 0).tolist():
        rep = reps[signature[k]]
        key = ("kernel", sig_name[signature[k]], kernel_shape(rep))
        at = position.get(key)
        if at is None:
            at = position[key] = len(listed)
            listed.append(Group(key, f"unmodelled: {kernel_family(rep.name) or rep.category}", None))
            groups[key] = listed[-1]
        group_of[k] = at
        listed[at].times_s.append(float(dur_s[k]))
    launches = np.bincount(group_of, minlength=len(listed)).tolist()
    for group, n in zip(listed, launches, strict=True):
        group.launches = n
    name_codes = {n: i for i, n in enumerate(dict.fromkeys(sig_name))}
    _kernel_names(listed, group_of, np.array([name_codes[n] for n in sig_name], dtype=np.int64)[signature],
                  list(name_codes))
    layers = [layer_of(rep) for rep in reps]
    layer_codes = {n: i for i, n in enumerate(dict.fromkeys(x for x in layers if x is not None))}
    sig_layer = np.array([-1 if x is None else layer_codes[x] for x in layers], dtype=np.int64)
    _layers(listed, group_of, sig_layer[signature], list(layer_codes), dur_s)
    total = float(np.cumsum(dur_s)[-1])
    return Side(label, kineto.FORMAT, device_name, groups, total, [])


def _kernel_names(listed: list[Group], group_of: np.ndarray, name: np.ndarray, texts: list[str]) -> None:
    """Each group's first ``MAX_NAMES`` distinct kernel names, in kernel order."""
    pairs = group_of * len(texts) + name
    _, first = np.unique(pairs, return_index=True)
    for k in np.sort(first).tolist():
        group = listed[int(group_of[k])]
        if len(group.kernel_names) < MAX_NAMES:
            group.kernel_names.append(texts[int(name[k])])


def _layers(listed: list[Group], group_of: np.ndarray, layer: np.ndarray, texts: list[str],
            dur_s: np.ndarray) -> None:
    """Each group's seconds per layer, added in kernel order, layers in order of first appearance."""
    has = np.flatnonzero(layer >= 0)
    pairs = group_of[has] * max(len(texts), 1) + layer[has]
    keys, first, inverse = np.unique(pairs, return_index=True, return_inverse=True)
    sums = np.bincount(inverse, weights=dur_s[has], minlength=len(keys))
    for position in np.argsort(first, kind="stable").tolist():
        k = int(has[first[position]])
        listed[int(group_of[k])].layers[texts[int(layer[k])]] = float(sums[position])

