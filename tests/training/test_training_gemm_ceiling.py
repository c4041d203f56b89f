"""The published runs' layer GEMMs beside each device's measured best GEMM (benchmarks/training_gemm_ceiling.py;
issue 29, train16): the GEMMs are the layer's projections on one tensor-parallel rank (Megatron's 72·b·s·h² per
GPT layer), a device variant at a clock share slows tensor-bound GEMMs by that share, and the model puts the H100
rows' GEMMs nearer the H100's measured best than any A100 row's nearer the A100's."""

from __future__ import annotations

import pytest
from benchmark_module import load_benchmark

from perfmodel.roofline import resolve_hardware
from perfmodel.training.gemm_ceiling import gemm_flops, layer_gemm_ops, layer_gemm_tflops, with_sustained_share
from perfmodel.training.published import H100, RUNS, predict


def _run(name: str):  # type: ignore[no-untyped-def]
    return next(r for r in RUNS if r.name == name)


def test_llama_layer_gemms_are_one_tp_ranks_projections() -> None:
    """Llama 3 405B at tp 8, one 8,192-token sequence: QKV (128 + 2·8 heads of 128 over 8 ranks), O, gate+up and
    down, each forward and backward: 6 · tokens · the rank's 16,384 x 24,320 weights."""
    ops = layer_gemm_ops(_run("Llama 3 405B, 8K GPUs"), 8, 1, 1)
    assert sorted((op["m"], op["n"], op["k"]) for op in ops) == sorted(
        [(8192, 2304, 16384), (8192, 16384, 2048), (8192, 13312, 16384), (8192, 16384, 6656)])
    assert all(op["pass"] == "forward_backward" for op in ops)
    assert sum(gemm_flops(op) for op in ops) == 6.0 * 8192 * 16384 * (2304 + 2048 + 13312 + 6656)


def test_gpt_layer_gemms_are_megatrons_72_bsh2_over_tp() -> None:
    """Narayanan et al. 2021, §5.1: a GPT layer's GEMMs take 24·b·s·h² FLOPs forward, 3x that with the backward;
    on one of tp ranks, 1/tp of it."""
    run = _run("Megatron GPT 145.6B")
    h = run.config().hidden
    got = sum(gemm_flops(op) for op in layer_gemm_ops(run, 8, 1, 1))
    assert got == pytest.approx(72.0 * 2048 * h * h / 8, rel=1e-12)


def test_a_sustained_share_slows_tensor_bound_gemms_by_that_share() -> None:
    run = _run("Llama 3 405B, 8K GPUs")
    hw = resolve_hardware(H100)
    full = layer_gemm_tflops(run, 8, 1, 1)
    slow = layer_gemm_tflops(run, 8, 1, 1, with_sustained_share(hw, 0.9))
    assert slow / full == pytest.approx(0.9, abs=0.01)
    assert layer_gemm_tflops(run, 8, 1, 1) == full  # the bundled spec is untouched
    assert with_sustained_share(hw, 1.0).engine("tensor").sustained_fraction(
        next(iter(hw.engine("tensor").peak_flops_per_s)), hw.clock_hz) == 1.0
    for bad in (0.0, 1.2):
        with pytest.raises(ValueError, match="share"):
            with_sustained_share(hw, bad)


def test_predict_on_a_device_variant_leaves_the_bundled_prediction() -> None:
    run = _run("Llama 3 405B, 16K GPUs")
    before = predict(run)
    slower = predict(run, with_sustained_share(resolve_hardware(H100), 0.9))
    assert slower["step_s"] > before["step_s"]
    assert predict(run)["step_s"] == before["step_s"]
    assert predict(run, None)["step_s"] == before["step_s"]


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    return load_benchmark("training_gemm_ceiling", "training_gemm_ceiling_bench")


def test_h100_gemms_sit_nearer_their_measured_best_than_any_a100_rows(bench) -> None:  # type: ignore[no-untyped-def]
    """The finding: 16 A100 rows at 0.876-0.909 of the A100's measured best (271.2), the Llama rows at 0.948 of
    the H100's (794.5), while both sit at 0.76-0.79 of their spec peaks."""
    rows = bench.ceiling_rows()
    a100 = [r.share for r in rows if r.run.hardware == bench.A100]
    h100 = [r.share for r in rows if r.run.hardware == bench.H100]
    assert len(a100) == 16 and len(h100) == 3
    assert max(a100) < min(h100)
    medians = bench.median_shares(rows)
    assert medians[bench.A100] == pytest.approx(0.905, abs=0.005)
    assert medians[bench.H100] == pytest.approx(0.948, abs=0.005)
    assert all(0.75 < r.tflops / r.peak_tflops < 0.80 for r in rows)


def test_the_transfer_experiment_brings_the_8k_row_within_15_percent(bench) -> None:  # type: ignore[no-untyped-def]
    """Not shipped (it takes the H100's own measured best): at the A100 rows' median share, 0.955 of 1,830 MHz,
    the 8K-GPU row is +10.0 % and the 131K row, fully recomputed, −0.5 % (attention as FlashAttention-2, fourteenth
    pass; the attention backward's buffers, fifteenth pass;
    +12.2 / +47 % with the device's FA3-class kernel)."""
    medians = bench.median_shares(bench.ceiling_rows())
    share = medians[bench.A100] / medians[bench.H100]
    assert share == pytest.approx(0.955, abs=0.005)
    variant = with_sustained_share(resolve_hardware(H100), share)
    errors = {r.name: predict(r, variant)["error"] for r in RUNS if r.hardware == H100}
    assert errors["Llama 3 405B, 8K GPUs"] == pytest.approx(0.100, abs=0.003)
    assert errors["Llama 3 405B, 16K GPUs"] == pytest.approx(0.080, abs=0.003)
    assert errors["Llama 3 405B, 16K GPUs, 131K context"] == pytest.approx(-0.005, abs=0.003)
