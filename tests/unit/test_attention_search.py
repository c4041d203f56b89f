"""Flash-attention schedules: causal tile skipping, GQA sharing, split-KV for decode."""

from __future__ import annotations

import math

import numpy as np
import pytest

import perfmodel
from perfmodel.machine import tables
from perfmodel.search.attention_cost import (
    SOFTMAX_EXPOSED,
    _causal_pairs,
    backward_side_kernels_seconds,
    gqa_dkv_seconds,
    measured_pingpong,
    pingpong_step,
    smem_pair_bytes,
    softmax_seconds,
)
from perfmodel.specs import load_hardware

H100 = "nvidia-h100-sxm5-80gb"


def brute_force_pairs(sq: int, skv: int, bq: int, bkv: int) -> int:
    """KV tiles a bottom-right causal mask leaves for each Q tile, counted one by one."""
    total = 0
    for start in range(0, sq, bq):
        last_query = min(sq, start + bq) - 1
        visible = skv - sq + last_query + 1
        total += math.ceil(min(max(visible, 0), skv) / bkv)
    return total


@pytest.mark.parametrize(("sq", "skv", "bq", "bkv"), [(4096, 4096, 128, 64), (2048, 8192, 64, 128),
                                                       (8192, 8192, 256, 256), (1024, 1024, 128, 32)])
def test_causal_pair_count_matches_brute_force(sq: int, skv: int, bq: int, bkv: int) -> None:
    """The closed form (average rounding on the partial tiles) is within 2 % of the count."""
    approx = float(_causal_pairs(np.array([float(sq)]), np.array([float(skv)]), np.array([float(bq)]),
                                 np.array([float(bkv)]))[0])
    assert approx == pytest.approx(brute_force_pairs(sq, skv, bq, bkv), rel=0.02)


def test_causal_masking_skips_about_half_the_tiles() -> None:
    base = {"kind": "attention", "batch": 8, "heads": 32, "seq_q": 8192, "seq_kv": 8192, "head_dim": 128,
            "dtype": "bf16"}
    full = perfmodel.predict(H100, base).time_s
    causal = perfmodel.predict(H100, {**base, "causal": True}).time_s
    assert 0.45 < causal / full < 0.6


def test_gqa_shares_kv_reads_in_decode() -> None:
    """Decode reads the KV cache once: 8 KV heads move a quarter of the bytes of 32."""
    base = {"kind": "attention", "batch": 16, "heads": 32, "seq_q": 1, "seq_kv": 8192, "head_dim": 128,
            "dtype": "bf16"}
    mha = perfmodel.predict(H100, base)
    gqa = perfmodel.predict(H100, {**base, "kv_heads": 8})
    assert mha.bound.startswith("HBM") and gqa.bound.startswith("HBM")
    assert gqa.bytes_by_level["HBM3"] < 0.3 * mha.bytes_by_level["HBM3"]
    assert 3.0 < mha.time_s / gqa.time_s < 4.2


def test_long_decode_splits_the_kv_range() -> None:
    """One sequence of 32k keys on 8 KV heads: only 8 CTAs without split-KV; the search splits."""
    cost = perfmodel.predict(H100, {"kind": "attention", "batch": 1, "heads": 64, "kv_heads": 8, "seq_q": 1,
                                    "seq_kv": 32768, "head_dim": 128, "dtype": "bf16"})
    assert cost.schedule["split_k"] >= 8
    assert cost.bound.startswith("HBM")


def test_search_reports_the_attention_space() -> None:
    result = perfmodel.search(H100, {"kind": "attention", "batch": 8, "heads": 32, "kv_heads": 8, "seq_q": 4096,
                                     "seq_kv": 4096, "head_dim": 128, "causal": True, "dtype": "bf16"})
    assert result.space_size > 100 and result.top_k and result.pareto
    assert "Q x KV tiles" in result.explanation
    assert result.rejected.get("smem_or_registers", 0) > 0  # 256 x 256 tiles cannot hold S and O
    assert result.best.time_s >= result.top_k[0]["time_s"]


def _attention(pass_: str, causal: bool = False) -> dict[str, object]:
    return {"kind": "attention", "batch": 2, "heads": 16, "seq_q": 8192, "seq_kv": 8192, "head_dim": 128,
            "dtype": "bf16", "causal": causal, "pass": pass_}


