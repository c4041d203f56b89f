"""The flash attention backward's working buffers (docs/model.md, 'Training memory: the attention backward's
working buffers and all-gather context parallelism'): golden bytes from FlashAttention-2's and -3's allocations,
and what they decide for Llama 3 405B (arXiv:2407.21783, Table 4)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from perfmodel.graph.llm_config import bundled
from perfmodel.roofline import resolve_hardware
from perfmodel.training import attention_memory
from perfmodel.training.attention_memory import attention_backward_bytes, buffer_kernel
from perfmodel.training.published import RUNS, search

LLAMA = bundled("llama-3.1-405b")  # 128 query heads, 8 kv heads, head dim 128: tp 8 gives 16 and 1 per device
DQ_8K = 8192 * 16 * (128 + 1) * 4  # fp32 dq_accum and softmax_d of 8,192 local queries


def test_fa2_at_8k_holds_dq_and_the_gqa_expanded_dk_dv() -> None:
    """cp 1, 8,192 tokens: dq_accum + softmax_d (fp32) and dk/dv expanded to 16 query heads (bf16)."""
    expanded = 8192 * 16 * (128 + 128) * 2
    assert attention_backward_bytes(LLAMA, 1, 8192, 8, 1, False, "fa2") == DQ_8K + expanded == 134_742_016


def test_all_gather_cp_holds_the_whole_sequence() -> None:
    """131K, cp 16: the local queries are 8,192 again, but FA2's expanded dK/dV and the gathered K/V with their
    gradients span all 131,072 keys (the paper's O(S)); a ring holds only its s/cp block."""
    expanded = 131072 * 16 * 256 * 2
    whole = 2 * 131072 * 1 * 256 * 2
    assert attention_backward_bytes(LLAMA, 1, 131072, 8, 16, True, "fa2") == DQ_8K + expanded + whole
    assert attention_backward_bytes(LLAMA, 1, 131072, 8, 16, True, "fa2") == pytest.approx(1.2756e9, rel=1e-4)
    assert attention_backward_bytes(LLAMA, 1, 131072, 8, 16, False, "fa2") == 134_742_016


def test_fa3_accumulates_dk_dv_in_fp32_at_the_kv_heads() -> None:
    """FlashAttention-3 (hopper/flash_api.cpp): dk_accum / dv_accum fp32 at the kv heads, not expanded."""
    fp32_kv = 131072 * 1 * 256 * 4
    whole = 2 * 131072 * 1 * 256 * 2
    assert attention_backward_bytes(LLAMA, 1, 131072, 8, 16, True, "fa3") == DQ_8K + fp32_kv + whole


def test_no_grouping_no_expansion() -> None:
    """Multi-head attention (kv heads = heads): only dq_accum and softmax_d."""
    gpt = bundled("llama-3.1-405b").__class__.from_hf(
        {
            "model_type": "gpt2",
            "n_embd": 4096,
            "n_head": 32,
            "n_layer": 2,
            "n_inner": 16384,
            "vocab_size": 51200,
            "n_positions": 2048,
        },
        "gpt",
    )
    assert attention_backward_bytes(gpt, 2, 2048, 4, 1, False, "fa2") == 2 * 2048 * 8 * (128 + 1) * 4


@pytest.fixture
def llama() -> Iterator[dict[str, tuple[str, float]]]:
    out = {}
    for run in RUNS:
        if run.name.startswith("Llama 3"):
            result, i, fits = search(run)
            assert fits
            out[run.name] = (result.layout(i).recompute, float(result.memory.total_bytes[i]))
    yield out


def test_the_131k_row_no_longer_fits_without_recomputation(llama: dict[str, tuple[str, float]]) -> None:
    """The 8K-context rows keep no recomputation (§3.3.2: "8K tokens without activation checkpointing"), 79.86 and
    79.04 GB of 80; at 131K no recomputation needs 80.19 GB, so the search takes full recomputation."""
    assert llama["Llama 3 405B, 8K GPUs"][0] == "none" and llama["Llama 3 405B, 16K GPUs"][0] == "none"
    assert llama["Llama 3 405B, 8K GPUs"][1] == pytest.approx(79.864e9, rel=1e-4)
    assert llama["Llama 3 405B, 16K GPUs"][1] == pytest.approx(79.045e9, rel=1e-4)
    assert llama["Llama 3 405B, 16K GPUs, 131K context"][0] == "full"
    long = next(r for r in RUNS if "131K" in r.name)
    result, _, _ = search(long)
    none = [
        i
        for i in range(len(result.reasons))
        if result.layout(i).recompute == "none" and result.layout(i).micro_batch == 1
    ]
    assert float(result.memory.total_bytes[none[0]]) == pytest.approx(80.186e9, rel=1e-4)


def test_the_switch_reprints_the_figures_from_before() -> None:
    long = next(r for r in RUNS if "131K" in r.name)
    attention_memory.COUNTED["on"] = False
    try:
        result, i, _ = search(long)
        assert result.layout(i).recompute == "none"
        assert float(result.memory.total_bytes[i]) == pytest.approx(78.910e9, rel=1e-4)
    finally:
        attention_memory.COUNTED["on"] = True


def test_whose_buffers_a_run_allocates() -> None:
    """FA3's on Hopper with its own kernel; FA2's with ``fa2`` and on mma.sync devices (A100)."""
    h100, a100 = resolve_hardware("nvidia-h100-sxm5-80gb"), resolve_hardware("nvidia-a100-sxm4-80gb")
    assert buffer_kernel(h100, "native") == "fa3" and buffer_kernel(h100, "fa2") == "fa2"
    assert buffer_kernel(a100, "native") == "fa2" and buffer_kernel(a100, "fa2") == "fa2"
