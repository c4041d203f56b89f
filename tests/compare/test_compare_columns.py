"""The columnar Kineto side (``perfmodel.compare.fast_side``) gives exactly the reference's side
(``side_from_parsed(parse_trace(...))``: same groups, times, names, layers) on every real Kineto trace it takes,
the same comparisons (groups, verdicts, digest) on real pairs and on an injected 5 % slowdown, and leaves every
other file to the reference (None)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from perfmodel.compare import diff_sides, side_from_parsed
from perfmodel.compare.diff import CompareError
from perfmodel.compare.fast_side import fast_file_side
from perfmodel.compare.load import file_side
from perfmodel.compare.sides import Side
from perfmodel.specs import load_hardware
from perfmodel.traces import TraceError, parse_trace
from perfmodel.traces.kineto_columns import _previous_enclosing
from perfmodel.traces.matching import match_runs
from tests.compare.conftest import REPO, RESNET_0, RESNET_4, ROOT, SHARED, trace_path

TAKEN = {RESNET_0, RESNET_4, "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
         "mtia_trace_single_rank__mtia_rank_0.json.gz", "triton_example__triton_example.json.gz"}


def _kineto_files() -> list[Path]:
    files = {p.name: p for folder in (SHARED, REPO) if folder.is_dir() for p in sorted(folder.glob("*.json*"))}
    return list(files.values())


def _reference(path: Path) -> Side | None:
    try:
        parsed = parse_trace(path, path.name)
    except TraceError:
        return None
    return side_from_parsed(parsed, path.name) if parsed.format == "pytorch_kineto" else None


@pytest.mark.parametrize("path", _kineto_files(), ids=lambda p: p.name[:40])
def test_columnar_side_is_the_reference_side(path: Path) -> None:
    reference, fast = _reference(path), fast_file_side(path, path.name)
    if fast is None:
        assert path.name not in TAKEN, "a trace the columnar path took before now falls back"
        return
    assert reference is not None
    assert repr(fast) == repr(reference)
    assert fast.groups and all(g.times_s and g.launches for g in fast.groups.values())


def test_columnar_path_takes_the_repository_trace() -> None:
    assert fast_file_side(REPO / RESNET_0, RESNET_0) is not None


def _digest(base: Side, new: Side) -> tuple[str, dict[str, int]]:
    result = diff_sides(base, new, load_hardware("nvidia-v100-sxm2-32gb"))
    verdicts: dict[str, int] = {}
    for group in result.groups:
        verdicts[group.verdict] = verdicts.get(group.verdict, 0) + 1
    return hashlib.sha1(repr(result).encode()).hexdigest(), verdicts


def test_real_pair_compares_alike() -> None:
    base, new = trace_path(RESNET_0), trace_path(RESNET_4)
    fast_base, fast_new = fast_file_side(base, base.name), fast_file_side(new, new.name)
    reference_base, reference_new = _reference(base), _reference(new)
    assert fast_base is not None and fast_new is not None
    assert reference_base is not None and reference_new is not None
    digest, verdicts = _digest(fast_base, fast_new)
    assert (digest, verdicts) == _digest(reference_base, reference_new)
    assert "regression" not in verdicts  # noise only


def _builder() -> object:
    spec = importlib.util.spec_from_file_location("compare_speed", ROOT / "benchmarks" / "compare_speed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_injected_slowdown_compares_alike(tmp_path: Path) -> None:
    build = _builder().build  # type: ignore[attr-defined]
    base, new = tmp_path / "base.json.gz", tmp_path / "new.json.gz"
    build(10_000, 0.0, 1.0, 1, base)  # two copies of the trace: 12 calls of the slowed convolution
    build(10_000, 0.02, 1.05, 2, new)
    fast_base, fast_new = file_side(base), file_side(new)
    reference_base, reference_new = _reference(base), _reference(new)
    assert reference_base is not None and reference_new is not None
    assert (repr(fast_base), repr(fast_new)) == (repr(reference_base), repr(reference_new))
    digest, verdicts = _digest(fast_base, fast_new)
    assert (digest, verdicts) == _digest(reference_base, reference_new)
    result = diff_sides(fast_base, fast_new, load_hardware("nvidia-v100-sxm2-32gb"))
    assert [g.name for g in result.regressions] == ["aten::conv2d"]
    assert 3.5 <= result.regressions[0].change_pct <= 7.5  # 12 calls, 2 % noise on each kernel


def _write(path: Path, events: list[dict[str, object]]) -> Path:
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    return path


def test_other_files_fall_back(tmp_path: Path) -> None:
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 2,
              "args": {"correlation": 1, "grid": [1, 1, 1], "block": [32, 1, 1]}}
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 5, "dur": 1,
              "args": {"correlation": 1}}
    odd_sizes = {**kernel, "ts": 20, "args": {"grid": "(2, 1, 1)", "block": 64}}  # dim3's other spellings
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 30, "dur": 9,
          "args": {"Input Dims": [[4096]], "Input type": ["float"], "External id": 9}}
    by_id = {**kernel, "ts": 50, "args": {"External id": 9}}  # no launch: its op by External id
    plain = _write(tmp_path / "plain.json.gz", [launch, kernel, odd_sizes, op, by_id])
    plain_side = fast_file_side(plain, plain.name)
    assert plain_side is not None and any(key[1] == "aten::relu" for key in plain_side.groups)
    assert repr(fast_file_side(plain, plain.name)) == repr(_reference(plain))
    odd_ts = _write(tmp_path / "odd.json.gz", [launch, {**kernel, "ts": "10"}])
    annotation = _write(tmp_path / "nccl.json.gz", [launch, kernel, {"ph": "X", "cat": "user_annotation",
                                                                     "name": "nccl:all_reduce", "pid": 1, "tid": 1,
                                                                     "ts": 4, "dur": 3}])
    cpu_only = _write(tmp_path / "cpu.json.gz", [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1,
                                                  "tid": 1, "ts": 4, "dur": 3}])
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel"')
    for path in (odd_ts, annotation, cpu_only, broken):
        assert fast_file_side(path, path.name) is None
    assert repr(file_side(odd_ts)) == repr(_reference(odd_ts))  # the reference path, as before
    with pytest.raises(CompareError, match=r"broken\.json"):
        file_side(broken)


def _stack_parents(ends: np.ndarray, segment: np.ndarray) -> list[int]:
    """``kineto._nest``'s stack on positions in order, a new stack at each segment start."""
    out: list[int] = []
    stack: list[int] = []
    for p, end in enumerate(ends.tolist()):
        if segment[p] == p:
            stack = []
        while stack and ends[stack[-1]] < end:
            stack.pop()
        out.append(stack[-1] if stack else -1)
        stack.append(p)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_previous_enclosing_is_the_stack(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    ends = rng.integers(0, 12, n).astype(np.float64)  # many ties
    if seed >= 8:  # long chains: ends rising (every p jumps to the segment's start) or falling, with ties
        ends = np.sort(ends)[::-1 if seed % 2 else 1].copy()
    starts = np.sort(rng.choice(n, size=int(rng.integers(1, 5)), replace=False))
    starts[0] = 0
    segment = np.repeat(starts, np.diff(np.r_[starts, n]))
    assert _previous_enclosing(ends, segment).tolist() == _stack_parents(ends, segment)


def test_later_passes_and_run_order_as_the_reference(tmp_path: Path) -> None:
    """Kernels matched by ``match_runs``' later passes (a repeated kernel, launch geometry), a zero duration, and
    runs of those passes starting with a framework op's call: the same side, the same run order."""
    events: list[dict[str, object]] = []
    for i in range(3):  # launched by no op, before and at the same time as the op calls below
        events.append({"ph": "X", "cat": "kernel", "name": "my_kernel", "pid": 0, "tid": 7, "ts": 100 * i, "dur": 5,
                       "args": {"grid": [16, 1, 1], "block": [256, 1, 1]}})
        events.append({"ph": "X", "cat": "kernel", "name": "void other<float>(float const*, float*)", "pid": 0,
                       "tid": 7, "ts": 100 * i, "dur": 0 if i == 0 else 5,
                       "args": {"grid": [8, 1, 1], "block": [128, 1, 1]}})
    for i in range(3):
        t = 100 * i
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": t, "dur": 20,
                       "args": {"Input Dims": [[4096]], "Input type": ["float"], "External id": i + 1}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": t + 5, "dur": 3, "args": {"correlation": i + 1, "External id": i + 1}})
        events.append({"ph": "X", "cat": "kernel", "name": "my_kernel", "pid": 0, "tid": 7, "ts": t + 10,
                       "dur": 4 + i, "args": {"correlation": i + 1, "grid": [16, 1, 1], "block": [256, 1, 1]}})
    path = _write(tmp_path / "passes.json.gz", events)
    sources = {run.source for run in match_runs(parse_trace(path, path.name)).runs}
    assert sources == {"framework shapes", "repeated kernel", "launch geometry"}
    fast = fast_file_side(path, path.name)
    assert fast is not None and repr(fast) == repr(_reference(path))
    # runs by start, ties in match_runs' order (the op call's run before the later passes' runs of the same start)
    assert [key[1] for key in fast.groups] == ["aten::relu", "my_kernel", "void other<float>(float const*, float*)",
                                               "other<float>"]
