"""Golden cases worked out on paper: the toy device (tests/conftest.py) and real ones.

The toy device: 4 SMs; tensor 8 TFLOP/s fp16; vector 2 TFLOP/s fp16, 1 TFLOP/s fp32; SFU
0.1 T/s; DRAM 1 TB/s (32 B sectors); L2 4 MiB at 4 TB/s; SMEM 96 KiB per SM; links 100 GB/s,
1 µs; network 10 GB/s, 5 µs; 8 devices per node. ``IDEAL`` defaults make it a pure roofline.
"""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel.efficiency import IDEAL
from perfmodel.hardware import Hardware

# the A100 spec's idle DRAM round trip (gpu-benches' stream ramp, 0.341 us) x the shipped dram_latency_scale (2)
A100_DRAM_LATENCY_S = 0.341e-6 * 2.0


def ideal(toy: Hardware, op: dict[str, object]) -> perfmodel.Cost:
    return perfmodel.predict(toy, op, defaults=IDEAL)


def test_elementwise_is_dram_bound(toy: Hardware) -> None:
    """2 fp16 inputs, 1 output, 2^20 elements: 3 x 2^20 x 2 B = 6,291,456 B / 1e12 B/s = 6.291 µs.

    Compute 2^20 FLOPs / 2e12 = 0.52 µs; L2 6.29 MB / 4e12 = 1.57 µs. Bound: DRAM.
    """
    cost = ideal(toy, {"kind": "elementwise", "shape": [1024, 1024], "inputs": 2, "dtype": "fp16"})
    assert cost.time_s == pytest.approx(6_291_456 / 1e12)
    assert cost.bound == "DRAM"
    assert cost.bytes_by_level["DRAM"] == 6_291_456
    assert cost.time_s_by_engine["vector"] == pytest.approx(2**20 / 2e12)


def test_square_gemm_reaches_the_matrix_peak(toy: Hardware) -> None:
    """1024^3 fp16: 2 x 1024^3 = 2.147e9 FLOPs / 8e12 = 268.4 µs.

    128x128 tiles: 64 tiles; SMEM per tile (128+128) x 32 x 2 B x 3 stages = 48 KiB, 2 resident
    per SM, 8 slots, 8 waves x 2 x (32 K-steps x 2·128·128·32 / 2e12 per SM = 16.78 µs) = 268.4 µs:
    quantization is perfect, so the time is the ideal compute time. Split-K only adds a reduction.
    """
    cost = ideal(toy, {"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp16"})
    assert cost.time_s == pytest.approx(2 * 1024**3 / 8e12)
    assert cost.bound == "tensor"
    assert cost.schedule["split_k"] == 1


def test_tile_quantization_pads_m(toy: Hardware) -> None:
    """m = 100: the compact space's tiles (32, 64, 128, 256 rows) all pad M to 128:
    2·128·1024·1024 / 8e12 = 33.55 µs, 28 % over the unpadded 26.2 µs. The full search finds
    16-row tiles: 7 x 16 = 112 rows, 2·112·1024·1024 / 8e12 = 29.36 µs (12 % over)."""
    op = {"kind": "matmul", "m": 100, "n": 1024, "k": 1024, "dtype": "fp16"}
    compact = perfmodel.predict(toy, op, defaults=IDEAL, space="compact")
    assert compact.time_s == pytest.approx(2 * 128 * 1024 * 1024 / 8e12)
    searched = perfmodel.predict(toy, op, defaults=IDEAL)
    assert searched.time_s == pytest.approx(2 * 112 * 1024 * 1024 / 8e12)
    assert searched.flops == 2 * 100 * 1024 * 1024


def test_fp32_gemm_falls_back_to_the_vector_engine(toy: Hardware) -> None:
    """The toy's tensor cores have no fp32: 2·512^3 = 268.4 MFLOP on simt at 1e12 (tiles 128x128:
    16 tiles, SMEM (256 x 16 x 4 x 3 = 48 KiB) 2 per SM, 8 slots, 2 waves x 2 x 16.8 µs) = 268 µs."""
    cost = ideal(toy, {"kind": "matmul", "m": 512, "n": 512, "k": 512, "dtype": "fp32"})
    assert cost.time_s == pytest.approx(2 * 512**3 / 1e12)
    assert cost.bound == "simt"
    assert any("no matrix path for fp32" in note for note in cost.notes)


