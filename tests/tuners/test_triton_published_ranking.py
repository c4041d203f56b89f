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
    """2048^3: nine measured configs, 0.087-0.124 ms. Spearman 0.60, Kendall 0.46 (2026-11-25); the model's first
    pick measures within 20 % of the best."""
    a = results[(2048, 2048, 2048)]
    assert a.spearman >= 0.5 and a.kendall >= 0.35  # type: ignore[attr-defined]
    assert a.top_pick_ratio <= 1.2  # type: ignore[attr-defined]


@pytest.mark.xfail(strict=True, reason="known miss: for a 16-row GEMM the schedule model ties a few-CTA grid's "
                   "bandwidth to its CTA count (16x128 tiles: 32 CTAs, 0.45 ms predicted), while the L40S "
                   "measures all nine configs within 0.066-0.073 ms; Spearman -0.81")
def test_skinny_gemm_ranking_agrees_with_the_measured_order(results: dict[tuple[int, int, int], object]) -> None:
    assert results[(16, 4096, 4096)].spearman >= 0.5  # type: ignore[attr-defined]
