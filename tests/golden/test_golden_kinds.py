"""One golden case per op kind, worked on paper, on the toy device and on a real one.

Pure roofline (``IDEAL`` defaults: no overheads or latencies, every peak reached) so the
arithmetic fits in a comment. Toy device: tensor 8 TFLOP/s fp16, vector 2 TFLOP/s fp16/bf16 and
1 TFLOP/s fp32, SFU 1e11/s, DRAM 1 TB/s with 32 B sectors, 4 SMs, links 100 GB/s with 1 µs
steps. Real device: nvidia-h100-sxm5-80gb from its spec: HBM3 3.35 TB/s, SFU 3.865e12/s,
NVLink 450 GB/s per direction, 8 per node, 50 GB/s network per GPU.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.efficiency import IDEAL
from perfmodel.hardware import Hardware

TOY_CASES: list[tuple[dict[str, Any], float, str, str]] = [
    # conv2d 8x64x32x32, 64 filters 3x3, pad 1: 2·8·64·32·32·64·9 = 603,979,776 FLOPs / 8e12;
    # implicit GEMM 8192 x 64 x 576 tiles evenly (128x64: 64 tiles, 16 per SM, 18 K-steps).
    ({"kind": "conv2d", "batch": 8, "in_channels": 64, "out_channels": 64, "height": 32, "width": 32,
      "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp16"}, 603_979_776 / 8e12, "tensor",
     "compute-bound implicit GEMM"),
    # the same conv as cuDNN's non-fused Winograd F(4x4, 3x3): 8 x 8 x 8 = 512 tiles of 6x6; 36 GEMMs of
    # 512 x 64 x 64 = 2·36·512·64·64 = 150,994,944 FLOPs / 8e12 = 18.874 µs; then the transforms' own
    # kernels stream x (524,288 B) + w (73,728) + y (524,288) + 36 x (512·64 + 64·64 + 512·64) x 2 B
    # (5,013,504) = 7,184,384 B / 1e12 = 7.184 µs, after the GEMMs.
    ({"kind": "conv2d", "batch": 8, "in_channels": 64, "out_channels": 64, "height": 32, "width": 32,
      "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp16", "algorithm": "winograd_nonfused"},
     150_994_944 / 8e12 + 7_184_384 / 1e12, "tensor", "non-fused Winograd: GEMMs plus transform streams"),
    # attention 1x4 heads x 256 x 256 x 64: 2·4·256·256·(64+64) = 67,108,864 / 8e12 = 8.389 µs;
    # exp 262,144 / 1e11 = 2.621 µs; fp32 instructions (scale, max, sum, half a cvt: 3.5 per score, and the O
    # rescale 256·64 per 256 x 256 tile pair, one per head) 3.5 x 262,144 + 4 x 16,384 = 983,040 at half the 1e12
    # FLOP/s = 1.966 µs; one CTA per head on each of the 4 SMs first streams its Q tile from DRAM, 4 x 32,768 B /
    # 1e12, and its KV tile from the L2, 4 x 65,536 B / 4e12 (0.197 µs); bytes 528,384 / 1e12 = 0.5 µs.
    # The toy's MMA is synchronous (no mma_scope: mma.sync), so FlashAttention-2 runs MMA and softmax in turn.
    ({"kind": "attention", "batch": 1, "heads": 4, "seq_q": 256, "seq_kv": 256, "head_dim": 64,
      "dtype": "fp16"}, 67_108_864 / 8e12 + 262_144 / 1e11 + 983_040 / 5e11 + 131_072 / 1e12 + 262_144 / 4e12,
     "tensor",
     "flash attention (FA2: MMA then softmax), compute-bound"),
    # layernorm [64, 4096] fp32: x + y 2 x 1,048,576, gamma+beta 32,768, mean+rstd 512 = 2,130,432 B
    # / 1e12 = 2.130 µs > 8 x 262,144 / 1e12 = 2.097 µs of vector work.
    ({"kind": "layernorm", "shape": [64, 4096], "dtype": "fp32"}, 2_130_432 / 1e12, "DRAM", ""),
    # batchnorm [256, 1024] fp16 inference: x + y 2 x 524,288 + 4 params x 2,048 = 1,056,768 B.
    ({"kind": "batchnorm", "shape": [256, 1024], "dtype": "fp16"}, 1_056_768 / 1e12, "DRAM", ""),
    # softmax [512, 1024] fp16: one exp per element, 524,288 / 1e11 = 5.243 µs > 2,097,152 B / 1e12.
    ({"kind": "softmax", "shape": [512, 1024], "dtype": "fp16"}, 524_288 / 1e11, "sfu", "SFU-bound"),
    # reduce [1024, 1024] fp32 over axis 1: 4,194,304 B read + 4,096 B written.
    ({"kind": "reduce", "shape": [1024, 1024], "axes": [1], "dtype": "fp32"}, 4_198_400 / 1e12, "DRAM", ""),
    # transpose [1024, 1024] fp16: read + write 2 x 2,097,152 B.
    ({"kind": "transpose", "shape": [1024, 1024], "perm": [1, 0], "dtype": "fp16"}, 4_194_304 / 1e12, "DRAM", ""),
    # gather 1000 rows of 64 fp32 (256 B, whole sectors): 256,000 + 8,000 int64 indices + 256,000 out.
    ({"kind": "gather", "table_shape": [10000, 64], "num_indices": 1000, "dtype": "fp32"}, 520_000 / 1e12,
     "DRAM", ""),
    # scatter-add 1000 rows of 4 fp32 (16 B -> a 32 B sector, read and written): 16,000 updates +
    # 8,000 indices + 2 x 32,000 = 88,000 B.
    ({"kind": "scatter", "table_shape": [10000, 4], "num_indices": 1000, "dtype": "fp32", "reduce": "add"},
     88_000 / 1e12, "DRAM", ""),
    # embedding_bag: 1000 lookups of 24-element fp16 rows (48 B -> 64 B in 32 B sectors) into 100 bags, unweighted:
    # rows 64,000 + indices 8,000 + offsets 101 x 8 = 808 + pooled fp32 output 100 x 24 x 4 = 9,600 -> 82,408 B.
    ({"kind": "embedding_bag", "num_indices": 1000, "embedding_dim": 24, "num_bags": 100, "dtype": "fp16"},
     82_408 / 1e12, "DRAM", "pooled lookup: whole-sector row gathers"),
    # its fused backward with a row-wise optimizer (4 B of state per row, one 32 B sector), 2 sort passes: rows read
    # and written 2 x 64,000 + state 2 x 32,000 + indices 8,808 + sort 2 x 2 x 1000 x 12 = 48,000 + the bags'
    # fp32 gradient rows (96 B, three sectors) 1000 x 96 = 96,000 -> 344,808 B.
    ({"kind": "embedding_bag", "num_indices": 1000, "embedding_dim": 24, "num_bags": 100, "dtype": "fp16",
      "pass": "backward", "sort_passes": 2, "state_bytes_per_row": 4}, 344_808 / 1e12, "DRAM",
     "fused backward: sort, gradient rows, row updates"),
    # quantize [1024, 1024] bf16 -> int8, groups of 128: 2,097,152 + 1,048,576 + 8,192 fp32 scales x 4 B.
    ({"kind": "quantize", "shape": [1024, 1024], "from_dtype": "bf16", "to_dtype": "int8",
      "granularity": "group"}, 3_178_496 / 1e12, "DRAM", ""),
    # dequantize [1024, 1024] int4 -> bf16, per row: 524,288 + 2,097,152 + 1,024 scales x 4 B.
    ({"kind": "dequantize", "shape": [1024, 1024], "from_dtype": "int4", "to_dtype": "bf16",
      "granularity": "channel"}, 2_625_536 / 1e12, "DRAM", ""),
    # all-gather / reduce-scatter / all-to-all of 1 GB over 8 devices: 7/8 x 1e9 / 1e11 + 7 x 1 µs.
    ({"kind": "allgather", "bytes": 1e9, "devices": 8}, 0.00875 + 7e-6, "interconnect", ""),
    ({"kind": "reducescatter", "bytes": 1e9, "devices": 8}, 0.00875 + 7e-6, "interconnect", ""),
    ({"kind": "alltoall", "bytes": 1e9, "devices": 8}, 0.00875 + 7e-6, "interconnect", ""),
]


@pytest.mark.parametrize(("op", "expected_s", "bound", "why"), TOY_CASES,
                         ids=[case[0]["kind"] for case in TOY_CASES])
def test_toy(toy: Hardware, op: dict[str, Any], expected_s: float, bound: str, why: str) -> None:
    cost = perfmodel.predict(toy, op, defaults=IDEAL)
    assert cost.time_s == pytest.approx(expected_s, rel=1e-9), why
    assert cost.bound == bound


H100 = "nvidia-h100-sxm5-80gb"
H100_CASES: list[tuple[dict[str, Any], float, str]] = [
    # softmax [4096, 4096] bf16: rows over 1,024 run PyTorch's block softmax, x read three times and y written:
    # 4 x 33,554,432 B / 3.35e12 = 40.07 µs > 16.8M exps / 3.865e12 = 4.3 µs.
    ({"kind": "softmax", "shape": [4096, 4096], "dtype": "bf16"}, 134_217_728 / 3.35e12, "HBM3"),
    # layernorm [8192, 8192] bf16: 2 x 134,217,728 + 32,768 + 65,536 = 268,533,760 B / 3.35e12.
    ({"kind": "layernorm", "shape": [8192, 8192], "dtype": "bf16"}, 268_533_760 / 3.35e12, "HBM3"),
    # embedding 4096 x 4096 bf16 rows (8192 B): 33,554,432 read + 32,768 indices + 33,554,432 out.
    ({"kind": "embedding", "num_embeddings": 128256, "embedding_dim": 4096, "num_indices": 4096,
      "dtype": "bf16"}, 67_141_632 / 3.35e12, "HBM3"),
    # all-reduce 1 GB on 8 GPUs: the NVSwitch reduces in the network (NCCL's NVLS), algorithm bandwidth
    # 5/6 of the bus: 1e9 / (450e9 x 5/6) = 2.667 ms (ring 2 x 7/8 x 1e9 / 450e9 = 3.889 ms).
    ({"kind": "allreduce", "bytes": 1e9, "devices": 8}, 1e9 / (450e9 * 5 / 6), "interconnect"),
    # all-gather 1 GB on 16 GPUs (2 nodes): NCCL's ring over both nodes, its channels on the 8 NICs of a
    # node: bus bandwidth min(450e9, 8 x 50e9) = 400e9; 15/16 x 1e9 / 400e9 = 2.344 ms.
    ({"kind": "allgather", "bytes": 1e9, "devices": 16}, 15 / 16 * 1e9 / 400e9, "interconnect"),
    # matmul 8192^3 bf16 from the compact space (CUTLASS tiles, BK 32, 3 stages). 256x256 tiles
    # need 256 KiB of fp32 accumulators (x2 with operands): more than the 256 KiB register file.
    # 256x128, BK 32, 3 stages: 2048 tiles, 16 on the
    # busiest of 132 SMs, 256 K-steps each. Per step: tensor 2·256·128·32 / (989.4e12/132) =
    # 0.2798 µs; SMEM, wgmma's 2 warpgroups split M and each reads all of B: (256 + 2·128) x 32 x 2 B =
    # 32,768 B / (30.92e12/132) = 0.1399 µs; L2, a 2-CTA cluster multicasts each B tile (TMA):
    # (256 + 128/2) x 32 x 2 B = 20,480 B / (3 x 3.35e12 / 132, the L2 default) = 0.2690 µs: tensor-bound.
    # 16 x 256 x 0.2798 µs = 1.1460 ms (Ampere-style loads, 24,576 B a step, would be L2-fed: 1.3221 ms).
    ({"kind": "matmul", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"},
     16 * 256 * 2 * 256 * 128 * 32 / (989.4e12 / 132), "tensor"),
]


@pytest.mark.parametrize(("op", "expected_s", "bound"), H100_CASES, ids=[c[0]["kind"] for c in H100_CASES])
def test_h100(op: dict[str, Any], expected_s: float, bound: str) -> None:
    cost = perfmodel.predict(H100, op, defaults=IDEAL, space="compact")
    assert cost.time_s == pytest.approx(expected_s, rel=1e-9)
    assert cost.bound == bound


def test_nonfused_winograd_backward_runs_both_gradients_on_tiles(toy: Hardware) -> None:
    """Backward of the non-fused Winograd conv above: data gradient 36 x (512 dx tiles x 64 x 64), weight gradient
    36 x (64 x 64 x 512 tiles), 2 x 150,994,944 FLOPs; transforms x + w + y for the data-gradient pass and again
    for the weight gradient (2 x 1,122,304 B), plus 36 x 2 B x (512·128 + 64·64) for each of the two
    (10,027,008 B): 12,271,616 B after the GEMMs. The fused Winograd keeps an implicit-GEMM weight gradient."""
    conv = {"kind": "conv2d", "batch": 8, "in_channels": 64, "out_channels": 64, "height": 32, "width": 32,
            "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp16", "pass": "backward"}
    nonfused = perfmodel.predict(toy, {**conv, "algorithm": "winograd_nonfused"}, defaults=IDEAL)
    assert nonfused.flops_by_engine["matrix"] == 2 * 150_994_944
    gemms_s = sum(perfmodel.predict(toy, {"kind": "matmul", "batch": 36, "m": m, "n": 64, "k": k, "dtype": "fp16"},
                                    defaults=IDEAL).time_s for m, k in ((512, 64), (64, 512)))
    assert gemms_s + 12_271_616 / 1e12 <= nonfused.time_s <= 1.05 * (gemms_s + 12_271_616 / 1e12)
    fused = perfmodel.predict(toy, {**conv, "algorithm": "winograd"}, defaults=IDEAL)
    direct = 2 * 8 * 64 * 32 * 32 * 64 * 9  # the implicit-GEMM weight gradient: the forward's FLOPs
    assert fused.flops_by_engine["matrix"] == 2 * 16 * (8 * 16 * 16) * 64 * 64 + direct



def test_first_layer_data_gradient_runs_onto_columns(toy: Hardware) -> None:
    """Backward of a first layer (C = 1, 64 filters 5x5, pad 2, 8 x 32 x 32, fp16): the data gradient is dy x W^T,
    NPQ x C·R·S x K = 8192 x 25 x 64, its columns (8192 x 25 x 2 B, written and read: 819,200 B) scatter-added
    into dx after the GEMMs; the weight gradient is K x C·R·S x NPQ = 64 x 25 x 8192. The implicit GEMM it
    replaces, 8192 x 1 x 1600, would fill one column of every tile."""
    conv = {"kind": "conv2d", "batch": 8, "in_channels": 1, "out_channels": 64, "height": 32, "width": 32,
            "kernel_h": 5, "kernel_w": 5, "padding": 2, "dtype": "fp16", "pass": "backward"}
    cost = perfmodel.predict(toy, conv, defaults=IDEAL)
    assert cost.flops_by_engine["matrix"] == 2 * (2 * 8 * 32 * 32 * 64 * 25)
    gemms_s = sum(perfmodel.predict(toy, {"kind": "matmul", "m": m, "n": 25, "k": k, "dtype": "fp16"},
                                    defaults=IDEAL).time_s for m, k in ((8192, 64), (64, 8192)))
    assert gemms_s + 819_200 / 1e12 <= cost.time_s <= 1.05 * (gemms_s + 819_200 / 1e12)
    narrow = perfmodel.predict(toy, {"kind": "matmul", "m": 8192, "n": 1, "k": 1600, "dtype": "fp16"}, defaults=IDEAL)
    assert cost.time_s < narrow.time_s


@pytest.mark.parametrize(("hardware", "dtype", "layout", "x_read"), [
    ("nvidia-h100-sxm5-80gb", "fp16", "nhwc", 8 * 64 * 32 * 32 * 2 / 4),  # every other row and pixel
    ("nvidia-p100-sxm2-16gb", "fp32", "nchw", 8 * 64 * 32 * 32 * 4 / 2)])  # every other row; columns share sectors
def test_strided_1x1_convolution_reads_only_the_pixels_it_touches(hardware: str, dtype: str, layout: str,
                                                                  x_read: float) -> None:
    """1x1 stride 2, 8 x 64 -> 64 channels, 32 x 32 -> 16 x 16: DRAM moves the touched share of x, y and w once
    (a 3x3 filter at stride 2 reaches every row: all of x)."""
    elem = 2 if dtype == "fp16" else 4
    conv = {"kind": "conv2d", "batch": 8, "in_channels": 64, "out_channels": 64, "height": 32, "width": 32,
            "kernel_h": 1, "kernel_w": 1, "stride": 2, "dtype": dtype, "layout": layout}
    y, w = 8 * 64 * 16 * 16 * elem, 64 * 64 * elem
    cost = perfmodel.predict(hardware, conv, defaults=IDEAL)
    assert sum(v for k, v in cost.bytes_by_level.items() if k.startswith(("HBM", "DRAM"))) == x_read + y + w
    wide = perfmodel.predict(hardware, {**conv, "kernel_h": 3, "kernel_w": 3, "padding": 1}, defaults=IDEAL)
    assert sum(v for k, v in wide.bytes_by_level.items() if k.startswith(("HBM", "DRAM"))) >= 8 * 64 * 32 * 32 * elem


@pytest.mark.parametrize(("algorithm", "height", "frequencies", "tiles"), [
    ("fft", 14, 16 * 9, 1),  # padded 16 x 16 (2^4): F = 16 x (16/2 + 1)
    ("fft", 47, 49 * 25, 1),  # padded 49 = 7^2, a fast cuFFT size
    ("fft_tiling", 40, 32 * 17, 4)])  # 32 x 32 tiles of 30 outputs each: 2 x 2 per plane
def test_fft_convolution_runs_transforms_and_complex_gemms(algorithm: str, height: int, frequencies: int,
                                                            tiles: int) -> None:
    """2 x 4 -> 8 channels, 3x3, pad 1, fp32: x, y and w become 2·tiles·(4 + 8) + 8·4 spectra of F complex values;
    the complex GEMMs (N·tiles x K x C per frequency, 4 real multiply-adds each) make 8·F·N·tiles·K·C FLOPs;
    each transform (2.5 n log2 n FLOPs on n = T_h·T_w points) writes its spectrum (8 B per value) and the GEMMs
    read it back, after them."""
    conv = {"kind": "conv2d", "batch": 2, "in_channels": 4, "out_channels": 8, "height": height, "width": height,
            "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp32", "algorithm": algorithm}
    cost = perfmodel.predict(H100, conv, defaults=IDEAL)
    planes = 2 * tiles * (4 + 8) + 8 * 4
    assert cost.flops_by_engine["matrix"] == 8 * frequencies * 2 * tiles * 8 * 4
    side = {14: 16, 47: 49, 40: 32}[height]
    assert cost.flops_by_engine["vector"] == pytest.approx(2.5 * side * side * np.log2(side * side) * planes)
    x, w, y = 2 * 4 * height * height * 4, 8 * 4 * 9 * 4, 2 * 8 * height * height * 4
    assert cost.bytes_by_level["HBM3"] >= x + w + y + 2 * 8 * frequencies * planes
    backward = perfmodel.predict(H100, {**conv, "pass": "backward"}, defaults=IDEAL)
    assert backward.flops_by_engine["matrix"] == 2 * cost.flops_by_engine["matrix"]


def test_nonfused_winograd_on_a_small_map_is_bound_by_its_transform_streams() -> None:
    """T4, fp32, 512 -> 512 channels on 8 maps of 7x7: the filter transform alone writes 36 x 512 x 512 x 4 B =
    37.7 MB, more than the GEMMs (2·36·32·512·512 = 604 MFLOP on 8.1 TFLOP/s of CUDA cores) take: DRAM-bound,
    and the streams' time is added to the GEMMs'."""
    conv = {"kind": "conv2d", "batch": 8, "in_channels": 512, "out_channels": 512, "height": 7, "width": 7,
            "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp32", "algorithm": "winograd_nonfused"}
    cost = perfmodel.predict("nvidia-t4", conv)
    implicit = perfmodel.predict("nvidia-t4", {**conv, "algorithm": "implicit_gemm"})
    x = y = 8 * 512 * 49 * 4
    streams = x + 512 * 512 * 9 * 4 + y + 36 * 4 * (32 * 512 * 2 + 512 * 512)
    assert cost.bound == "GDDR6" and implicit.bound != "GDDR6"
    assert cost.bytes_by_level["GDDR6"] >= streams
    assert cost.time_s >= cost.time_s_by_engine["matrix"] + streams / 320e9


@pytest.mark.parametrize(("hardware", "dtype", "converts"), [
    (H100, "fp16", True), ("nvidia-a100-sxm4-80gb", "fp32", False), ("nvidia-p100-sxm2-16gb", "fp16", False),
    ("amd-mi300x", "fp16", False)])
def test_nchw_convolutions_on_nvidia_tensor_cores_convert_to_nhwc_first(hardware: str, dtype: str,
                                                                          converts: bool) -> None:
    """cuDNN's tensor-core kernels read NHWC: an NCHW input and filter are converted first (nchwToNhwcKernel,
    twice per conv in the A100 AlexNet trace), each read and written once: 2 x (x + w) bytes at DRAM rate after
    the GEMM. 8x64x56x56 fp16: x = 3,211,264 B, w = 73,728 B. CUDA cores (fp32 on A100, P100) and MIOpen
    read NCHW as it is."""
    conv = {"kind": "conv2d", "batch": 8, "in_channels": 64, "out_channels": 64, "height": 56, "width": 56,
            "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": dtype}
    nchw = perfmodel.predict(hardware, conv, defaults=IDEAL)
    nhwc = perfmodel.predict(hardware, {**conv, "layout": "nhwc"}, defaults=IDEAL)
    elem = 2 if dtype == "fp16" else 4
    converted = 2 * elem * (8 * 64 * 56 * 56 + 64 * 64 * 9)
    hw = perfmodel.load_hardware(hardware)
    assert hw.dram.bandwidth_bytes_per_s is not None
    if converts:
        assert nchw.time_s - nhwc.time_s == pytest.approx(converted / hw.dram.bandwidth_bytes_per_s, rel=1e-9)
        assert nchw.bytes_by_level[hw.dram.name] - nhwc.bytes_by_level[hw.dram.name] == pytest.approx(converted)
    else:
        assert nchw.time_s == nhwc.time_s


def test_cudnn_simt_convolution_runs_its_fixed_128_row_tiles_without_split_k() -> None:
    """P100, fp32 (CUDA cores), 512 -> 512 channels 1x1 on 8 maps of 7x7: implicit GEMM M = 8·49 = 392, N = 512,
    K = 512. cuDNN's SIMT kernels tile 128 output pixels by 32, 64 or 128 channels and never split K
    (perfmodel/search/conv_space.py). 128x32: ⌈392/128⌉ x 512/32 = 4 x 16 = 64 CTAs on 56 SMs, so one SM runs
    two, one after the other: 2 x 512/16 K-steps x 2·128·32·16 FLOPs / (10.6e12 / 56 FLOP/s per SM) = 44.317 µs.
    128x64 (32 CTAs, one each: 32 steps of 2·128·64·16) takes the same; the tie goes to the smaller footprint.
    The same GEMM as a matmul is free to pick small tiles and runs in half the time."""
    conv = {"kind": "conv2d", "batch": 8, "in_channels": 512, "out_channels": 512, "height": 7, "width": 7,
            "kernel_h": 1, "kernel_w": 1, "dtype": "fp32"}
    cost = perfmodel.predict("nvidia-p100-sxm2-16gb", conv, defaults=IDEAL)
    by_hand = 2 * (512 / 16) * (2 * 128 * 32 * 16) / (10.6e12 / 56)
    assert cost.time_s == pytest.approx(by_hand, rel=1e-6)
    assert (cost.schedule["tile_m"], cost.schedule["split_k"], cost.schedule["tiles"]) == (128, 1, 64)
    matmul = perfmodel.predict("nvidia-p100-sxm2-16gb", {"kind": "matmul", "m": 392, "n": 512, "k": 512,
                                                         "dtype": "fp32"}, defaults=IDEAL)
    assert matmul.time_s < 0.6 * cost.time_s
    # tensor cores (V100 fp16, NHWC) run cuDNN's s884 kernels, which may split: the free search
    v100 = perfmodel.predict("nvidia-v100-sxm2-32gb", {**conv, "dtype": "fp16", "layout": "nhwc"}, defaults=IDEAL)
    assert v100.schedule["tile_m"] != 128 or v100.schedule["split_k"] > 1 or v100.schedule["tiles"] != 64


@pytest.mark.parametrize(("kernel", "stride", "dilation", "taps"), [
    (5, 2, 1, 3 * 3),  # ⌈5/2⌉ = 3 taps per axis land on each dx pixel
    (3, 2, 1, 2 * 2),
    (1, 2, 1, 1),  # 1x1 stride 2: one tap (or none: the zeros of the skipped pixels)
    (5, 1, 1, 5 * 5),  # no stride: every tap
    (3, 2, 2, 3 * 3),  # dilation 2 = stride: every tap lands on the same phase
])
def test_strided_data_gradient_reduces_over_the_taps_that_reach_each_pixel(kernel: int, stride: int, dilation: int,
                                                                           taps: int) -> None:
    """Data gradient of 16 x 64 -> 128 on 80 x 350 as the transposed convolution split into stride² phases: an
    implicit GEMM of N·H·W = 16·80·350 = 448,000 rows x C = 64 columns, reducing over K x the taps per dx pixel
    (128 x ``taps``), so its MACs match the forward's instead of stride² times them."""
    from perfmodel.ops import make_op

    op = make_op({"kind": "conv2d", "batch": 16, "in_channels": 64, "out_channels": 128, "height": 80,
                  "width": 350, "kernel_h": kernel, "kernel_w": kernel, "stride": stride, "dilation": dilation,
                  "padding": (kernel - 1) * dilation // 2, "dtype": "fp32", "pass": "backward"})
    work = type(op).work([op])
    assert (work.gemm_m[0, 1], work.gemm_n[0, 1], work.gemm_k[0, 1]) == (448_000, 64, 128 * taps)


def test_convolution_gemms_run_at_the_convolution_library_share_of_matrix_peak() -> None:
    """A convolution's GEMMs are cuDNN's/MIOpen's kernels: their compute time divides by peak x
    ``conv_matrix_efficiency``, a matmul's by peak x ``matrix_efficiency`` (docs/model.md section 5). V100 fp16
    NHWC 256 -> 256 3x3 (padding 1) on 64 maps of 56x56: the implicit GEMM M = 200,704, N = 256, K = 2,304; at a
    convolution share of 0.5 the schedule search sees half the peak, as it would with a GEMM share of 0.5 and none
    for convolutions given (None: the GEMM's): the same time to the bit; its tensor-core time is twice the ideal
    one (to the 1 % a different tile choice at half the peak may move it), the same GEMM as a matmul no longer."""
    conv = {"kind": "conv2d", "batch": 64, "in_channels": 256, "out_channels": 256, "height": 56, "width": 56,
            "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp16", "layout": "nhwc"}
    matmul = {"kind": "matmul", "m": 64 * 56 * 56, "n": 256, "k": 9 * 256, "dtype": "fp16"}
    half = dataclasses.replace(IDEAL, conv_matrix_efficiency=0.5)
    ideal = perfmodel.predict("nvidia-v100-sxm2-32gb", conv, defaults=IDEAL)
    slow = perfmodel.predict("nvidia-v100-sxm2-32gb", conv, defaults=half)
    assert slow.bound == "tensor"
    assert slow.time_s_by_engine["matrix"] == pytest.approx(2.0 * ideal.time_s_by_engine["matrix"], rel=0.01)
    assert perfmodel.predict("nvidia-v100-sxm2-32gb", matmul, defaults=half).time_s == pytest.approx(
        perfmodel.predict("nvidia-v100-sxm2-32gb", matmul, defaults=IDEAL).time_s, rel=1e-12)
    unset = dataclasses.replace(IDEAL, matrix_efficiency=0.5)
    assert perfmodel.predict("nvidia-v100-sxm2-32gb", conv, defaults=unset).time_s == slow.time_s


def test_tensor_core_data_gradient_runs_cudnn_tiles_without_split_k() -> None:
    """V100 fp16 NHWC, 512 -> 512 3x3 (padding 1) on 7x7 maps, backward: the data gradient is an implicit GEMM of
    M = N·49 rows, C = 512 columns, reducing over K·9 = 4,608. cuDNN's tensor-core data gradient (s884 128x128 /
    256x128 tiles) does not split the reduction (perfmodel/search/conv_space.py): 128x128 gives ⌈392/128⌉ x 4 = 16
    CTAs at 8 images and ⌈784/128⌉ x 4 = 28 at 16, both under the 80 SMs, each running all 144 K-steps, so the
    data gradient barely grows with the batch (DeepBench V100 fp16: 134 and 135 us). The same GEMM as a matmul, and
    the forward, split K and fill the device."""
    op = {"kind": "conv2d", "batch": 8, "in_channels": 512, "out_channels": 512, "height": 7, "width": 7,
          "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp16", "layout": "nhwc", "pass": "backward"}
    hw = "nvidia-v100-sxm2-32gb"
    eight = perfmodel.predict(hw, op, defaults=IDEAL)
    sixteen = perfmodel.predict(hw, {**op, "batch": 16}, defaults=IDEAL)
    for cost, ctas in ((eight, 16), (sixteen, 28)):  # the schedule shown is the first GEMM's: the data gradient
        assert (cost.schedule["tile_m"], cost.schedule["tile_n"]) == (128, 128)
        assert (cost.schedule["split_k"], cost.schedule["tiles"]) == (1, ctas)
    assert sixteen.time_s < 1.3 * eight.time_s  # twice the rows, the same K-steps per CTA (the wgrad doubles)
    matmul = perfmodel.predict(hw, {"kind": "matmul", "m": 392, "n": 512, "k": 4608, "dtype": "fp16"},
                               defaults=IDEAL)
    forward = perfmodel.predict(hw, {**op, "pass": "forward"}, defaults=IDEAL)
    assert matmul.schedule["split_k"] > 1 and forward.schedule["split_k"] > 1
    assert forward.time_s < 0.5 * eight.time_s


def test_cudnn_simt_weight_gradient_splits_its_128_row_tiles() -> None:
    """T4 fp32 (CUDA cores), 64 -> 64 1x1 on 16 maps of 112x112, backward: the weight gradient is K x C x N·P·Q =
    64 x 64 x 200,704. cuDNN's SIMT gradient kernels are 128-row tiles that split the reduction
    (``*_scudnn_128x128_stridedB_splitK_*``): one 128-row tile covers K = 64 twice over, so the split-K fills the SMs
    with half-empty tiles, where a free GEMM search would pick 64x64 ones."""
    from perfmodel.ops import make_op
    from perfmodel.search.conv_space import DATA_GRADIENT, WEIGHT_GRADIENT

    op = make_op({"kind": "conv2d", "batch": 16, "in_channels": 64, "out_channels": 64, "height": 112,
                  "width": 112, "kernel_h": 1, "kernel_w": 1, "dtype": "fp32", "pass": "backward"})
    work = type(op).work([op])
    assert list(work.gemm_simt_conv[0, 1:]) == [DATA_GRADIENT, WEIGHT_GRADIENT]  # slot 0, the forward: unused
    def matrix_s_per_flop(channels: int) -> float:
        cost = perfmodel.predict("nvidia-t4", {**op.to_dict(), "in_channels": channels, "out_channels": channels},
                                 defaults=IDEAL)
        return float(cost.time_s_by_engine["matrix"] / cost.flops_by_engine["matrix"])

    # 128 -> 128 fills every 128-row tile; 64 -> 64 runs its 64 x 64 weight gradient on half-empty ones
    assert matrix_s_per_flop(64) > 1.3 * matrix_s_per_flop(128)


def test_tensor_core_conv_pads_each_taps_channels_to_a_whole_interval() -> None:
    """V100 fp16 NHWC (tensor cores), 3x3 on 16 maps of 224x224 -> 64 channels: an implicit GEMM steps through its
    reduction one filter tap and one 64-byte channel interval (32 fp16 values) at a time (CUTLASS's conv2d iterators,
    NVIDIA/cutlass media/docs/implicit_gemm_convolution.md), so C = 8 (DeepBench's first layer, C = 3 padded to 8 by
    conv_bench.cu) runs the MMAs of C = 32: 9 x 32 = 288 per output, not 72, while it loads only its own channels
    (the padding is zero-fill). DeepBench V100 fp16 measured 405 us for it; the reduction over 72 gave 150 us. On the
    CUDA cores (fp32, NCHW) the reduction is C·R·S as it is."""
    from perfmodel.search.conv_space import channel_intervals

    hw = "nvidia-v100-sxm2-32gb"
    op = {"kind": "conv2d", "batch": 16, "in_channels": 8, "out_channels": 64, "height": 224, "width": 224,
          "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp16", "layout": "nhwc"}
    times = {c: perfmodel.predict(hw, {**op, "in_channels": c}, defaults=IDEAL).time_s for c in (8, 16, 32, 64)}
    # the MMAs of one 32-channel interval per tap, whatever C below it (was 4x / 2x less); on cuDNN 7's 256x64
    # forward tile (conv_space family 5) C = 8's 72-long reduction rounds up to 3 K-steps of 32 at a quarter of the
    # rate, 12 interval-steps to C = 32's 9: 1.33x
    for c in (8, 16):
        assert 0.9 * times[32] < times[c] < 1.4 * times[32]
    assert times[64] > 1.8 * times[32]
    simt = {c: perfmodel.predict(hw, {**op, "in_channels": c, "dtype": "fp32", "layout": "nchw"},
                                 defaults=IDEAL).time_s for c in (8, 32)}
    assert simt[32] > 3.0 * simt[8]
    k, channels, elem = np.array([72.0, 9 * 48.0, 9 * 512.0]), np.array([8.0, 48.0, 512.0]), np.full(3, 2.0)
    assert list(channel_intervals(k, channels, elem, np.ones(3, bool))) == [288.0, 9 * 64.0, 9 * 512.0]
    assert list(channel_intervals(k, channels, elem, np.zeros(3, bool))) == list(k)
    assert list(channel_intervals(k, np.zeros(3), elem, np.ones(3, bool))) == list(k)  # a plain GEMM reduction
    assert list(channel_intervals(np.array([72.0]), np.array([8.0]), np.array([4.0]), np.ones(1, bool))) == [144.0]
