"""A GEMM schedule's DRAM stream on a GPU is bounded by the loads its CTAs keep in flight (Little's law), not by its
CTA count: a 32-CTA decode GEMM on a 142-SM L40S streams its weights at the DRAM roof when each CTA keeps enough
K-slabs in flight, and falls under it when it keeps few (issue 26)."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel.dtypes import DType
from perfmodel.machine import tables
from perfmodel.ops.base import DTYPE_INDEX
from perfmodel.search.gemm_cost import GemmCosts, gemm_costs_numpy, in_flight_bandwidth
from perfmodel.search.gemm_space import GemmCandidates

M, N, K = 16, 4096, 4096  # a decode step's projection: 16 tokens x 4096 x 4096 fp16 weights (32 MiB)


def _decode(device: str, tiles: list[tuple[float, float, float, float]]) -> tuple[GemmCosts, float]:
    """(BM, BN, BK, stages) schedules of the 16 x 4096 x 4096 fp16 GEMM on ``device``, costed by the numpy path."""
    t = tables(perfmodel.load_hardware(device))
    bm, bn, bk, stages = (np.array(c) for c in zip(*tiles, strict=True))
    space = GemmCandidates(bm, bn, bk * 2.0, stages, np.ones(bm.size), np.full(bm.size, 8.0))
    one = np.ones(1)
    compulsory = 2.0 * (M * K + K * N + M * N)
    peak = one * t.matrix_peak[DTYPE_INDEX[DType.FP16]]
    costs = gemm_costs_numpy(t, space, one, one * M, one * N, one * K, one * 2.0, peak, one * compulsory)
    return costs, compulsory


def test_a_few_cta_grid_with_enough_loads_in_flight_streams_at_the_dram_roof() -> None:
    """16x128x64, 5 stages: 32 CTAs x 4 slabs x 18,432 B = 2.4 MB in flight, more than the L40S's 864 GB/s needs
    over its loaded round trip: the weights stream at 0.87 x 864 GB/s (~46 us; measured 65.5 us by Inductor). The
    old CTA-count share (32 / (2 x 142) of the bandwidth) gave 0.40 ms."""
    t = tables(perfmodel.load_hardware("nvidia-l40s"))
    costs, _ = _decode("nvidia-l40s", [(16.0, 128.0, 64.0, 5.0)])
    roof = t.latency_s(t.dram) + costs.dram_bytes[0, 0] / (t.bandwidth_bytes_per_s(t.dram) * t.defaults.dram_efficiency)
    assert costs.dram_s[0, 0] == pytest.approx(roof, rel=1e-12)
    assert costs.tiles[0, 0] == 32


def test_fewer_slabs_in_flight_cannot_stream_faster() -> None:
    """The same 16x128x32 tile with 2, 3, 4, 5 stages keeps 1-4 K-slabs in flight per CTA: the DRAM time never
    rises with the stages and the 2-stage one is bound by Little's law, under the roof."""
    costs, _ = _decode("nvidia-l40s", [(16.0, 128.0, 32.0, s) for s in (2.0, 3.0, 4.0, 5.0)])
    dram = costs.dram_s[0]
    assert np.all(np.diff(dram) <= 0.0)
    assert dram[0] > 1.5 * dram[-1]


def test_the_in_flight_bound_is_littles_law() -> None:
    """With no LLC hits and an unloaded latency (factor 1) the achieved bandwidth is F / L exactly; loading the
    latency (factor 3) only lowers it; hits at a shorter latency raise it."""
    f, lat, bw = 1.0e6, 0.6e-6, 864e9
    assert in_flight_bandwidth(f, 0.0, lat, bw, 0.3e-6, 1.0) == pytest.approx(f / lat, rel=1e-6)
    loaded = in_flight_bandwidth(f, 0.0, lat, bw, 0.3e-6, 3.0)
    assert loaded < f / lat
    assert in_flight_bandwidth(f, 0.5, lat, bw, 0.3e-6, 3.0) > loaded


def test_systolic_devices_keep_their_unit_share() -> None:
    """A TPU's tiles are DMA'd by its engines: its DRAM term is not the GPU's in-flight bound (unchanged)."""
    t = tables(perfmodel.load_hardware("google-tpu-v5e"))
    costs, _ = _decode("google-tpu-v5e", [(128.0, 128.0, 128.0, 2.0)])
    busy = costs.busy[0, 0]
    roof = t.latency_s(t.dram) + costs.dram_bytes[0, 0] / (
        t.bandwidth_bytes_per_s(t.dram) * t.defaults.dram_efficiency * busy)
    assert costs.dram_s[0, 0] == pytest.approx(roof, rel=1e-12)
