"""The schedule search: capacities, optimality against samples, monotonicity, known results."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import perfmodel
from perfmodel.cli import app
from perfmodel.machine import tables
from perfmodel.roofline import evaluate, work_of
from perfmodel.search.gemm_cost import ACCUMULATOR_BYTES, gemm_costs, launch_overhead_s
from perfmodel.search.gemm_space import GemmCandidates, full_space

DEVICES = ["nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb", "nvidia-t4", "amd-mi300x", "google-tpu-v5p",
           "generic-npu", "aws-trainium2", "intel-xeon-platinum-8480"]
DIMS = st.sampled_from([1, 8, 16, 100, 128, 384, 1000, 2048, 4096, 16384])
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def gemms(draw: st.DrawFn) -> dict[str, Any]:
    return {"kind": "matmul", "m": draw(DIMS), "n": draw(DIMS), "k": draw(DIMS),
            "dtype": draw(st.sampled_from(["bf16", "fp16", "fp8_e4m3", "fp32", "int8"])),
            "batch": draw(st.sampled_from([1, 4]))}


@SETTINGS
@given(op=gemms(), device=st.sampled_from(DEVICES))
def test_best_schedule_fits_every_capacity(op: dict[str, Any], device: str) -> None:
    hw = perfmodel.load_hardware(device)
    t = tables(hw)
    result = perfmodel.search(hw, op)
    best = result.top_k[0]
    assert best["footprint_bytes"] <= t.scratchpad_bytes_per_unit
    if hw.kind == "gpu":
        assert 2 * best["tile_m"] * best["tile_n"] * ACCUMULATOR_BYTES <= t.register_bytes_per_unit
    assert result.evaluated + result.pruned <= result.space_size


@SETTINGS
@given(op=gemms(), device=st.sampled_from(DEVICES), seed=st.integers(0, 2**16))
def test_best_is_never_worse_than_a_random_sample(op: dict[str, Any], device: str, seed: int) -> None:
    hw = perfmodel.load_hardware(device)
    t = tables(hw)
    result = perfmodel.search(hw, op)
    space = full_space(t)
    sample = space.take(np.random.default_rng(seed).choice(space.size, size=200, replace=False))
    built = perfmodel.make_op(op)
    work = work_of([built], float(hw.dram.access_granularity_bytes or 1))
    one = np.ones(1)
    costs = gemm_costs(t, sample, one * work.gemm_batch[0, 0], one * op["m"], one * op["n"], one * op["k"],
                       one * built.dtype.bytes, one * t.matrix_peak[int(work.matrix_dtype[0])],
                       one * float(work.dram_bytes[0]))
    # listed times include the op's launch overhead, as predict's do
    assert result.top_k[0]["time_s"] <= (costs.judged_s[0].min() + launch_overhead_s(t, work)) * (1 + 1e-12)


FASTER = [{"levels.sram.capacity_bytes": "x2"}, {"levels.dram.bandwidth_bytes_per_s": "x1.5"},
          {"engines.*.peak_flops_per_s": "x1.5"}, {"levels.onchip.bandwidth_bytes_per_s": "x2"}]


@SETTINGS
@given(op=gemms(), device=st.sampled_from(DEVICES), change=st.sampled_from(FASTER))
def test_more_sram_bandwidth_or_peak_never_slows_the_best(op: dict[str, Any], device: str,
                                                          change: dict[str, str]) -> None:
    base = perfmodel.load_hardware(device)
    try:
        faster = perfmodel.derive_variant(base, f"{device}-x", change)
    except perfmodel.SpecError as exc:
        assert "cannot scale" in exc.reason
        return
    assert perfmodel.search(faster, op).best.time_s <= perfmodel.search(base, op).best.time_s * (1 + 1e-9)


@SETTINGS
@given(op=gemms(), device=st.sampled_from(DEVICES))
def test_searched_prediction_is_never_faster_than_the_pure_roofline(op: dict[str, Any], device: str) -> None:
    hw = perfmodel.load_hardware(device)
    t = tables(hw)
    built = perfmodel.make_op(op)
    work = work_of([built], float(hw.dram.access_granularity_bytes or 1))
    roofline = max(float(work.flops_matrix[0]) / t.matrix_peak[int(work.matrix_dtype[0])],
                   float(work.dram_bytes[0]) / t.bandwidth_bytes_per_s(t.dram))
    assert perfmodel.search(hw, op).best.time_s >= roofline


def test_skinny_gemm_chooses_split_k() -> None:
    """128 x 128 output, K = 65,536: one 128x128 tile would leave 131 of 132 SMs idle."""
    result = perfmodel.search("nvidia-h100-sxm5-80gb", {"kind": "matmul", "m": 128, "n": 128, "k": 65536,
                                                         "dtype": "bf16"})
    assert result.best.schedule["split_k"] > 1
    assert "split-K" in result.explanation


def test_wave_quantization_step() -> None:
    """One fixed 128x128 schedule on H100 (132 SMs): 12 x 11 = 132 tiles are one wave,
    7 x 19 = 133 tiles two."""
    hw = perfmodel.load_hardware("nvidia-h100-sxm5-80gb")
    fixed = GemmCandidates(*(np.array([v]) for v in (128.0, 128.0, 64.0, 3.0, 1.0, 8.0)))
    times = []
    for rows, cols in ((12, 11), (7, 19)):
        op = perfmodel.make_op({"kind": "matmul", "m": 128 * rows, "n": 128 * cols, "k": 8192, "dtype": "bf16"})
        times.append(evaluate(work_of([op], 32.0), [op], hw, space=fixed)[0].time_s)
    assert times[1] / times[0] > 1.8  # 1 more tile (0.8 % more work) costs a whole extra wave


def test_search_is_deterministic_and_respects_the_budget() -> None:
    op = {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}
    a = perfmodel.search("nvidia-a100-sxm4-80gb", op, budget=300, seed=7)
    b = perfmodel.search("nvidia-a100-sxm4-80gb", op, budget=300, seed=7)
    assert a.evaluated == 300
    assert a.top_k == b.top_k
    full = perfmodel.search("nvidia-a100-sxm4-80gb", op)
    assert full.best.time_s <= a.best.time_s
    assert perfmodel.search("nvidia-a100-sxm4-80gb", op) is full  # cached per (op, hardware hash)


def test_result_reports_top_k_pareto_and_rejections() -> None:
    op = {"kind": "matmul", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"}
    result = perfmodel.search("nvidia-h100-sxm5-80gb", op, top_k=4)
    assert len(result.top_k) == 4
    times = [r["time_s"] for r in result.top_k]
    assert times == sorted(times)
    footprints = [r["footprint_bytes"] for r in result.pareto]
    pareto_times = [r["time_s"] for r in result.pareto]
    assert footprints == sorted(footprints) and pareto_times == sorted(pareto_times, reverse=True)
    assert result.rejected.get("smem", 0) > 0 and result.rejected.get("registers", 0) > 0
    assert result.best.time_s == pytest.approx(perfmodel.predict("nvidia-h100-sxm5-80gb", op).time_s)
    assert "132 SMs" in result.explanation and "bound by" in result.explanation


def test_ops_without_a_space_get_a_fixed_schedule() -> None:
    result = perfmodel.search("nvidia-h100-sxm5-80gb", {"kind": "allreduce", "bytes": 1e6, "devices": 8})
    assert result.space_size == 1 and result.notes


def test_cli_search() -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["search", "nvidia-h100-sxm5-80gb", "matmul", "m=4096", "n=4096", "k=4096",
                              "dtype=bf16", "--top-k", "3"])
    assert out.exit_code == 0, out.output
    assert "best:" in out.output and "Pareto front" in out.output
    js = runner.invoke(app, ["search", "generic-npu", "matmul", "m=64", "n=4096", "k=4096", "dtype=bf16", "--json"])
    assert js.exit_code == 0
    data = json.loads(js.output)
    assert data["best"]["time_s"] > 0 and data["evaluated"] > 0
    bad = runner.invoke(app, ["search", "nvidia-h100-sxm5-80gb", "matmul", "m=0", "n=1", "k=1", "dtype=bf16"])
    assert bad.exit_code == 2


def _transpose_times(dtype: str) -> dict[tuple[float, float], float]:
    from perfmodel.search.stream_spaces import transpose_space

    hw = perfmodel.load_hardware("nvidia-a100-sxm4-80gb")
    op = perfmodel.make_op({"kind": "transpose", "shape": [8192, 8192], "perm": [1, 0], "dtype": dtype})
    space = transpose_space(tables(hw), op, work_of([op], 32.0))
    times = evaluate(space.work, [op] * space.size, hw).time_s
    return {(float(a), float(b)): float(x) for a, b, x in zip(space.params["tile"], space.params["pad"], times,
                                                             strict=True)}


def test_transpose_without_padding_pays_bank_conflicts() -> None:
    """fp32 32x32 tiles: a warp reading a tile column hits one bank 32 times unless the tile is
    padded by one element; the naive (untiled) kernel wastes 7/8 of every 32-byte sector it writes."""
    times = _transpose_times("fp32")
    assert times[(32.0, 0.0)] > 1.5 * times[(32.0, 1.0)]
    assert times[(1.0, 0.0)] > 3.0 * times[(32.0, 1.0)]
    result = perfmodel.search("nvidia-a100-sxm4-80gb", {"kind": "transpose", "shape": [8192, 8192],
                                                         "perm": [1, 0], "dtype": "fp32"})
    assert result.best.time_s == pytest.approx(times[(32.0, 1.0)])


def test_row_that_does_not_fit_on_chip_takes_two_passes() -> None:
    from perfmodel.search.stream_spaces import row_space

    hw = perfmodel.load_hardware("nvidia-a100-sxm4-80gb")
    small = perfmodel.make_op({"kind": "softmax", "shape": [1024, 4096], "dtype": "fp32"})
    huge = perfmodel.make_op({"kind": "softmax", "shape": [4, 1 << 20], "dtype": "fp32"})
    for op, passes in ((small, 1.0), (huge, 2.0)):
        space = row_space(tables(hw), op, work_of([op], 32.0))
        base = work_of([op], 32.0).bytes_by_role["activations_in"][0]
        assert set(space.work.bytes_by_role["activations_in"] / base) == {passes}


@pytest.mark.parametrize("op", [
    {"kind": "rmsnorm", "shape": [16384, 4096], "dtype": "bf16"},
    {"kind": "elementwise", "shape": [4096, 4096], "inputs": 2, "dtype": "bf16"},
    {"kind": "embedding", "num_embeddings": 50000, "embedding_dim": 4096, "num_indices": 8192, "dtype": "bf16"},
])
def test_stream_search_is_never_worse_than_the_default_schedule(op: dict[str, Any]) -> None:
    result = perfmodel.search("nvidia-a100-sxm4-80gb", op)
    assert result.space_size > 1 and result.top_k
    assert result.best.time_s <= perfmodel.predict("nvidia-a100-sxm4-80gb", op).time_s * (1 + 1e-12)


def test_time_budget_returns_the_best_so_far() -> None:
    op = {"kind": "matmul", "m": 2048, "n": 2048, "k": 2048, "dtype": "bf16"}
    quick = perfmodel.search("nvidia-h100-sxm5-80gb", op, time_budget_s=0.0, cache=False)
    full = perfmodel.search("nvidia-h100-sxm5-80gb", op, cache=False)
    assert 0 < quick.evaluated < full.evaluated  # one chunk, then the clock says stop
    assert quick.best.time_s >= full.best.time_s


def test_cpu_tiles_respect_the_private_caches() -> None:
    """On a CPU the operand panels must fit the per-core L2 (2 MiB on the Xeon 8480)."""
    result = perfmodel.search("intel-xeon-platinum-8480", {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096,
                                                            "dtype": "bf16"})
    assert all(r["footprint_bytes"] <= 2 * 1024 * 1024 for r in result.top_k)
    assert result.rejected
