"""Golden memory checks: the ZeRO paper's model-state formulas and Korthikanti et al. 2022's activations."""

from __future__ import annotations

import pytest

from perfmodel.graph.llm_config import LlmConfig, bundled
from perfmodel.roofline import resolve_hardware
from perfmodel.training.layout import TrainingSetup
from perfmodel.training.memory import (
    FULL,
    NONE,
    SELECTIVE,
    ActivationShape,
    held_layer_microbatches,
    layer_activation_bytes,
    model_state_bytes,
)
from perfmodel.training.search import SearchSpace, search_layouts

GB = 1e9


def test_zero_stages_match_the_zero_papers_figure_1() -> None:
    """Rajbhandari et al. 2020, Fig. 1: Ψ = 7.5B, Nd = 64, K = 12 -> 120, 31.4, 16.6, 1.88 GB."""
    expected = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.88}
    for stage, gb in expected.items():
        w, g, o = model_state_bytes(7.5e9, stage, 64)
        assert float(w + g + o) / GB == pytest.approx(gb, rel=0.05)


def test_zero2_keeps_its_gradient_shard_only_without_accumulation() -> None:
    """The step model reduces ZeRO-2's gradients once per step, so with m > 1 micro-batches the device
    accumulates the full gradient (as ZeRO-1); with one micro-batch the 1/Nd shard holds (ZeRO paper)."""
    _, g1, _ = model_state_bytes(7.5e9, 1, 64, grad_bytes=4.0, microbatches=32)
    _, g2, _ = model_state_bytes(7.5e9, 2, 64, grad_bytes=4.0, microbatches=32)
    _, g2_one, _ = model_state_bytes(7.5e9, 2, 64, grad_bytes=4.0, microbatches=1)
    _, g3, _ = model_state_bytes(7.5e9, 3, 64, grad_bytes=4.0, microbatches=32)
    assert float(g2) == float(g1) == 4.0 * 7.5e9
    assert float(g2_one) == float(g3) == pytest.approx(4.0 * 7.5e9 / 64)


def test_offload_moves_the_optimizer_state_off_the_device() -> None:
    w, g, o = model_state_bytes(1e9, 1, 8, offload=True)
    assert float(o) == 0.0 and float(w + g) == 4e9


def _gpt(h: int, a: int, layers: int, vocab: int = 51200) -> LlmConfig:
    return LlmConfig.from_hf({"model_type": "gpt2", "n_embd": h, "n_head": a, "n_layer": layers, "n_inner": 4 * h,
                              "vocab_size": vocab, "n_positions": 2048}, f"gpt-{h}")


@pytest.mark.parametrize("t", [1, 8])
def test_layer_activations_match_korthikanti_table_2(t: int) -> None:
    """Korthikanti et al. 2022 Table 2 for GPT-3 175B's layer (s=2048, b=1, h=12288, a=96)."""
    s, b, h, a = 2048, 1, 12288, 96
    shape = ActivationShape.of(_gpt(h, a, 96), dropout=True, flash=False)
    sbh = s * b * h
    cases = {
        (False, NONE): sbh * (10 + 24 / t + 5 * a * s / (h * t)),
        (True, NONE): sbh / t * (34 + 5 * a * s / h),
        (False, SELECTIVE): sbh * (10 + 24 / t),
        (True, SELECTIVE): 34 * sbh / t,
        (True, FULL): 2 * sbh / t,
    }
    for (sp, rc), want in cases.items():
        got = float(layer_activation_bytes(shape, s * b, s, t, sp, rc))
        assert got == pytest.approx(want, rel=0.05), (sp, rc)


def test_flash_attention_stores_no_scores() -> None:
    shape = ActivationShape.of(_gpt(4096, 32, 2), dropout=False, flash=True)
    short = float(layer_activation_bytes(shape, 2048, 2048, 1, True, NONE))
    long = float(layer_activation_bytes(shape, 2048, 65536, 1, True, NONE))
    assert short == long  # the keys do not enter: no s x s term


