"""Layout search: step-time parts behave as their formulas say, impossible layouts say why, the
smallest change makes a layout fit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from perfmodel.graph.ir import GraphError
from perfmodel.graph.llm_config import LlmConfig, bundled
from perfmodel.roofline import resolve_hardware
from perfmodel.training.fit import evaluate, make_it_fit
from perfmodel.training.layout import Layout, TrainingSetup
from perfmodel.training.search import SearchSpace, search_layouts, virtual_stage_candidates

H100 = "nvidia-h100-sxm5-80gb"


@pytest.fixture(scope="module")
def llama70() -> LlmConfig:
    return bundled("llama-3-70b")


def _one(cfg: LlmConfig, layout: Layout, setup: TrainingSetup) -> dict[str, Any]:
    return evaluate(cfg, resolve_hardware(H100), layout, setup).row(0)


def test_the_interleaved_bubble_is_pp_minus_one_over_v_m(llama70: LlmConfig) -> None:
    setup = TrainingSetup(seq_len=4096, global_batch=64)
    space = SearchSpace(tp=(8,), pp=(4,), cp=(1,), zero=(1,), recompute=("selective",), micro_batch=(1,),
                        virtual_stages=(1, 2, 4), schedules=("1f1b",))
    r = search_layouts(llama70, resolve_hardware(H100), 64, setup, space)
    t = r.times
    m = t.microbatches
    pipeline = t.step_s - t.dp_exposed_s - t.optimizer_s
    stage = pipeline / (m + 3.0 / r.layouts.virtual_stages)
    assert np.allclose(t.bubble_s / (m * stage), 3.0 / (r.layouts.virtual_stages * m))
    assert t.bubble_s[1] < t.bubble_s[0] and t.bubble_s[2] < t.bubble_s[1]


def test_recomputation_costs_time_and_saves_memory(llama70: LlmConfig) -> None:
    setup = TrainingSetup(seq_len=4096, global_batch=64)
    rows = {mode: _one(llama70, Layout(tp=8, pp=4, dp=2, zero=1, recompute=mode), setup)
            for mode in ("none", "selective", "full")}
    steps = [rows[m]["step_s"] for m in ("none", "selective", "full")]
    acts = [rows[m]["memory_bytes"]["activations"] for m in ("none", "selective", "full")]
    assert steps[0] <= steps[1] < steps[2]
    assert acts[0] >= acts[1] > acts[2]


def test_zero3_gathers_weights_every_micro_batch(llama70: LlmConfig) -> None:
    setup = TrainingSetup(seq_len=4096, global_batch=256)
    z1 = _one(llama70, Layout(tp=8, dp=16, zero=1, recompute="full"), setup)
    z3 = _one(llama70, Layout(tp=8, dp=16, zero=3, recompute="full"), setup)
    assert z3["memory_bytes"]["weights"] < z1["memory_bytes"]["weights"] / 4
    assert z3["time_s"]["dp_exposed_s"] == 0.0  # reduced per micro-batch instead


def test_impossible_layouts_say_why() -> None:
    cfg = LlmConfig.from_hf({"model_type": "llama", "hidden_size": 768, "intermediate_size": 3072,
                             "num_hidden_layers": 6, "num_attention_heads": 12, "num_key_value_heads": 12,
                             "vocab_size": 32000}, "tiny")
    setup = TrainingSetup(seq_len=1024, global_batch=12)
    r = search_layouts(cfg, resolve_hardware(H100), 8, setup, SearchSpace(micro_batch=(1, 4)))
    reasons = set(r.reasons)
    assert any("attention heads (12) is not divisible by 8" in x for x in reasons)
    assert any(x.startswith("batch: global batch 12 is not a multiple of dp x micro-batch") for x in reasons)
    assert any(x.startswith("ZeRO: nothing to shard") for x in reasons)
    assert r.ranked()  # some layouts run


def test_a_layout_that_does_not_fit_gets_the_changes_that_make_it_fit(llama70: LlmConfig) -> None:
    setup = TrainingSetup(seq_len=8192, global_batch=32)
    layout = Layout(tp=8, dp=4, zero=1, recompute="none", micro_batch=4)
    out = make_it_fit(llama70, resolve_hardware(H100), layout, setup)
    assert not out["layout"]["fits"] and out["layout"]["reason"].startswith("does not fit: needs")
    assert out["fixes"] and all(f["fits"] for f in out["fixes"])
    steps = [f["step_s"] for f in out["fixes"]]
    assert steps == sorted(steps)
    assert any(f["change"] == "recompute none -> full" for f in out["fixes"])
    assert out["fixes"][0]["memory_bytes"]["total"] <= out["fixes"][0]["memory_bytes"]["capacity"]


def test_fixed_choices_that_cannot_run_say_why(llama70: LlmConfig) -> None:
    hw = resolve_hardware(H100)
    setup = TrainingSetup(seq_len=4096, global_batch=64)
    cases = {Layout(pp=128): "pipeline: pp=128 exceeds the 80 layers",
             Layout(cp=3): "cannot build: node 'layout': sequence length 4096 is not divisible by cp=3",
             Layout(dp=4, virtual_stages=2): "interleaving: v=2 model chunks need pipeline stages (pp > 1)"}
    for layout, reason in cases.items():
        row = evaluate(llama70, hw, layout, setup).row(0)
        assert row["reason"] == reason and not row["fits"]


def test_offload_moves_adam_to_the_host_link(llama70: LlmConfig) -> None:
    layout = Layout(tp=8, pp=4, dp=2, zero=1, recompute="full")
    on_device = _one(llama70, layout, TrainingSetup(seq_len=4096, global_batch=64))
    offloaded = _one(llama70, layout, TrainingSetup(seq_len=4096, global_batch=64, offload="optimizer"))
    assert offloaded["memory_bytes"]["optimizer"] == 0.0 < on_device["memory_bytes"]["optimizer"]
    assert offloaded["time_s"]["optimizer_s"] > 10 * on_device["time_s"]["optimizer_s"]


def test_a_probe_the_op_model_refuses_rules_out_only_its_layouts() -> None:
    """8 sequences of 4M tokens through 405B's unsharded MLP make an op the op model calls unreal; tp=8 still runs."""
    cfg = bundled("llama-3.1-405b")
    space = SearchSpace(tp=(1, 8), pp=(1,), cp=(1,), zero=(1,), recompute=("full",), micro_batch=(8,),
                        virtual_stages=(1,))
    r = search_layouts(cfg, resolve_hardware(H100), 64, TrainingSetup(seq_len=1 << 22, global_batch=512), space)
    assert r.reasons[0].startswith("cannot build: layers.0.") and "not a real workload" in r.reasons[0]
    assert np.isnan(r.times.step_s[0])
    assert not r.reasons[1].startswith("cannot build") and np.isfinite(r.times.step_s[1])


