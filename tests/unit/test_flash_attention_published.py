"""FlashAttention-2 / -3 on H100 against the FA3 paper's figures (benchmarks/flash_attention.py): nothing is fitted
on these rows; the test guards the kernel-style physics (softmax overlapped under wgmma, serial under mma.sync)."""

from __future__ import annotations

from types import ModuleType

import pytest
from benchmark_module import load_benchmark

from perfmodel.dtypes import DType
from perfmodel.machine import tables
from perfmodel.ops.work import DTYPE_INDEX
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
    assert summary[("fa2", "forward", "1")][0] < 0.10  # 24.1 % before the SMEM operand traffic
    assert summary[("fa3", "forward", "1")][0] < 0.25


def test_backward_median_error_on_h100(results: list[dict[str, object]]) -> None:
    """Before the backward's preprocess/postprocess kernels and CTA fill: FA3 44.7 %, FA2 98.6 %; after 21.2 /
    72.1 %; with the MMAs' SMEM operand traffic and the LSE/D rows in the register bound 13.7 / 27.4 % (FA2's
    backward on Hopper stays the largest gap: docs/accuracy.md, eighth pass)."""
    summary = _bench().summary(results)
    assert summary[("fa3", "backward", "0")][0] < 0.18
    assert summary[("fa2", "backward", "0")][0] < 0.35


def test_mma_sync_backward_is_smem_bound_on_hopper_not_on_ampere() -> None:
    """FA2's backward, head dim 128, 64 x 128 tiles: 622,592 SMEM bytes per pair (docs/model.md) against five MMAs of
    10.5 MFLOP. SMEM moves 128 B/clk/SM on both; the bf16 tensor rate per SM is 2048 FLOP/clk on A100 and 4096 on
    H100, so the pair is balanced on A100 (16.9 FLOP/B against 16) and SMEM-bound on H100 under mma.sync (32)."""
    flops = 2.0 * 64 * 128 * 640
    ratios = {}
    for gpu in ("nvidia-a100-sxm4-80gb", "nvidia-h100-sxm5-80gb"):
        t = tables(_bench()._device(gpu, "fa2"))
        mma_s = flops / (t.matrix_paths[DTYPE_INDEX[DType.BF16]].peak_flops_per_s / t.units)
        ratios[gpu] = 622_592 / (t.scratchpad_bandwidth_per_unit or 0.0) / mma_s
    assert 0.85 < ratios["nvidia-a100-sxm4-80gb"] < 1.0
    assert 1.7 < ratios["nvidia-h100-sxm5-80gb"] < 2.0
