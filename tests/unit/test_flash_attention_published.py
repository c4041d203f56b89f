"""FlashAttention-2 / -3 on H100 against the FA3 paper's figures (benchmarks/flash_attention.py): nothing is fitted
on these rows; the test guards the kernel-style physics (softmax overlapped under wgmma, serial under mma.sync)."""

from __future__ import annotations

from types import ModuleType

import pytest
from benchmark_module import load_benchmark

from perfmodel.machine import tables
from perfmodel.search.attention_cost import overlaps_softmax
from perfmodel.specs import load_hardware


def _bench() -> ModuleType:
    return load_benchmark("flash_attention", "flash_attention_bench")

@pytest.fixture(scope="module")
def results() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = _bench().rows()
    return rows


def test_kernel_style_follows_the_matrix_instruction() -> None:
    """wgmma (H100) and tcgen05 (B200) run FA3-style kernels; mma.sync devices (A100) FA2-style."""
    assert overlaps_softmax(tables(load_hardware("nvidia-h100-sxm5-80gb")))
    assert overlaps_softmax(tables(load_hardware("nvidia-b200")))
    assert not overlaps_softmax(tables(load_hardware("nvidia-a100-sxm4-80gb")))


def test_fa2_is_predicted_slower_than_fa3_on_every_published_forward_shape(results: list[dict[str, object]]) -> None:
    """Head dim <= 128 (at 256 both are held to 64-row Q tiles by the register file in the model), seq >= 1K
    (at 512 a causal pass is bound by its longest Q tile, not by the step)."""
    def tflops(kernel: str) -> dict[tuple[object, ...], float]:
        return {(r["causal"], r["head_dim"], r["seq_len"]): float(r["predicted_tflops"])  # type: ignore[arg-type]
                for r in results if r["kernel"] == kernel and r["pass"] == "forward"
                and r["head_dim"] != "256" and r["seq_len"] != "512"}

    fa2, fa3 = tflops("fa2"), tflops("fa3")
    shared = fa2.keys() & fa3.keys()
    assert len(shared) >= 19
    assert all(fa2[k] < 0.85 * fa3[k] for k in shared)


def test_forward_median_error_on_h100(results: list[dict[str, object]]) -> None:
    """Before the FA2/FA3 split: FA3 fwd non-causal 54 %, FA2 fwd 134-137 % too fast (docs/accuracy.md). After
    the split 32 / 21 / 54 %; with the softmax at the fp32 instruction rate, the Q-tile fill and (FA2) the in-order
    causal tail: 9.6 / 3.0 / 24.1 %, FA3 causal 21.7 %."""
    summary = _bench().summary(results)
    assert summary[("fa3", "forward", "0")][0] < 0.15
    assert summary[("fa2", "forward", "0")][0] < 0.10
    assert summary[("fa2", "forward", "1")][0] < 0.30
    assert summary[("fa3", "forward", "1")][0] < 0.25


def test_backward_median_error_on_h100(results: list[dict[str, object]]) -> None:
    """Before the backward's preprocess/postprocess kernels and CTA fill: FA3 44.7 %, FA2 98.6 %; after 21.2 /
    72.1 % (FA2's backward on Hopper stays the largest gap: docs/model.md §6)."""
    summary = _bench().summary(results)
    assert summary[("fa3", "backward", "0")][0] < 0.30
    assert summary[("fa2", "backward", "0")][0] < 0.80
