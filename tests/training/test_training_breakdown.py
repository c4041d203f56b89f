"""The published runs' step breakdown (benchmarks/training_throughput.py --breakdown): its parts add up to the
step ``predict`` reports, its bubble is the interleaved 1F1B's (pp−1)/(v·m), and the published step is the
source's FLOPs over its figure (Llama 3, arXiv:2407.21783, Table 4)."""

from __future__ import annotations

import pytest

from perfmodel.training.breakdown import PARTS, markdown, step_breakdown
from perfmodel.training.published import RUNS, predict


def _run(name: str):  # type: ignore[no-untyped-def]
    return next(r for r in RUNS if r.name == name)


@pytest.fixture(scope="module")
def llama() -> dict[str, object]:
    return {r.name: step_breakdown(r) for r in RUNS if r.name.startswith("Llama 3")}


def test_parts_add_up_to_the_predicted_step(llama) -> None:  # type: ignore[no-untyped-def]
    for name, b in llama.items():
        p = predict(_run(name))
        assert b.step_s == pytest.approx(p["step_s"], rel=1e-12)
        assert sum(b.parts.values()) == pytest.approx(b.step_s, rel=1e-9)
        assert set(b.parts) == {k for k, _ in PARTS}
        assert abs(b.parts["ends_s"]) < 1e-3 * b.step_s  # the ends take one slot each: nothing beyond it
        assert b.layout == p["layout"]


def test_published_steps_are_table_4s(llama) -> None:  # type: ignore[no-untyped-def]
    """16M tokens per step, PaLM's count (6N + 12·L·H·Q·T, N with the LM head) at 430 / 400 / 380 TFLOP/s per
    GPU."""
    got = [llama[n].published_step_s for n in ("Llama 3 405B, 8K GPUs", "Llama 3 405B, 16K GPUs",
                                               "Llama 3 405B, 16K GPUs, 131K context")]
    assert got == pytest.approx([12.50, 6.72, 15.28], abs=0.01)


def test_bubble_is_the_interleaved_1f1b_share(llama) -> None:  # type: ignore[no-untyped-def]
    """Llama 3 §3.3.2: 'Overall pipeline bubble ratio is (PP−1)/(V∗M)'; M = Table 4's batch per DP (32, 16, 16)."""
    for name, m in (("Llama 3 405B, 8K GPUs", 32), ("Llama 3 405B, 16K GPUs", 16),
                    ("Llama 3 405B, 16K GPUs, 131K context", 16)):
        b = llama[name]
        assert b.microbatches == m and b.layout["virtual_stages"] == 8
        assert b.bubble_fraction == pytest.approx(15 / (8 * m))
        stage_work = b.step_s - b.parts["bubble_s"] - b.parts["dp_exposed_s"] - b.parts["optimizer_s"]
        assert b.parts["bubble_s"] == pytest.approx(b.bubble_fraction * stage_work, rel=1e-9)


def test_context_parallel_parts_only_at_131k(llama) -> None:  # type: ignore[no-untyped-def]
    """cp = 1: no K/V all-gather; at cp = 16 it is exposed (§3.3.2) and the attention's per-rank work grows 16 x
    per token (same 8,192 tokens per rank and micro-batch, 16 x the keys), the GEMMs unchanged."""
    short, long = llama["Llama 3 405B, 16K GPUs"], llama["Llama 3 405B, 16K GPUs, 131K context"]
    assert short.parts["cp_exposed_s"] == 0.0 < long.parts["cp_exposed_s"]
    assert long.parts["gemm_s"] == pytest.approx(short.parts["gemm_s"], rel=1e-9)
    assert 8.0 < long.parts["attention_s"] / short.parts["attention_s"] < 16.0
    text = markdown(list(llama.values()))
    assert "| **published step** (its FLOPs / its TFLOP/s) | **12.50** | **6.72** | **15.28** |" in text