def test_a_pipelined_gpt3_holds_the_papers_total_and_model_states() -> None:
    """175B, t=8, p=8, selective + SP, 1F1B with m >= p: the first stage holds 34·s·b·h·L/t bytes of layer
    activations (Korthikanti §4.2.3, independent of p), plus the embedding's; its parameters are the
    ZeRO-0 16Ψ of one eighth of the layers (12·h² each) and the embedding over 8 tp ranks."""
    cfg = bundled("gpt3-175b")
    setup = TrainingSetup(seq_len=2048, global_batch=64, dropout=True, flash_attention=False)
    space = SearchSpace(tp=(8,), pp=(8,), cp=(1,), zero=(0,), recompute=("selective",), micro_batch=(1,),
                        virtual_stages=(1,), schedules=("1f1b",))
    result = search_layouts(cfg, resolve_hardware("nvidia-a100-sxm4-80gb"), 64, setup, space)
    assert result.count == 1
    s, h, layers = 2048, 12288, 96
    want_acts = 34 * s * h * layers / 8
    assert float(result.memory.activations_bytes[0]) == pytest.approx(want_acts, rel=0.05)
    psi = (12 * h * h * layers / 8 + 50257 * h) / 8
    assert float(result.memory.params_per_device[0]) == pytest.approx(psi, rel=0.05)
    states = result.memory.weights_bytes + result.memory.gradients_bytes + result.memory.optimizer_bytes
    assert float(states[0]) == pytest.approx(16 * psi, rel=0.05)


def test_routed_experts_shard_over_their_own_data_parallel_group() -> None:
    """Mixtral on 64 devices, tp=1: under ZeRO-3 every parameter's gradient and optimizer state is spread over all
    64 ranks whatever ep is (an expert held by 64/ep ranks is sharded over those), while without ZeRO ep=8 keeps
    an eighth of the experts per device."""
    cfg = bundled("mixtral-8x7b")
    hw = resolve_hardware("nvidia-h100-sxm5-80gb")
    setup = TrainingSetup(seq_len=4096, global_batch=64)

    def states(ep: int, zero: int) -> float:
        space = SearchSpace(tp=(1,), pp=(1,), cp=(1,), ep=(ep,), zero=(zero,), recompute=("full",), micro_batch=(1,),
                            virtual_stages=(1,))
        m = search_layouts(cfg, hw, 64, setup, space).memory
        return float((m.gradients_bytes + m.optimizer_bytes)[0])

    assert states(8, 3) == pytest.approx(states(1, 3), rel=0.01)
    assert states(8, 0) < 0.3 * states(1, 0)


def test_interleaving_holds_korthikantis_extra_share_of_activations() -> None:
    """Korthikanti §4.2.3: interleaved 1F1B with v chunks makes the first stage hold (1 + (p−1)/(p·v)) times the
    activations of plain 1F1B (which holds p micro-batches of L/p layers, L layers' worth)."""
    cfg = bundled("gpt3-175b")
    setup = TrainingSetup(seq_len=2048, global_batch=64, dropout=True, flash_attention=False)
    space = SearchSpace(tp=(8,), pp=(8,), cp=(1,), zero=(0,), recompute=("selective",), micro_batch=(1,),
                        virtual_stages=(1, 2, 4), schedules=("1f1b",))
    r = search_layouts(cfg, resolve_hardware("nvidia-a100-sxm4-80gb"), 64, setup, space)
    layers_only = 34 * 2048 * 12288 * 96 / 8
    for i, v in enumerate(r.layouts.virtual_stages):
        want = layers_only * (1 + (8 - 1) / (8 * v)) if v > 1 else layers_only
        assert float(r.memory.activations_bytes[i]) == pytest.approx(want, rel=0.05), v