def test_rmsnorm_toy(toy: Hardware) -> None:
    """rmsnorm [1024, 1024] fp16: x read 2 MiB + y written 2 MiB + weight 2 KiB + rstd 4 KiB
    = 4,200,448 B / 1e12 = 4.200 µs; compute 4 x 2^20 / 2e12 = 2.1 µs. Bound DRAM."""
    cost = ideal(toy, {"kind": "rmsnorm", "shape": [1024, 1024], "dtype": "fp16"})
    assert cost.bytes_by_level["DRAM"] == 4_200_448
    assert cost.time_s == pytest.approx(4_200_448 / 1e12)


def test_embedding_rows_move_in_whole_sectors(toy: Hardware) -> None:
    """1000 rows of 8 fp16 = 16 B each, read as 32 B sectors: 32,000 B + 8,000 B int64 indices
    + 16,000 B contiguous output = 56,000 B / 1e12 = 56 ns."""
    cost = ideal(toy, {"kind": "embedding", "num_embeddings": 50000, "embedding_dim": 8,
                       "num_indices": 1000, "dtype": "fp16"})
    assert cost.bytes_by_level["DRAM"] == 56_000
    assert cost.time_s == pytest.approx(56e-9)


def test_contiguous_reshape_is_free(toy: Hardware) -> None:
    """A contiguous reshape is a view: no bytes, no kernel, zero time."""
    cost = perfmodel.predict(toy, {"kind": "reshape", "shape": [64, 64], "new_shape": [4096], "dtype": "fp32"})
    assert cost.time_s == 0.0
    assert cost.bound == "none"


def test_allreduce_ring_within_a_node(toy: Hardware) -> None:
    """1 GB over 8 devices (NCCL's model, IDEAL: no base latencies, the spec's 1 µs hops): ring Simple
    2·7/8·1e9/1e11 + 2·7·1 µs = 17.514 ms; tree Simple (a chain in the node): bus 1e11·0.92, algorithm
    bandwidth half of it, 1e9/4.6e10 + 2·7·1 µs = 21.753 ms; auto takes the ring."""
    cost = ideal(toy, {"kind": "allreduce", "bytes": 1e9, "devices": 8})
    assert cost.time_s == pytest.approx(0.0175 + 14e-6)
    assert cost.bound == "interconnect"
    tree = ideal(toy, {"kind": "allreduce", "bytes": 1e9, "devices": 8, "algorithm": "tree"})
    assert tree.time_s == pytest.approx(1e9 / 4.6e10 + 14e-6)


def test_allreduce_across_two_nodes(toy: Hardware) -> None:
    """16 devices, 8 per node, one 10 GB/s NIC per device: NCCL's ring spans both nodes, its channels
    spread over the 8 NICs, so the bus bandwidth is min(1e11, 8·1e10) = 8e10: 2·15/16·1e9/8e10 = 23.4375 ms;
    30 steps, 2·2 of them across nodes: 26·1 µs + 4·5 µs, x1.4 for NCCL's "plateau effect of ring" (a Simple ring
    all-reduce across nodes, compute capability >= 8.0). Total 23.5019 ms. The tree on two nodes carries the buffer
    once each way over a node's links (docs/model.md), so its network share is 2·8e10 and the links bound it: bus
    min(1e11, 1.6e11)·0.92, half of it, 1e9/4.6e10 + 2·(7·1 µs + 1·5 µs) = 21.7631 ms: auto takes the tree."""
    ring = ideal(toy, {"kind": "allreduce", "bytes": 1e9, "devices": 16, "algorithm": "ring"})
    assert ring.time_s == pytest.approx(2 * 15 / 16 * 1e9 / 8e10 + (26e-6 + 20e-6) * 1.4)
    cost = ideal(toy, {"kind": "allreduce", "bytes": 1e9, "devices": 16})
    assert cost.time_s == pytest.approx(1e9 / 4.6e10 + 2 * (7e-6 + 5e-6))