@pytest.mark.parametrize("hardware", [H100, "nvidia-a100-sxm4-80gb"])
def test_backward_runs_the_flash_tile_model(hardware: str) -> None:
    """The backward is costed per (Q tile, KV tile) pair, not as plain GEMMs: its schedule reports KV-tile pairs,
    it takes at least 2.5x the forward's MMA share (five MMAs to two) and fwd+bwd is the sum of the two kernels."""
    fwd = perfmodel.predict(hardware, _attention("forward"))
    bwd = perfmodel.predict(hardware, _attention("backward"))
    both = perfmodel.predict(hardware, _attention("forward_backward"))
    assert bwd.schedule is not None and bwd.schedule.get("kv_tile_pairs", 0) > 0
    assert bwd.time_s > 2.0 * fwd.time_s
    assert both.time_s == pytest.approx(fwd.time_s + bwd.time_s, rel=0.05)


def test_a100_runs_softmax_in_turn_and_h100_overlaps_it() -> None:
    """mma.sync (A100): MMA + exp + fp32 softmax add up; wgmma (H100): the ping-pong hides part of the softmax, so at
    head dim 128 H100's attention reaches a larger share of its tensor peak than A100's, near FA3's published
    646 TFLOP/s at 8K tokens (0.653 of the peak; FA3 paper Fig. 5)."""
    share = {}
    for hw, peak in ((H100, 989.4e12), ("nvidia-a100-sxm4-80gb", 312e12)):
        cost = perfmodel.predict(hw, _attention("forward"))
        share[hw] = 4.0 * 2 * 16 * 8192 ** 2 * 128 / cost.time_s / peak
    assert share[H100] > share["nvidia-a100-sxm4-80gb"] + 0.05
    assert share[H100] == pytest.approx(646.0 / 989.4, rel=0.08)


def test_pingpong_exposed_softmax_share_golden() -> None:
    """The exposed share from the FA3 paper's two figures at head dim 128, ~8K tokens (570 TFLOP/s without the
    ping-pong, 661 with it and intra-warpgroup pipelining), by hand: (1/661 − 1/989.4) / (1/570 − 1/989.4)
    = 5.0218e-4 / 7.4373e-4 = 0.6752. A check, not a fit: the model's own softmax count at the datasheet rates
    gives the no-overlap point back. One 128 x 128 pair at d = 128 on H100: MMAs 2·128·128·256 / (989.4e12 / 132)
    = 1,119.1 ns; softmax 559.6 ns of exps + 290.9 ns of fp32 instructions = 850.5 ns; in turn 1,969.6 ns, i.e.
    562 TFLOP/s (570 published), and with 0.675 of the softmax exposed 1,693.2 ns, 654 TFLOP/s (661 published)."""
    assert abs(SOFTMAX_EXPOSED - 0.6752) < 1e-4
    t = tables(load_hardware(H100))
    one = np.array([128.0])
    mma = 2.0 * 128 * 128 * 256 / (989.4e12 / 132)
    soft = float(softmax_seconds(t, one, one, one, np.array([66.9e12]), efficiency=1.0)[0])
    assert soft == pytest.approx(850.5e-9, rel=1e-3)
    in_turn = 989.4 * mma / (mma + soft)
    overlapped = 989.4 * mma / float(pingpong_step(np.array([mma]), np.array([soft]))[0])
    assert in_turn == pytest.approx(570.0, rel=0.02)
    assert overlapped == pytest.approx(661.0, rel=0.02)


def test_the_measured_pingpong_is_hoppers() -> None:
    """The exposed share comes from Hopper's FA3 (wgmma); Blackwell (tcgen05, ``cta``) keeps the full overlap, and its
    forward stays the larger of MMA and softmax: 2 x 16 heads x 8K, d = 128 at the same time as before the rule."""
    assert measured_pingpong(tables(load_hardware(H100)))
    assert measured_pingpong(tables(load_hardware("nvidia-h200-sxm-141gb")))
    b200 = tables(load_hardware("nvidia-b200"))
    assert not measured_pingpong(b200)
    cost = perfmodel.predict("nvidia-b200", _attention("forward"))
    assert 4.0 * 2 * 16 * 8192 ** 2 * 128 / cost.time_s / 1e12 == pytest.approx(1181.0, rel=0.01)


def test_softmax_time_per_tile_pair_golden() -> None:
    """H100 SXM5, one 128 x 128 tile pair, dv = 128 (docs/model.md, 'Flash attention: FA2 vs FA3'), by hand:
    exps 16,384 / (3.865e12 · 0.85 / 132 = 2.48883e10 /s per SM) = 658.30 ns; fp32 instructions
    3.5 · 16,384 + 128 · 128 = 73,728 at 66.9e12 / 2 · 0.85 / 132 = 2.15398e11 /s per SM = 342.29 ns (forward);
    backward 4 · 16,384 = 65,536 → 304.25 ns."""
    t = tables(load_hardware(H100))
    one = np.array([128.0])
    fp32 = np.array([66.9e12])
    assert float(softmax_seconds(t, one, one, one, fp32)[0]) == pytest.approx(658.30e-9 + 342.29e-9, rel=1e-4)
    assert float(softmax_seconds(t, one, one, one, fp32, backward=True)[0]) == pytest.approx(658.30e-9 + 304.25e-9,
                                                                                              rel=1e-4)


