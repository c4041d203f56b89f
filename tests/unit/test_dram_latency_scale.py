"""A GPU spec's DRAM latency is an idle round trip from published microbenchmarks (te42kyfo/gpu-benches, Little's law
on the read ramp of gpu-stream); a stream's first-byte latency is that x ``ModelDefaults.dram_latency_scale``, the
one latency knob the leave-one-device-out refit searches (the loaded-latency factor stays at its shipped 3). Specs
without a figure keep the default first-byte latency (issue 24, tenth pass: docs/model.md section 5)."""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel.machine import tables
from perfmodel.specs import load_hardware

IDLE_ROUND_TRIP_S = {  # gpu-stream read ramp, threads x 8 B / bandwidth at 2 blocks of 32 threads per SM or CU
    "nvidia-a100-sxm4-80gb": 3456 * 8 / 81e9,
    "nvidia-a40": 2688 * 8 / 82e9,
    "nvidia-v100-sxm2-32gb": 2560 * 8 / 72e9,
    "amd-mi210": 3328 * 8 / 96e9,
}


@pytest.mark.parametrize("name", sorted(IDLE_ROUND_TRIP_S))
def test_a_specs_idle_round_trip_is_scaled_to_a_streams_first_byte_latency(name: str) -> None:
    t = tables(load_hardware(name))
    idle = t.dram.latency_s
    assert idle is not None and idle == pytest.approx(IDLE_ROUND_TRIP_S[name], rel=0.01)
    assert t.latency_s(t.dram) == pytest.approx(idle * t.defaults.dram_latency_scale, rel=1e-12)
    assert 1.0 <= t.defaults.dram_latency_scale <= 3.0


def test_the_a40s_round_trip_is_shorter_than_the_a100s() -> None:
    a100, a40 = (tables(load_hardware(n)) for n in ("nvidia-a100-sxm4-80gb", "nvidia-a40"))
    assert a100.latency_s(a100.dram) / a40.latency_s(a40.dram) == pytest.approx(0.341 / 0.262, rel=1e-3)


def test_a_spec_without_a_figure_keeps_the_default_and_caches_are_not_scaled() -> None:
    t4 = tables(load_hardware("nvidia-t4"))
    assert t4.dram.latency_s is None
    assert t4.latency_s(t4.dram) == t4.defaults.dram_latency_s
    v100 = tables(load_hardware("nvidia-v100-sxm2-32gb"))
    assert v100.llc is not None and v100.llc.latency_s is not None
    assert v100.latency_s(v100.llc) == v100.llc.latency_s  # Jia et al.'s L2 hit latency, as published


ROTARY = {"kind": "elementwise", "shape": [1, 1024], "dtype": "fp16", "flops_per_element": 3, "vector_width": 1}


def test_dependent_loads_make_a_tiny_kernel_a_chain_of_round_trips() -> None:
    """vLLM's rotary kernel loads the token's position, then the cos/sin cache row at it: a one-token call lasts
    the floor plus two DRAM round trips; a large call is a stream, the chain hidden under it."""
    hw = "nvidia-a100-sxm4-80gb"
    t = tables(load_hardware(hw))
    latency = t.latency_s(t.dram)
    plain, chained = perfmodel.predict_many(hw, [ROTARY, {**ROTARY, "dependent_loads": 2}]).time_s
    assert chained == pytest.approx(t.kernel_overhead_s + 2 * latency, rel=1e-9)
    assert plain < chained
    big = {**ROTARY, "shape": [4096, 8192]}
    assert perfmodel.predict_many(hw, [big, {**big, "dependent_loads": 2}]).time_s.tolist() == pytest.approx(
        [perfmodel.predict_many(hw, [big]).time_s[0]] * 2, rel=1e-12)


def test_dependent_loads_cannot_be_negative() -> None:
    with pytest.raises(ValueError, match="dependent_loads"):
        perfmodel.predict_many("nvidia-a100-sxm4-80gb", [{**ROTARY, "dependent_loads": -1}])