def test_launch_floor_dominates_tiny_ops(toy: Hardware) -> None:
    """With the default model, a 6 KiB add (1024 fp16 x 3 tensors) costs the 2 µs kernel
    overhead plus 0.6 µs DRAM latency plus 6 ns of transfer; all 256 threads' 24 B are in flight
    at once (one round trip): 2.606 µs, bound 'latency'."""
    cost = perfmodel.predict(toy, {"kind": "elementwise", "shape": [1024], "inputs": 2, "dtype": "fp16"})
    assert cost.bound == "latency"
    assert 2.6e-6 < cost.time_s < 2.7e-6


def test_rmsnorm_a100_scalar_rows() -> None:
    """rmsnorm [8192, 8192] fp16, scalar row loop (vector_width 1), nvidia-a100-sxm4-80gb.

    Bytes: x 134,217,728 + y 134,217,728 + weight 16,384 + rstd 32,768 = 268,484,608 B.
    DRAM first-byte latency: the spec's idle round trip 0.341 µs (gpu-benches) x dram_latency_scale 2 =
    0.682 µs. Bandwidth roof: 0.682 µs + 268,484,608 / (2.039e12 x 0.87) = 152.03 µs.
    Little's law: one 1024-thread block per row, 108 SMs x 2048 resident threads = 221,184
    threads, each with 2 B loaded + 2 B stored in flight: F = 884,736 B, demand F / 0.682 µs
    = 1.2973 TB/s. Latency grows to 3x at full bandwidth (a = 2): achieved bw solves
    2/BW·bw² + bw − 1.2973e12 = 0 -> bw = (sqrt(1 + 8 x 1.2973/2.039) − 1) x 2.039e12 / 4
    = 748.2 GB/s. After the first round trip (0.682 µs) the other 267,599,872 B take 357.7 µs.
    Plus the 2 µs kernel overhead: 360.3 µs, bound by HBM (Vidur measured ~420 µs).
    """
    op = {"kind": "rmsnorm", "shape": [8192, 8192], "dtype": "fp16", "vector_width": 1}
    cost = perfmodel.predict("nvidia-a100-sxm4-80gb", op)
    latency = A100_DRAM_LATENCY_S
    demand = 884_736 / latency
    achieved = ((1 + 8 * demand / 2.039e12) ** 0.5 - 1) * 2.039e12 / 4
    expected = 2e-6 + latency + (268_484_608 - 884_736) / achieved
    assert achieved == pytest.approx(748.2e9, rel=1e-3)
    assert expected == pytest.approx(360.3e-6, rel=1e-3)
    assert cost.time_s == pytest.approx(expected, rel=1e-9)
    assert cost.bound == "HBM2e"


def test_warm_single_row_rmsnorm_is_bound_by_l2_round_trips() -> None:
    """One 8192-wide fp16 row, warm cache, on nvidia-a100-sxm4-80gb: 49,156 B (x, y, weight 16,384 each,
    rstd 4) fit the 40 MiB L2, so L2 serves them, but one 1024-thread block keeps only 1024 x 4 B = 4,096 B
    in flight: demand 4,096 B / 0.3 µs (L2 latency) = 13.65 GB/s against 7.219 TB/s, achieved bw solves
    2/BW·bw² + bw − demand = 0 (13.60 GB/s). After the first round trip the other 45,060 B take 3.31 µs:
    2 µs overhead + 0.3 µs + 3.31 µs = 5.61 µs, bound by L2 (cold: the same chain at DRAM's 0.682 µs, ~10 µs;
    Vidur measured 8 µs for a one-token 8192-wide rms_norm on the A100, 6 µs on the A40).
    """
    op = {"kind": "rmsnorm", "shape": [1, 8192], "dtype": "fp16", "vector_width": 1}
    warm = perfmodel.predict("nvidia-a100-sxm4-80gb", op, warm_cache=True)
    cold = perfmodel.predict("nvidia-a100-sxm4-80gb", op)
    demand = 4_096 / 0.3e-6
    achieved = ((1 + 8 * demand / 7.219e12) ** 0.5 - 1) * 7.219e12 / 4
    assert warm.time_s == pytest.approx(2e-6 + 0.3e-6 + (49_156 - 4_096) / achieved, rel=1e-9)
    assert warm.bound == "L2" and warm.bytes_by_level["HBM2e"] == 0.0
    assert cold.time_s > warm.time_s > 5e-6  # not a 49 kB / 7.2 TB/s = 7 ns stream: the row loop's round trips


