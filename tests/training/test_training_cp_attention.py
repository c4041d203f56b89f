"""Each context-parallel rank's attention kernels (perfmodel/training/cp_attention.py)."""

from __future__ import annotations

from typing import Any

import pytest

from perfmodel.graph.llm_config import bundled
from perfmodel.roofline import predict_many, resolve_hardware
from perfmodel.training.costs import ProbeKey, cost_table
from perfmodel.training.cp_attention import rank_calls

H100 = "nvidia-h100-sxm5-80gb"


def _op(tokens: int, causal: bool = True) -> dict[str, Any]:
    return {"kind": "attention", "batch": 1, "heads": 16, "kv_heads": 1, "seq_q": tokens, "seq_kv": tokens,
            "head_dim": 128, "head_dim_v": 128, "causal": causal, "dtype": "bf16", "pass": "forward_backward"}


def _pairs(op: dict[str, Any]) -> int:
    """Query-key pairs computed, a causal mask aligned bottom-right (the diagonal included)."""
    sq, skv = int(op["seq_q"]), int(op["seq_kv"])
    return sq * skv - (sq * (sq - 1) // 2 if op["causal"] else 0)


@pytest.mark.parametrize("allgather", [True, False])
@pytest.mark.parametrize("cp", [2, 4, 16])
def test_every_rank_gets_an_equal_share_of_the_causal_pairs(cp: int, allgather: bool) -> None:
    local = 8192
    s = local * cp
    ranks = rank_calls(_op(local), cp, allgather)
    assert len(ranks) == cp
    for rank in ranks:
        assert sum(n * _pairs(op) for op, n in rank) == s * (s + 1) // 2 // cp
        assert all(op["seq_q"] <= local and op["seq_kv"] <= s for op, _ in rank)


def test_all_gather_ranks_attend_their_two_chunks_over_causal_prefixes() -> None:
    """Llama 3 §3.3.2: rank i holds chunks i and 2cp−1−i of 2·cp; each attends over the keys before it."""
    ranks = rank_calls(_op(8192), 16, True)
    c = 4096
    assert [(op["seq_q"], op["seq_kv"], op["causal"]) for op, _ in ranks[0]] == [(c, c, True), (c, 32 * c, True)]
    assert [(op["seq_q"], op["seq_kv"]) for op, _ in ranks[15]] == [(c, 16 * c), (c, 17 * c)]


def test_ring_steps_are_one_causal_diagonal_and_full_half_blocks() -> None:
    ranks = rank_calls(_op(8192), 4, False)
    assert [((op["seq_q"], op["seq_kv"], op["causal"]), n) for op, n in ranks[1]] == [
        ((8192, 8192, True), 1), ((8192, 4096, False), 1), ((4096, 8192, False), 2)]


def test_no_context_parallelism_or_non_attention_ops_keep_the_probe_op() -> None:
    op = _op(8192)
    assert rank_calls(op, 1, True) == [[(op, 1)]]
    gemm = {"kind": "matmul", "m": 8192, "n": 8192, "k": 128}
    assert rank_calls(gemm, 16, True) == [[(gemm, 1)]]
    assert [(o["seq_q"], o["seq_kv"]) for o, _ in rank_calls(_op(8192, causal=False), 4, True)[0]] == [(8192, 32768)]


def test_the_cost_table_charges_the_slowest_ranks_calls() -> None:
    cfg, hw = bundled("llama-3.1-405b"), resolve_hardware(H100)
    key = ProbeKey(tp=8, cp=4, micro_batch=1)
    seq = 4 * 8192
    probe = cost_table(cfg, hw, [key], seq, cp_allgather=True).probes[key]
    assert not isinstance(probe, str)
    ranks = rank_calls(_op(8192), 4, True)
    times = predict_many(hw, [op for rank in ranks for op, _ in rank]).time_s
    per_rank = [float(times[2 * i] + times[2 * i + 1]) for i in range(4)]
    assert probe.attention_s == pytest.approx(max(per_rank), rel=1e-9)