def test_an_expert_degree_the_graph_cannot_lay_out_is_refused() -> None:
    with pytest.raises(ValueError, match="ep=4 must be 1, equal tp"):
        Layout(tp=2, dp=8, ep=4)


def test_context_parallelism_splits_the_work_and_hides_the_ring_at_long_sequences() -> None:
    """Llama 3 8B, 32K tokens: cp=2 halves each rank's tokens (and its share of the causal attention), dp halves
    with it, so a step's compute per device stays the same; the KV ring hides behind the attention."""
    cfg = bundled("llama-3-8b")
    setup = TrainingSetup(seq_len=32768, global_batch=16)
    rows = {cp: _one(cfg, Layout(tp=1, cp=cp, dp=8 // cp, zero=1, recompute="full"), setup) for cp in (1, 2)}
    assert rows[2]["time_s"]["compute_s"] == pytest.approx(rows[1]["time_s"]["compute_s"], rel=0.1)
    assert rows[2]["time_s"]["cp_exposed_s"] < 0.01 * rows[2]["step_s"]
    assert rows[2]["memory_bytes"]["activations"] < 0.6 * rows[1]["memory_bytes"]["activations"]


def test_the_gradient_reduction_is_split_into_hidden_and_exposed(llama70: LlmConfig) -> None:
    setup = TrainingSetup(seq_len=4096, global_batch=256)
    row = _one(llama70, Layout(tp=8, pp=1, dp=16, zero=0, recompute="full"), setup)
    t = row["time_s"]
    assert t["dp_exposed_s"] > 0 and t["dp_hidden_s"] > 0  # the last bucket is always exposed
    parts = t["compute_s"] + t["recompute_s"] + t["tp_comm_s"] + t["dp_exposed_s"] + t["optimizer_s"]
    assert parts < row["step_s"] < 1.05 * parts  # the rest: embedding and LM head, outside the layers


def test_zero_bubble_h1_leaves_a_third_of_the_1f1b_bubble(llama70: LlmConfig) -> None:
    """Qi et al. 2023: ZB-H1's bubble is (p−1)(T_F + T_B − T_W), about a third of 1F1B's (p−1)(T_F + T_B + T_W)
    when the three are equal (no recomputation); memory is 1F1B's."""
    setup = TrainingSetup(seq_len=4096, global_batch=64)
    plain = _one(llama70, Layout(tp=8, pp=4, dp=2, zero=1, recompute="selective"), setup)
    zb = _one(llama70, Layout(tp=8, pp=4, dp=2, zero=1, recompute="selective", schedule="zb-h1"), setup)
    assert zb["time_s"]["bubble_s"] == pytest.approx(plain["time_s"]["bubble_s"] / 3, rel=0.15)
    assert zb["memory_bytes"]["total"] == plain["memory_bytes"]["total"]
    bad = _one(llama70, Layout(tp=8, pp=4, dp=2, virtual_stages=2, schedule="zb-h1"), setup)
    assert bad["reason"] == "zero bubble: zb-h1 needs pp > 1 and v = 1 (pp=4, v=2)"


def test_chunk_candidates_are_the_divisors_of_the_layers_per_stage() -> None:
    assert virtual_stage_candidates(105, 35) == (1, 3)  # Megatron 529.6B: 3 layers per stage
    assert virtual_stage_candidates(60, 4) == (1, 3, 5, 15)  # Megatron 76.1B: 15 layers per stage
    assert virtual_stage_candidates(126, 16) == (1, 2, 4, 8)  # ceil(126 / 16) = 8
    assert virtual_stage_candidates(96, 8) == (1, 2, 3, 4, 6, 12)
    assert virtual_stage_candidates(720, 2) == (1, 2, 3, 4, 5, 6, 8, 9)  # the 8 smallest of 360's 24
    assert virtual_stage_candidates(80, 1) == (1,)
    with pytest.raises(GraphError):
        virtual_stage_candidates(80, 0)


def test_the_default_search_tries_every_chunk_count_of_each_pipeline_degree(llama70: LlmConfig) -> None:
    setup = TrainingSetup(seq_len=4096, global_batch=64)
    space = SearchSpace(tp=(8,), cp=(1,), zero=(1,), recompute=("selective",), micro_batch=(1,),
                        schedules=("1f1b",))
    r = search_layouts(llama70, resolve_hardware(H100), 64, setup, space)
    tried: dict[int, set[int]] = {}
    for pp, v in zip(r.layouts.pp.tolist(), r.layouts.virtual_stages.tolist(), strict=True):
        tried.setdefault(pp, set()).add(v)
    assert tried == {pp: set(virtual_stage_candidates(llama70.layers, pp)) for pp in (1, 2, 4, 8)}
    assert tried[1] == {1} and 5 in tried[4]  # 80 layers, pp = 4: 20 per stage, v = 5 runs
    five = [i for i in range(r.count) if r.layouts.pp[i] == 4 and r.layouts.virtual_stages[i] == 5]
    assert five and all(not r.reasons[i] for i in five)