def test_warm_cache_beyond_the_l2_keeps_the_share_of_it_the_l2_holds() -> None:
    """The 8192 x 8192 rmsnorm above (W = 268,484,608 B: x, y, γ, stats) does not fit the L2. Warm, the L2 holds
    the part of it that fits the share a working set can count on (half of 40 MiB): h = 20,971,520 / W = 7.8 % of
    its loads hit at L2's 0.3 µs, the rest go to HBM at 0.682 µs (0.341 µs idle x 2), loaded. Little's law over
    the mixed round trip, L = h·Lc·(1 + 2h·bw/BWc) + (1−h)·L0·(1 + 2(1−h)·bw/BW), with 221,184 threads x 4 B in
    flight; 2 µs overhead + first round trip + the rest at that rate. Bound by HBM, 6 % under the cold time (it once
    took L2's latency for the whole stream: 209 µs, 37 % faster; then nothing at all beyond half the L2).
    """
    op = {"kind": "rmsnorm", "shape": [8192, 8192], "dtype": "fp16", "vector_width": 1}
    warm = perfmodel.predict("nvidia-a100-sxm4-80gb", op, warm_cache=True)
    cold = perfmodel.predict("nvidia-a100-sxm4-80gb", op)
    w = 2 * 8192 * 8192 * 2 + 8192 * 2 + 8192 * 4
    h = 41_943_040 * 0.5 / w
    flight = 221_184 * 4
    lin = h * 0.3e-6 + (1 - h) * A100_DRAM_LATENCY_S
    quad = 2 * (h * h * 0.3e-6 / 7.219e12 + (1 - h) ** 2 * A100_DRAM_LATENCY_S / 2.039e12)
    bw = 2 * flight / (lin + (lin * lin + 4 * quad * flight) ** 0.5)
    assert warm.time_s == pytest.approx(2e-6 + lin + (w - flight) / bw, rel=1e-9)
    assert warm.bound == "HBM2e" and warm.bytes_by_level["HBM2e"] == pytest.approx(w * (1 - h), rel=1e-12)
    assert 0.9 * cold.time_s < warm.time_s < cold.time_s


def test_decode_gemv_h100_is_weight_bandwidth_bound() -> None:
    """m=1, n=k=8192 bf16 on nvidia-h100-sxm5-80gb: weights 8192² x 2 = 134.2 MB dominate.

    DRAM time >= 134,217,728 B / 3.35e12 B/s = 40.1 µs at the datasheet roof; with the sustained
    fraction 0.87 and latency the model must land between 40 µs and 60 µs, bound by HBM.
    """
    cost = perfmodel.predict("nvidia-h100-sxm5-80gb", {"kind": "matmul", "m": 1, "n": 8192, "k": 8192,
                                                       "dtype": "bf16"})
    assert cost.bound.startswith("HBM")
    assert 40e-6 < cost.time_s < 60e-6


def test_a_stream_takes_the_stream_dram_share_and_a_gemm_does_not(toy: Hardware) -> None:
    """``stream_dram_efficiency`` 0.5 on the ideal toy: the 6,291,456 B add streams at 0.5 TB/s, 12.58 µs (twice
    the ideal 6.291 µs); the 1024^3 fp16 GEMM keeps its ideal 268.4 µs (its tiles take ``dram_efficiency``); left
    None, a stream takes ``dram_efficiency`` as before."""
    import dataclasses

    half = dataclasses.replace(IDEAL, stream_dram_efficiency=0.5)
    add = {"kind": "elementwise", "shape": [1024, 1024], "inputs": 2, "dtype": "fp16"}
    gemm = {"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp16"}
    assert perfmodel.predict(toy, add, defaults=half).time_s == pytest.approx(2 * 6_291_456 / 1e12)
    assert perfmodel.predict(toy, gemm, defaults=half).time_s == pytest.approx(ideal(toy, gemm).time_s)
    assert IDEAL.stream_dram == IDEAL.dram_efficiency == 1.0