def test_backward_side_kernels_golden() -> None:
    """b·h = 16, 16,384 queries, d = dv = 128, bf16 on H100 (3.35 TB/s x 0.87): the preprocess moves per row
    2·128·2 (O, dO) + 3·4 (LSE in, D and LSE·log2 e out) + 128·4 (dQ accumulator zeroed) = 1,036 B, the
    postprocess 128·(4 + 2) = 768 B: 262,144 rows x 1,804 B = 472,907,776 B / 2.9145e12 B/s = 162.26 µs, plus two
    DRAM latencies of 0.6 µs = 163.46 µs."""
    t = tables(load_hardware(H100))
    seconds = backward_side_kernels_seconds(t, np.array([16.0]), np.array([16384.0]), np.array([128.0]),
                                            np.array([128.0]), np.array([2.0]))
    assert float(seconds[0]) == pytest.approx(163.46e-6, rel=1e-4)


def test_short_sequences_pay_the_q_tile_fill() -> None:
    """At 512 tokens a CTA walks 4 KV tiles of 128, so streaming its Q tile from DRAM before the first MMA (at
    its 1/132 share of HBM) is a visible share of its time; at 16K (128 tiles) it is not. 512 / 16K: 0.67 (0.86
    with the DRAM latency alone; published FA3 at head dim 64: 333 / 497 = 0.67, FA2 at 128: 309 / 370 = 0.84)."""
    def tflops(seq: int) -> float:
        op = {"kind": "attention", "batch": 16384 // seq, "heads": 16, "seq_q": seq, "seq_kv": seq,
              "head_dim": 128, "dtype": "bf16"}
        return 4.0 * op["batch"] * 16 * seq ** 2 * 128 / perfmodel.predict(H100, op).time_s / 1e12  # type: ignore[operator]
    assert tflops(512) < 0.75 * tflops(16384)


def test_fa2_causal_pays_the_in_order_tail() -> None:
    """FA2 (mma.sync: A100) launches a plain grid, a head's Q tiles lightest first, so the last CTA to start is a
    longest one: mean + (1 − 1/SMs) x longest. 16 heads x 16K at head dim 128: 64 x 128 tiles, 4,096 CTAs over
    108 SMs, 16 x 16,512 / 108 ≈ 2,446 tile pairs per SM and 128 for the longest CTA: causal / full 0.535 (0.506
    with the larger of the mean and the longest, on 128 x 128 tiles). FA3's rule stays the larger of the two:
    H100 0.496."""
    op = {"kind": "attention", "batch": 1, "heads": 16, "seq_q": 16384, "seq_kv": 16384, "head_dim": 128,
          "dtype": "bf16"}

    def ratio(hardware: str) -> float:
        return perfmodel.predict(hardware, {**op, "causal": True}).time_s / perfmodel.predict(hardware, op).time_s

    assert 0.52 < ratio("nvidia-a100-sxm4-80gb") < 0.56
    assert ratio(H100) < 0.51


@pytest.mark.parametrize(("hardware", "bq", "bkv", "backward", "expected"), [
    # FA2 forward, 4 warps split Q (paper §3.3): Q once, K and V by each warp, P in registers: 2·(128·128 + 4·64·256)
    ("nvidia-a100-sxm4-80gb", 128, 64, False, 163_840),
    # FA2 backward, 2 x 4 warp grids: S, dP (4·64 + 2·128)·128 each, dV, dK (2·128 + 4·128)·64 each, dQ
    # (4·64 + 2·128)·128, P and dS written 2·64·128; 311,296 elements of 2 B
    ("nvidia-a100-sxm4-80gb", 64, 128, True, 622_592),
    # wgmma: 2 warpgroups each read all of B: forward 2·(128·128 + 2·128·256)
    (H100, 128, 128, False, 163_840),
    # wgmma backward: S, dP (64 + 2·128)·128, dV, dK (128 + 2·128)·64, dQ (64 + 2·128)·128, P and dS 2·64·128:
    # 188,416 elements of 2 B, plus the fp32 dQ tile staged for the TMA reduce-add (2·64·128·4)
    (H100, 64, 128, True, 442_368),
])
def test_smem_operand_bytes_per_tile_pair_golden(hardware: str, bq: int, bkv: int, backward: bool,
                                                 expected: int) -> None:
    t = tables(load_hardware(hardware))
    got = smem_pair_bytes(t, np.array(float(bq)), np.array(float(bkv)), np.array(128.0), np.array(128.0),
                          np.array(2.0), backward=backward)
    assert float(got) == expected