def _simulated_peak(pp: int, m: int, v: int, rank: int, chunk_layers: list[int]) -> int:
    """Replays Megatron's (interleaved) 1F1B order on one pipeline rank, one forward or backward at a time:
    warm-up forwards, then one forward and one backward alternately, then the remaining backwards; forward k
    runs chunk (k // pp) mod v, backward k chunk v − 1 − (k // pp) mod v. Returns the most layer activation sets
    held at once (``chunk_layers``: layers per chunk)."""
    total = m * v
    if v == 1:
        warmup = min(pp - rank - 1, total)
    else:
        warmup = total if m == pp else min(2 * (pp - rank - 1) + (v - 1) * pp, total)
    held, peak, f, b = 0, 0, 0, 0

    def forward() -> None:
        nonlocal held, peak, f
        held += chunk_layers[(f // pp) % v]
        f += 1
        peak = max(peak, held)

    def backward() -> None:
        nonlocal held, b
        held -= chunk_layers[v - 1 - (b // pp) % v]
        b += 1

    for _ in range(warmup):
        forward()
    while f < total:
        forward()
        backward()
    while b < total:
        backward()
    assert held == 0
    return peak


@pytest.mark.parametrize(("pp", "m", "v", "ends"), [(16, 32, 8, True), (16, 16, 8, True), (16, 32, 4, True),
                                                     (8, 64, 3, False), (8, 8, 2, False), (4, 12, 1, False),
                                                     (16, 48, 2, True), (4, 2, 1, False)])
def test_held_activations_replay_megatrons_schedule(pp: int, m: int, v: int, ends: bool) -> None:
    """The first and last stage's peak layer activation sets equal a replay of the schedule, with the embedding
    (loss) taking the first (last) chunk's first (last) layer slot when ``ends``; m ≥ 2pp gives Korthikanti's
    L·(1 + (p−1)/(p·v)) without the ends, m = pp (all warm-up) L."""
    per_chunk = 2 if v < 8 else 1
    for rank, last in ((0, False), (pp - 1, True)):
        layers = [per_chunk] * v
        if ends:
            layers[-1 if last else 0] -= 1
        want = _simulated_peak(pp, m, v, rank, layers)
        got, _ = held_layer_microbatches(pp, m, v, per_chunk, last=last, end_in_split=ends)
        assert float(got) == want, (rank, want, float(got))
    if not ends and m >= 2 * pp and v > 1:
        got, _ = held_layer_microbatches(pp, m, v, per_chunk, last=False, end_in_split=False)
        assert float(got) == pytest.approx(per_chunk * v * pp * (1 + (pp - 1) / (pp * v)))


@pytest.mark.parametrize(("devices", "batch"), [(8192, 2048), (16384, 2048)])
def test_llama3_405b_fits_without_recomputation_as_published(devices: int, batch: int) -> None:
    """Llama 3 (arXiv:2407.21783, §3.3.2): 405B on tp8 pp16, 8K-token sequences, interleaved 1F1B with the
    embedding and the loss in the first and last stages' layer slots, trains without activation checkpointing.
    The first stage holds, for v = 8 (one layer per chunk, its first chunk the embedding alone), 7 chunks x 16
    micro-batches of one layer: 112 layer activation sets of 2·s·b·(4h/t + (Q + K + V + O + 3·ffn)/t) bytes."""
    cfg = bundled("llama-3.1-405b")
    setup = TrainingSetup(seq_len=8192, global_batch=batch, sequence_parallel=True, dropout=False,
                          flash_attention=True, grad_bytes=4.0, ends_in_pipeline_split=True)
    space = SearchSpace(tp=(8,), pp=(16,), cp=(1,), zero=(2,), recompute=("none",), micro_batch=(1,),
                        virtual_stages=(8,), schedules=("1f1b",))
    r = search_layouts(cfg, resolve_hardware("nvidia-h100-sxm5-80gb"), devices, setup, space)
    assert r.reasons == [""]
    h, t, s = 16384, 8, 8192
    per_layer = 2 * s * (4 * h / t + (h + 1024 + 1024 + h + 3 * 53248) / t)
    assert float(r.memory.activations_bytes[0]) == pytest.approx(112 * per_layer, rel=0.05)
    assert float(r.memory.total_bytes[0]) < 80e9
