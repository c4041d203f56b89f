"""indexSelectLargeIndex's index -> row chain: an L2 round trip before each DRAM load (docs/model.md section 3,
"Large index_select"). The L2 round trip is gpu-benches' pointer-chase plateau in cycles at the spec's clock."""

from __future__ import annotations

import dataclasses

import pytest

import perfmodel
from perfmodel.efficiency import defaults_for
from perfmodel.machine import tables
from perfmodel.ops import make_op
from perfmodel.specs import load_hardware

A100 = "nvidia-a100-sxm4-80gb"
EMBEDDING = {"kind": "embedding", "num_embeddings": 32000, "embedding_dim": 4096, "num_indices": 4096,
             "dtype": "fp16"}


def test_l2_round_trip_is_the_published_chase_in_cycles_at_each_clock() -> None:
    # te42kyfo/gpu-benches cuda-latency/a100_80.txt: 149.6 ns, 211 cycles at 1,410 MHz on the 0.2-18 MB plateau
    a100 = tables(load_hardware(A100))
    assert a100.l2_round_trip_s() == pytest.approx(149.6e-9, rel=2e-3)
    # a spec's own L2 latency wins: the V100's (Jia et al. 2018, 193 cycles at its 1.53 GHz boost)
    v100 = tables(load_hardware("nvidia-v100-sxm2-32gb"))
    assert v100.l2_round_trip_s() == pytest.approx(126.1e-9, rel=1e-9)
    a40 = tables(load_hardware("nvidia-a40"))
    assert a40.l2_round_trip_s() == pytest.approx(211 / 1.74e9, rel=1e-9)


def test_large_embedding_pays_an_l2_trip_before_each_dram_load() -> None:
    """4,096 indices x 4,096 fp16 on the A100: 33,554,432 B of rows read, 32,768 B of int64 indices, 33,554,432 B
    written = 67,141,632 B. indexSelectLargeIndex keeps 108 SMs x 1,024 threads x 4 B = 442,368 B in flight; each
    load waits L0 = 0.341 us x 2 = 0.682 us (DRAM, idle) + 0.1496 us (L2: the index) = 0.832 us; loaded latency
    rises to 3x L0 at full bandwidth: bw solves 2 L0/BW bw^2 + 0.832 us bw - F = 0 (402 GB/s), then 2 us floor +
    0.832 us + the rest at bw = 168.8 us (without the index trip 150.9 us; the A100's measured 270-325 GB/s read +
    write at 256-32,768 indices would be 207-249 us here: docs/accuracy.md, tenth pass)."""
    cost = perfmodel.predict(A100, EMBEDDING)
    l0, l2, bw_peak = 0.341e-6 * 2.0, 211 / 1.41e9, 2.039e12
    flight, total = 110_592 * 4.0, 67_141_632.0
    lin = l0 + l2
    quad = 2.0 * l0 / bw_peak
    bw = 2 * flight / (lin + (lin * lin + 4 * quad * flight) ** 0.5)
    assert bw == pytest.approx(402e9, rel=0.01)
    assert cost.time_s == pytest.approx(2e-6 + lin + (total - flight) / bw, rel=1e-9)
    assert cost.time_s == pytest.approx(168.8e-6, rel=1e-3)
    assert cost.bound == "HBM2e"


def test_the_chain_is_the_large_index_gathers_only() -> None:
    hw = load_hardware(A100)
    shipped = defaults_for(hw)
    no_l2 = dataclasses.replace(shipped, l2_hit_cycles=0.0)
    small = {**EMBEDDING, "num_indices": 8}
    add = {"kind": "elementwise", "shape": [4096, 4096], "inputs": 2, "dtype": "fp16"}
    for op in (small, add):
        assert perfmodel.predict(A100, op).time_s == perfmodel.predict(A100, op, defaults=no_l2).time_s
    assert perfmodel.predict(A100, EMBEDDING).time_s > perfmodel.predict(A100, EMBEDDING, defaults=no_l2).time_s
    assert make_op(small).work([make_op(small)]).index_l2_trips[0] == 0.0