def test_a_head_too_large_for_the_l2_streams_its_kv_once_per_wave() -> None:
    """Llama 3 405B's all-gather context parallelism: 4,096 queries of 16 heads over 131,072 keys of one KV head
    (67 MB of K and V, beyond H100's 50 MB L2). The CTAs in flight are Q tiles of that head walking the keys
    together: K and V stream from HBM once per wave of CTAs, not once per Q tile; the forward stays compute-bound,
    at FA3's tile-loop rate (0.6-0.7 of the peak: the MMAs plus the softmax share the ping-pong leaves exposed)."""
    op = {"kind": "attention", "batch": 1, "heads": 16, "kv_heads": 1, "seq_q": 4096, "seq_kv": 131072,
          "head_dim": 128, "dtype": "bf16", "causal": True, "pass": "forward"}
    cost = perfmodel.predict(H100, op)
    kv = 131072 * 2 * 128 * 2
    assert cost.bytes_by_level["HBM3"] < 16 * kv  # once per Q tile (8 tokens x 16 heads) would be 512 x
    assert cost.bound.startswith("compute") or not cost.bound.startswith("HBM")
    flops = 4 * 16 * 128 * (4096 * 131072 - 4096 * 4095 / 2)
    assert 0.6 * 989.4e12 < flops / cost.time_s < 0.7 * 989.4e12


def test_gqa_dkv_reduction_golden() -> None:
    """b·h = 16 query heads sharing one KV head (group 16), 16,384 keys, d = dv = 128, bf16 on H100 (DRAM 3.35 TB/s
    x 0.87 = 2.9145e12 B/s, latency 0.6 µs). FA3 (hopper/epilogue_bwd.hpp, CollectiveEpilogueBwdGQA): each CTA
    reduce-adds a 128-key fp32 dK + dV tile, read and written: 2·128·256·4 = 262,144 B, at 1e10 B/s 26.2144 µs;
    the accumulators (16,384 rows x 256) are zeroed (4 B), read (4 B) and written as bf16 (2 B): 41,943,040 B =
    14.391 µs + two latencies = 15.591 µs. FA2 (flash_api.cpp mha_bwd, dk_expanded): the 15 extra query heads'
    bf16 dK + dV written and all 16 read by the sum, 31·16,384·256·2 = 260,046,848 B = 89.225 µs + one latency.
    No GQA (group 1): nothing."""
    t = tables(load_hardware(H100))
    args = (np.array([16.0]), np.array([16384.0]), np.array([128.0]), np.array([128.0]), np.array([128.0]),
            np.array([2.0]))
    epilogue, tile, side = gqa_dkv_seconds(t, *args, np.array([16.0]), True, np.array([1e10]))
    assert float(tile[0]) == 262144.0 and float(epilogue[0]) == pytest.approx(26.2144e-6, rel=1e-9)
    assert float(side[0]) == pytest.approx(15.591e-6, rel=1e-4)
    epilogue, tile, side = gqa_dkv_seconds(t, *args, np.array([16.0]), False, np.array([1e10]))
    assert float(epilogue[0]) == 0.0 == float(tile[0]) and float(side[0]) == pytest.approx(89.825e-6, rel=1e-4)
    for overlap in (True, False):
        assert all(float(np.max(x)) == 0.0 for x in gqa_dkv_seconds(t, *args, np.array([1.0]), overlap,
                                                                      np.array([1e10])))


def test_gqa_backward_pays_the_dkv_reduction_and_the_forward_does_not() -> None:
    """Llama 3 405B's 131K-context rank call on H100 (16 query heads of one KV head, 4,096 queries over 131,072
    keys, causal): with GQA the backward reduces each query head's dK/dV tile into the KV head's, 2-8 % over the
    same call with 16 KV heads (compute-bound: the extra K/V reads of MHA cost nothing here); the forward is
    unchanged (before the reduction the two backwards were equal)."""
    def op(kv: int, pass_: str) -> dict[str, object]:
        return {"kind": "attention", "batch": 1, "heads": 16, "kv_heads": kv, "seq_q": 4096, "seq_kv": 131072,
                "head_dim": 128, "dtype": "bf16", "causal": True, "pass": pass_}

    def ratio(pass_: str) -> float:
        return perfmodel.predict(H100, op(1, pass_)).time_s / perfmodel.predict(H100, op(16, pass_)).time_s

    assert ratio("forward") == pytest.approx(1.0, abs=1e-4)
    assert 1.02 < ratio("backward") < 1.08
