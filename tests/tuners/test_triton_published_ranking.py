"""The Triton hook against published per-config timings: PyTorch Inductor's max-autotune tables for two fp16
GEMMs on an NVIDIA L40S (benchmarks/data/inductor_autotune_l40s.csv; source in benchmarks/triton_ranking.py)."""

from __future__ import annotations

from types import ModuleType

import pytest
from benchmark_module import load_benchmark


def _benchmark() -> ModuleType:
    return load_benchmark("triton_ranking", "triton_ranking_benchmark")

@pytest.fixture(scope="module")
def results() -> dict[tuple[int, int, int], object]:
    return {a.shape: a for a in _benchmark().agreement()}


def test_the_configs_inductor_dropped_for_shared_memory_are_pruned(results: dict[tuple[int, int, int], object]
                                                                   ) -> None:
    """Inductor's log drops three 2048^3 configs ('Required: 131072 / 147456, Hardware limit: 101376'); the hook
    prunes exactly those and costs every config that ran."""
    assert set(results) == {(2048, 2048, 2048), (16, 4096, 4096)}
    for a in results.values():
        assert a.pruned_as_published, a.shape  # type: ignore[attr-defined]
    assert sum(t is None for t in results[(2048, 2048, 2048)].measured_ms) == 3  # type: ignore[attr-defined]


def test_square_gemm_ranking_agrees_with_the_measured_order(results: dict[tuple[int, int, int], object]) -> None:
    """2048^3: nine measured configs, 0.087-0.124 ms. Spearman 0.75, Kendall 0.66 (2026-11-27); the model's first
    pick is the measured best (within 20 % asserted)."""
    a = results[(2048, 2048, 2048)]
    assert a.spearman >= 0.5 and a.kendall >= 0.35  # type: ignore[attr-defined]
    assert a.top_pick_ratio <= 1.2  # type: ignore[attr-defined]


def test_skinny_gemm_configs_are_priced_near_their_measured_times(results: dict[tuple[int, int, int], object]
                                                                   ) -> None:
    """16x4096x4096: a 32-128-CTA grid on the 142-SM L40S streams the 32 MiB of weights at the DRAM roof when its
    CTAs keep enough K-slabs in flight (Little's law), whatever its CTA count: every config within 0.6-1.0x of its
    measured time (0.65-0.87x, 2026-11-27; the CTA-count bandwidth share gave 1.4-6.1x, 0.10-0.40 ms)."""
    a = results[(16, 4096, 4096)]
    ratios = [p / t for t, p in zip(a.measured_ms, a.predicted_ms, strict=True)]  # type: ignore[attr-defined]
    assert all(0.6 <= r <= 1.0 for r in ratios), ratios


@pytest.mark.xfail(strict=True, reason="known miss: the model prices six of the nine 16-row configs at the L40S's "
                   "DRAM roof (47.6 us) and the three with the fewest bytes in flight (0.9-1.2 MB) under it "
                   "(49.5-58.8 us), while the measured 65.5-72.7 us order follows the CTA count (BN 128 < 64 < 32: "
                   "32 < 64 < 128 CTAs), not the bytes in flight; Spearman -0.11, Kendall -0.08 (was -0.81 / -0.73). "
                   "An L2-hit time added to the DRAM stream reaches +0.61 but worsens LODO matmul 11.2 -> 12.5 % "
                   "(docs/tuners.md). Twelfth pass: the nine times are whole ticks of a 1.024 us timer (64-71 "
                   "ticks), so neighbours differ by 0-2 ticks; the CTA-count trend (BN 128: 64-66, 64: 66-70, "
                   "32: 68-71) is still 7 ticks wide, and no carried term explains it")
def test_skinny_gemm_ranking_agrees_with_the_measured_order(results: dict[tuple[int, int, int], object]) -> None:
    assert results[(16, 4096, 4096)].spearman >= 0.5  # type: ignore[attr-defined]


@pytest.mark.parametrize("hardware", ["nvidia-a100-sxm4-80gb", "nvidia-h100-sxm5-80gb"])
def test_second_skinny_family_ranking_agrees_with_the_measured_order(hardware: str) -> None:
    """8x2048 @ 2048x3072 (vLLM's design doc, device not named, an A100/H100-class part by the shared memory its
    configs used): 9 configs, 13.0-21.5 us, fastest with BK = 128 and 4-5 stages. Spearman +0.97 / +0.98, Kendall
    +0.94 / +0.96 on A100 / H100 (2026-11-29); the first pick is the measured best."""
    bench = _benchmark()
    (a,) = bench.agreement(hardware, bench.VLLM_DATA)
    assert a.spearman >= 0.8 and a.kendall >= 0.7, (a.spearman, a.kendall)
    assert a.top_pick_ratio == 1.0
    assert a.pruned_as_published
