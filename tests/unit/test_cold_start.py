"""Kernels after a cache flush (Nsight Compute's default) and warm streams past the L2 knee (issue 24).

- ``cold_start_round_trips``: a kernel whose code and parameters were flushed pays that many DRAM round trips
  before its first load, per kernel, on GPUs; the default (0) leaves every prediction as it was.
- ``llc_hit_share``: a warm working set W keeps min(1, f·C / W) of its bytes in the last-level cache, a smooth
  knee instead of a step at f·C.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import perfmodel
from perfmodel.efficiency import FLUSHED_CACHE_ROUND_TRIPS, ModelDefaults, defaults_for
from perfmodel.memory_time import llc_hit_share
from perfmodel.specs import load_hardware

A100 = "nvidia-a100-sxm4-80gb"
# the A100 spec's idle DRAM round trip (0.341 us, gpu-benches) x the shipped dram_latency_scale
A100_DRAM_LATENCY_S = 0.341e-6 * ModelDefaults.dram_latency_scale
RELU = {"kind": "elementwise", "shape": [4, 72, 1, 1], "dtype": "fp32"}


def _flushed(hardware: str) -> ModelDefaults:
    shipped = defaults_for(load_hardware(hardware))
    return dataclasses.replace(shipped, cold_start_round_trips=FLUSHED_CACHE_ROUND_TRIPS)


def test_a_flushed_kernel_pays_two_dram_round_trips_more() -> None:
    """A 288-element ReLU on the A100 (Nsight Compute measured 3.49 µs): 2 µs floor + 0.682 µs first load (0.341 µs
    idle x 2) = 2.68 µs warm; flushed, the instruction fetch and the parameter load first: + 2 x 0.682 µs = 4.05 µs."""
    warm = perfmodel.predict(A100, RELU)
    flushed = perfmodel.predict(A100, RELU, defaults=_flushed(A100))
    assert flushed.time_s - warm.time_s == pytest.approx(2 * A100_DRAM_LATENCY_S, rel=1e-9)
    assert flushed.overhead_s == pytest.approx(2e-6 + 2 * A100_DRAM_LATENCY_S, rel=1e-9)
    assert flushed.time_s == pytest.approx(4.046e-6, rel=0.01)


def test_each_kernel_of_an_op_pays_it() -> None:
    """A forward_backward rmsnorm runs two kernels (forward, backward): twice the cold start."""
    op = {"kind": "rmsnorm", "shape": [64, 4096], "dtype": "fp16", "pass": "forward_backward"}
    warm = perfmodel.predict(A100, op)
    flushed = perfmodel.predict(A100, op, defaults=_flushed(A100))
    assert flushed.overhead_s - warm.overhead_s == pytest.approx(2 * 2 * A100_DRAM_LATENCY_S, rel=1e-9)


def test_the_default_is_no_cold_start_and_cpus_never_pay_it() -> None:
    assert defaults_for(load_hardware(A100)).cold_start_round_trips == 0.0
    op = {"kind": "elementwise", "shape": [1024], "dtype": "fp32"}
    cpu = next(h for h in perfmodel.list_hardware() if load_hardware(h).kind == "cpu")
    plain = perfmodel.predict(cpu, op)
    assert perfmodel.predict(cpu, op, defaults=_flushed(cpu)).time_s == plain.time_s


def test_llc_hit_share_is_all_within_the_share_then_falls_as_one_over_w() -> None:
    capacity, fraction = 40 * 2**20, 0.5
    w = np.array([0.0, 1e6, 20 * 2**20, 40 * 2**20, 80 * 2**20, 400 * 2**20])
    share = llc_hit_share(w, capacity, fraction)
    assert share.tolist() == pytest.approx([0.0, 1.0, 1.0, 0.5, 0.25, 0.05])


def test_a_warm_stream_speeds_up_smoothly_through_the_knee() -> None:
    """Residual adds on the A100 from 4 MB to 400 MB: warm is never slower than cold, all of it at the L2 within
    half the L2, and the warm/cold ratio rises continuously towards 1 past it (no jump at 20 MiB)."""
    sizes = np.geomspace(2**20, 2**27, 40).astype(int)  # elements, fp16, 2 inputs + 1 output
    ops = [{"kind": "elementwise", "shape": [int(s)], "inputs": 2, "dtype": "fp16"} for s in sizes]
    warm = perfmodel.predict_many(A100, ops, warm_cache=True).time_s
    cold = perfmodel.predict_many(A100, ops).time_s
    ratio = warm / cold
    assert np.all(ratio <= 1.0 + 1e-12)
    assert np.all(np.diff(ratio) > -0.02)  # rising towards 1, no step back
    assert np.max(np.abs(np.diff(ratio))) < 0.15  # smooth: no jump at the knee
    assert ratio[-1] > 0.95
