"""ln16: a device's kernel floor from its published small-kernel interval, and layer norm's normalize-loop chain
(both off as shipped): the factors and times by hand."""

from __future__ import annotations

import dataclasses

import pytest

import perfmodel
from perfmodel.efficiency import defaults_for
from perfmodel.machine import tables
from perfmodel.ops import make_op, norm
from perfmodel.small_kernels import A100_INTERVAL_S, SMALL_KERNEL_INTERVAL_S, floor_scale
from perfmodel.specs import derive_variant, load_hardware

A100, A40 = "nvidia-a100-sxm4-80gb", "nvidia-a40"
VIDUR_LAYER_NORM = {"kind": "layernorm", "shape": [8, 2560], "dtype": "fp16", "vector_width": 4,
                    "threads_per_row": 128}


def test_scale_is_the_interval_over_the_reference_and_one_where_off_or_unlisted() -> None:
    assert floor_scale(A40, None, None) == 1.0
    assert floor_scale(A40, None, A100_INTERVAL_S) == pytest.approx(1.068 / 1.332)
    assert floor_scale(A100, None, A100_INTERVAL_S) == 1.0
    assert floor_scale("nvidia-t4", None, A100_INTERVAL_S) == 1.0  # no published figure
    assert floor_scale("my-a40-variant", A40, 2e-6) == pytest.approx(SMALL_KERNEL_INTERVAL_S[A40] / 2e-6)


def test_machine_floor_follows_the_switch() -> None:
    hw = load_hardware(A40)
    shipped = defaults_for(hw)
    assert shipped.small_kernel_reference_s is None  # off as shipped
    t = tables(hw)
    on = dataclasses.replace(t, defaults=dataclasses.replace(shipped, small_kernel_reference_s=A100_INTERVAL_S))
    assert t.kernel_overhead_s == shipped.kernel_overhead_s
    assert on.kernel_overhead_s == pytest.approx(2e-6 * 1.068 / 1.332)
    variant = derive_variant(hw, "a40-own-floor", {"launch_overhead_s": 5e-6})  # a spec's own figure wins
    own = dataclasses.replace(tables(variant), defaults=on.defaults)
    assert own.kernel_overhead_s == 5e-6


def test_floor_switch_moves_a_small_kernel_by_the_floor_difference() -> None:
    hw = load_hardware(A40)
    on = dataclasses.replace(defaults_for(hw), small_kernel_reference_s=A100_INTERVAL_S)
    off_s = perfmodel.predict_many(A40, [VIDUR_LAYER_NORM]).time_s[0]
    on_s = perfmodel.predict_many(A40, [VIDUR_LAYER_NORM], defaults=on).time_s[0]
    assert off_s - on_s == pytest.approx(2e-6 * (1 - 1.068 / 1.332), rel=1e-9)


@pytest.mark.parametrize("device", [A100, A40])
def test_layer_norm_loop_chain_adds_its_steps_at_the_llc_latency(monkeypatch: pytest.MonkeyPatch,
                                                                 device: str) -> None:
    off_s = perfmodel.predict_many(device, [VIDUR_LAYER_NORM]).time_s[0]
    monkeypatch.setattr(norm, "LAYER_NORM_LOOP_CHAIN", True)
    on_s = perfmodel.predict_many(device, [VIDUR_LAYER_NORM]).time_s[0]
    # 2,560 columns / (128 threads x 4 elements) = 5 steps, each an L2 round trip (no spec figure: 0.3 us default)
    assert on_s - off_s == pytest.approx(5 * 0.3e-6, rel=1e-9)
    backward = {**VIDUR_LAYER_NORM, "pass_": "backward"}
    assert norm.LayerNorm.work([make_op(backward)]).llc_round_trips[0] == 0.0


def test_layer_norm_loop_chain_off_leaves_no_round_trips() -> None:
    work = norm.LayerNorm.work([make_op(VIDUR_LAYER_NORM)])
    assert work.llc_round_trips[0] == 0.0
