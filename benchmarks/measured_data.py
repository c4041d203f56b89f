"""Measured data sets (benchmarks/data/, see its README for licences) as (hardware, op, time) rows."""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfmodel.ops import OpError, make_op

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Row:
    dataset: str
    hardware: str
    op: dict[str, Any]
    measured_s: float
    timing: str  # "kernel": device time (profiler/events); "host": wall clock around one op
    group: str  # what a held-out split groups by (model family, sweep)
    label: str  # op class shown in the tables


def _read(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(newline="") as handle:
        return list(csv.DictReader(handle))


VIDUR_HW = {"NVIDIA A100 80GB (Vidur 'a100' SKU)": "nvidia-a100-sxm4-80gb", "NVIDIA A40 48GB": "nvidia-a40"}
_SHAPE = re.compile(r"\[(\d+),(\d+)\]")


# The measured kernels (Vidur's sarathi fork of 2023 vLLM: rms_norm, silu_and_mul, rotary) load one
# element per thread per access, and vLLM's activations run one thread block per token (grid(num_tokens),
# block(min(d, 1024))): the op says so, as a user describing them would. The residual add is PyTorch's own
# vectorized add (4 elements a load): it streams 4096 x 4096 fp16 tensors at 1.83 TB/s on the A100. So are
# phi-2's layer norm and GELU: Vidur's profiling block builds them as torch.nn.LayerNorm and torch.nn.GELU()
# (vidur/profiling/mlp/mlp_impl.py @ e26eb8f: GPTBlock, MLP; only RMSNorm and SiluAndMul come from sarathi),
# PyTorch's vectorized layer-norm kernel and its elementwise GELU (exact erf form), 4 elements a load.
SCALAR = {"vector_width": 1}
# aten/src/ATen/native/cuda/layer_norm_kernel.cu: vectorized_layer_norm_kernel, vec_size 4, one block of
# (warp size 32) x (num_threads() 128 / 32) threads per row
TORCH_LAYER_NORM = {"vector_width": 4, "threads_per_row": 128}
ACTIVATION = {**SCALAR, "threads_per_row": 1024}


def vidur() -> Iterator[Row]:
    """Vidur: per-op CUDA kernel time of transformer blocks (fp16), median of 20 repeats."""
    for r in _read("vidur_llm_operator_times_a100_a40.csv"):
        hw = VIDUR_HW[r["hardware"]]
        kind = r["op_kind_derived"]
        tokens = int(r["num_tokens"])
        shape = [int(v) for v in _SHAPE.findall(r["tensor_shape_derived"])[0]] if r["tensor_shape_derived"] else []
        op: dict[str, Any]
        if kind == "gemm":
            op = {"kind": "matmul", "m": int(r["gemm_M_derived"]), "n": int(r["gemm_N_derived"]),
                  "k": int(r["gemm_K_derived"]), "bias": r["gemm_bias_derived"] == "True", "dtype": "fp16"}
            label = "matmul"
        elif kind in ("rms_norm", "layer_norm"):
            op = {"kind": kind.replace("_", ""), "shape": shape, "dtype": "fp16",
                  **(SCALAR if kind == "rms_norm" else TORCH_LAYER_NORM)}
            label = op["kind"]
        elif kind == "silu_and_mul":
            out = [tokens, shape[1] // 2]
            op = {"kind": "elementwise", "shape": out, "inputs": 2, "outputs": 1, "dtype": "fp16",
                  "flops_per_element": 5, "transcendentals_per_element": 1, **ACTIVATION}
            label = "elementwise"
        elif kind == "gelu":
            op = {"kind": "elementwise", "shape": shape, "dtype": "fp16", "flops_per_element": 8,
                  "transcendentals_per_element": 1}
            label = "elementwise"
        elif kind == "residual_add":
            op = {"kind": "elementwise", "shape": shape, "inputs": 2, "dtype": "fp16"}
            label = "elementwise"
        elif kind.startswith("add3"):
            op = {"kind": "elementwise", "shape": shape, "inputs": 3, "dtype": "fp16", "flops_per_element": 2,
                  **SCALAR}
            label = "elementwise"
        elif kind == "rotary_embedding":
            q, k = (_SHAPE.findall(r["tensor_shape_derived"]))[:2]
            cols = int(q[1]) + int(k[1])
            # vLLM's rotary_embedding_kernel loads the token's position, then the cos/sin cache row at it
            # (cos_sin_cache + pos * rot_dim): two dependent loads before the rotation
            op = {"kind": "elementwise", "shape": [tokens, cols], "dtype": "fp16", "flops_per_element": 3,
                  "dependent_loads": 2, **SCALAR}
            label = "elementwise"
        elif kind == "embedding_lookup":
            vocab = int(r["vocab_size"]) // int(r["tp_degree"])
            op = {"kind": "embedding", "num_embeddings": vocab, "embedding_dim": int(r["n_embd"]),
                  "num_indices": tokens, "dtype": "fp16"}
            label = "embedding"
        else:
            continue
        yield Row("vidur", hw, op, float(r["time_median_ms"]) * 1e-3, "kernel", r["model"], label)


LLMC_HW = {"NVIDIA A100": "nvidia-a100-sxm4-80gb", "AMD MI210": "amd-mi210"}


def llmcompass() -> Iterator[Row]:
    """LLMCompass: host wall clock around one op plus synchronize (includes launch/sync)."""
    for r in _read("llmcompass_ops.csv"):
        hw = next(v for k, v in LLMC_HW.items() if r["hardware"].startswith(k))
        ms = r["measured_latency_ms"]
        seconds = float(ms) * 1e-3 if ms else float(r["latency_us_derived"]) * 1e-6
        dtype = "fp32" if "fp32" in r["dtype_note"].split(" ")[0] else "fp16"
        kind = r["op"]
        if kind == "softmax":
            # ae/figure5/cf/test_softmax.py has no AMD measurement path: its MI210 rows come from run_on_gpu, which
            # makes float16 tensors on every device (software_model/softmax.py @ 2e015fd); the file's "fp32" note
            # is the MI210 simulator's data type
            dtype = "fp16"
        if kind == "matmul":
            op = {"kind": "matmul", "m": int(r["M"]), "n": int(r["N"]), "k": int(r["K"]), "dtype": dtype}
        elif kind in ("softmax", "layernorm"):
            op = {"kind": kind, "shape": [int(r["M"]), int(r["N"])], "dtype": dtype}
        elif kind == "gelu":
            op = {"kind": "elementwise", "shape": [int(r["elements"])], "dtype": dtype,
                  "flops_per_element": 8, "transcendentals_per_element": 1}
        else:
            continue
        label = "elementwise" if kind == "gelu" else kind
        yield Row("llmcompass", hw, op, seconds, "host", f"{kind}", label)


TENSOR_CORE_CHANNEL_PAD = 8  # conv_bench.cu pads half-precision C and K to this multiple (cuDNN >= 7 builds)
DEEPBENCH_HW = {"NVIDIA V100 (DGX-1)": "nvidia-v100-sxm2-32gb", "NVIDIA Tesla P100": "nvidia-p100-sxm2-16gb",
                "NVIDIA T4": "nvidia-t4", "AMD Radeon Instinct MI25": "amd-mi25"}


def _deepbench_dtypes(precision: str) -> dict[str, str]:
    if precision == "Float":
        return {"dtype": "fp32"}
    if "32 bit multiplication" in precision:
        return {"dtype": "fp16", "compute_dtype": "fp32"}
    return {"dtype": "fp16"}


# DeepBench's 9 MI25 forwards that MIOpen ran as a Winograd on a 5x5 or 5x10 filter (stride 1 or 2) as its RxS solver
# (algorithm='winograd_rxs'): their own error drops (1.33-1.54x -> 0.78-1.05x), but off, they stay implicit GEMMs:
# one vendor out, the NVIDIA fold's convolution share is fitted on the MI25 alone and falls 0.65 -> 0.6 with them,
# conv2d 20.9 -> 22.2 % (docs/accuracy.md, thirteenth pass, branch conv16). On since conv19 (with D, W and the joint
# matrix/onchip fit: every class equal or better in both splits)
MIOPEN_RXS_WINOGRAD = True
# DeepBench's 36 MI25 forwards MIOpen ran with a direct solver (ConvolutionFwdAlgoDirect) as algorithm='direct': the
# implicit GEMM's work at the direct kernels' own share (conv_direct_matrix_efficiency, fitted by lodo on direct rows
# only: lodo.DIRECT_GRIDS); off, they are implicit GEMMs at the library's share. Off: with the share alone one vendor
# out conv2d 20.9 -> 22.5 %; with RxS and the weight-gradient stream matmul 10.9 -> 11.0 % one device out
# (docs/accuracy.md, thirteenth pass, branch conv17). On since conv19, with the joint matrix/onchip fit (lodo_joint)
MIOPEN_DIRECT_SOLVER = True
# The backward of a shape whose forward ran cuDNN's FFT / FFT_TILING runs the same FFT for both gradients: cuDNN has
# BWD_DATA_ALGO_FFT / FFT_TILING and BWD_FILTER_ALGO_FFT (/ FFT_TILING from 7.1), and DeepBench's cudnnFind builds take
# the fastest; MIOpen's backward-weights algorithms have no FFT (miopenConvBwdWeightsAlgorithm_t), so its rows keep the
# implicit GEMM (docs/model.md section 1; docs/accuracy.md, fifteenth pass, convbwd18)
FFT_BACKWARD = True


def _algorithm(name: str, conv: dict[str, Any]) -> str:
    """The perfmodel algorithm of a Winograd or FFT run cuDNN/MIOpen reported (implicit GEMM where the op cannot
    run it): the algorithm the library ran is part of the measurement, so the model runs the same one."""
    lower = name.lower()
    if "fft" in lower:
        algorithm = "fft_tiling" if "tiling" in lower else "fft"
    elif MIOPEN_RXS_WINOGRAD and lower == "convolutionfwdalgowinograd" and not (
            conv["kernel_h"] == conv["kernel_w"] == 3 and conv["stride"] == 1):
        # MIOpen's Winograd on another filter or stride 2: its RxS solver, 3x3 blocks of the padded filter (conv_rxs)
        algorithm = "winograd_rxs"
    elif "winograd" in lower:
        algorithm = "winograd_nonfused" if "nonfused" in lower else "winograd"
    elif MIOPEN_DIRECT_SOLVER and lower == "convolutionfwdalgodirect":  # MIOpen's direct solvers (conv.DIRECT)
        algorithm = "direct"
    elif lower == "convolutionfwdalgogemm":  # MIOpen's GEMM path: per-image im2col + BLAS GEMM (conv_im2col)
        algorithm = "im2col_gemm"
    else:
        return "implicit_gemm"
    try:
        make_op({**conv, "algorithm": algorithm})
    except OpError:
        return "implicit_gemm"
    return algorithm


def deepbench() -> Iterator[Row]:
    """DeepBench GEMM and conv: kernel time averaged over repeated launches (cudaEvent)."""
    for r in _read("deepbench_gemm.csv"):
        op = {"kind": "matmul", "m": int(r["M"]), "n": int(r["N"]), "k": int(r["K"]),
              "transpose_a": r["a_transpose"] == "T", "transpose_b": r["b_transpose"] == "T",
              **_deepbench_dtypes(r["precision"])}
        yield Row("deepbench", DEEPBENCH_HW[r["hardware"]], op, float(r["time_ms"]) * 1e-3, "kernel",
                  r["application"] or "-", "matmul")
    for r in _read("deepbench_conv.csv"):
        base = {"kind": "conv2d", "batch": int(r["N"]), "in_channels": int(r["C"]),
                "out_channels": int(r["K"]), "height": int(r["H"]), "width": int(r["W"]),
                "kernel_h": int(r["R_filter_height"]), "kernel_w": int(r["S_filter_width"]),
                "stride": int(r["stride_h"]), "stride_w": int(r["stride_w"]),
                "padding": int(r["pad_h"]), "padding_w": int(r["pad_w"]),
                **_deepbench_dtypes(r["precision"])}
        hw = DEEPBENCH_HW[r["hardware"]]
        group = r["application"] or "-"
        # conv_bench.cu with cuDNN >= 7 gives half-precision tensors NHWC (tensor-core math), float ones NCHW, and
        # pads a half-precision training problem's C and K up to multiples of 8 before timing it ("Tensor cores need
        # channels to be a multiple of 8": pad_dim(padded_c, 8), pad_dim(padded_k, 8); baidu-research/DeepBench
        # code/nvidia/conv_bench.cu @ 60bea70): the sheet lists the problem's own C (1 or 3 for first layers), the
        # kernels ran the padded one
        if base["dtype"] == "fp16" and "cuDNN 7" in r["software"]:
            base["layout"] = "nhwc"
            for name, column in (("in_channels", "C"), ("out_channels", "K")):
                base[name] = -(-int(r[column]) // TENSOR_CORE_CHANNEL_PAD) * TENSOR_CORE_CHANNEL_PAD
        algorithm = _algorithm(r["fwd_algorithm"], base)
        fwd = base if algorithm == "implicit_gemm" else {**base, "algorithm": algorithm}
        if _number(r["fwd_ms"]):
            yield Row("deepbench", hw, fwd, float(r["fwd_ms"]) * 1e-3, "kernel", group, "conv2d")
        if _number(r["bwd_inputs_ms"]) and _number(r["bwd_params_ms"]):
            seconds = (float(r["bwd_inputs_ms"]) + float(r["bwd_params_ms"])) * 1e-3
            # DeepBench records the forward algorithm only. The backward of a shape whose forward ran a Winograd is
            # assumed to run it too. Non-fused: cuDNN has it for data and weight gradients (V100 fp32 runs these
            # backwards at up to 18 TFLOP/s of direct-convolution FLOPs, above its 15.7 peak). Fused: the data
            # gradient (cuDNN's BWD_DATA_ALGO_WINOGRAD; MIOpen's Winograd solvers take backward data as a forward
            # convolution with the flipped filter), the weight gradient an implicit GEMM (Conv2d): 22 of the P100's 44
            # such backwards take less than that implicit GEMM at 100 % of peak (ideal tiles, no floor).
            # MIOpen's GEMM path runs the gradients per image too (its BackwardWeightsGemm loops over the batch)
            # MIOpen's RxS Winograd forwards (5x5, 5x10, stride 2) keep the implicit-GEMM backward: which solver ran
            # their gradients is not recorded, and the RxS kernel of that era has no weight-gradient form
            fft = ("fft", "fft_tiling") if FFT_BACKWARD and "cuDNN" in r["software"] else ()
            same = ("winograd_nonfused", "winograd", "im2col_gemm", *fft)
            bwd = fwd if fwd.get("algorithm") in same else base
            yield Row("deepbench", hw, {**bwd, "pass": "backward"}, seconds, "kernel", group, "conv2d_bwd")


DEEPBENCH_ALLREDUCE_HW = "nvidia-p100-pcie-16gb"


def collectives() -> Iterator[Row]:
    """All-reduce: Vidur (NCCL, A100 DGX), LLMCompass (4x A100), DeepBench (P100)."""
    for r in _read("vidur_collectives_a100.csv"):
        if r["collective"] != "all_reduce" or r["topology"] != "a100_dgx":
            continue
        # devices_per_node below num_workers: the ranks span nodes (2x1, 4x2, 8x4, 16x8), NCCL over the network
        op = {"kind": "allreduce", "bytes": float(r["size_bytes"]), "devices": int(r["num_workers"]),
              "devices_per_node": int(r["devices_per_node"]), "dtype": "fp16"}
        yield Row("vidur", "nvidia-a100-sxm4-80gb", op, float(r["time_median_ms"]) * 1e-3, "kernel",
                  "allreduce", "allreduce")
    # LLMCompass's all-reduce latencies are an nccl-tests all_reduce_perf sweep (sizes 8 B-16 GiB doubling, times
    # in µs to two decimals, ae/figure5/h/test_allreduce.py): nccl-tests launches its iterations back to back and
    # divides the loop's time, so a call's host work overlaps the previous collective: device time per call
    for r in _read("llmcompass_allreduce_a100x4.csv"):
        op = {"kind": "allreduce", "bytes": float(r["size_bytes"]), "devices": int(r["num_gpus"]), "dtype": "fp16"}
        yield Row("llmcompass", "nvidia-a100-sxm4-80gb", op, float(r["measured_latency_us"]) * 1e-6, "kernel",
                  "allreduce", "allreduce")
    # DeepBench ran its all-reduce on 8-GPU PCIe nodes (PLX switches, dual root, InfiniBand FDR across nodes:
    # DeepBench README, 'Topology for NVIDIA 8 GPU System'), so P100 PCIe cards, not the NVLink SXM2 part. Its
    # timer (code/nvidia/nccl_mpi_all_reduce.cu) is a steady_clock around 1,000 back-to-back ncclAllReduce calls
    # and one stream sync, divided by the count: device time per call, as nccl-tests
    for r in _read("deepbench_allreduce.csv"):
        op = {"kind": "allreduce", "bytes": float(r["size_floats"]) * 4, "devices": int(r["num_gpus"]),
              "dtype": "fp32"}
        yield Row("deepbench", DEEPBENCH_ALLREDUCE_HW, op, float(r["mean_time_ms"]) * 1e-3, "kernel",
                  "allreduce", "allreduce")


NCU_RELU = ("activation__relu__nsight_result.csv", "activation__relu__relu_dedu.json")


def ncu_relu() -> Iterator[Row]:
    """Nsight Compute: 4,237 ReLU kernels on an A100, read with perfmodel's own Nsight Compute parser (the wide
    form's ``gpu__time_duration.sum``), their input shapes from the JSON beside it, row for row. The dtype is not
    recorded: fp32, since a tensor that fits in L2 moves 4 bytes per element through DRAM (its writes stay in L2).
    Grouped by element count: the same tensor in another layout (8x256x200x336, 8x256x336x200) is the same
    elementwise op, so it falls on one side of a split."""
    from perfmodel.traces import parse_trace

    parsed = parse_trace(DATA / NCU_RELU[0])
    shapes = json.loads((DATA / NCU_RELU[1]).read_text())["input_size"]
    if len(shapes) != len(parsed.kernels):
        raise ValueError(f"{NCU_RELU[0]}: {len(parsed.kernels)} kernels but {len(shapes)} shapes")
    for kernel, shape in zip(parsed.kernels, shapes, strict=True):
        dims = [int(v) for v in shape]
        op = {"kind": "elementwise", "shape": dims, "dtype": "fp32"}
        yield Row("ncu", "nvidia-a100-sxm4-80gb", op, kernel.duration_s, "kernel", str(math.prod(dims)), "elementwise")


# Data sets whose kernels ran right after a flush of every cache (Nsight Compute's default --cache-control all);
# the others time an op launched again and again (Vidur's repeats, DeepBench's and LLMCompass's loops).
FLUSHED_DATASETS = frozenset({"ncu"})
# LLMCompass times these ops through a @torch.compile'd function (software_model/layernorm.py, gelu.py @ 2e015fd,
# run_on_gpu): each call also runs TorchDynamo's guards and Inductor's Python wrapper on the host, which no device
# figure gives. Its softmax and matmul call torch directly, and its MI210 GELU ran the --amd path (run_on_amd in
# ae/figure5/g/test_gelu.py), not the compiled function: a 21 us floor like its eager softmax, where the A100's
# compiled GELU and layer norm sit at 47-52 us against 13 us for its eager softmax.
COMPILED_CALLS = frozenset({("llmcompass", "layernorm", "nvidia-a100-sxm4-80gb"),
                            ("llmcompass", "layernorm", "amd-mi210"), ("llmcompass", "gelu", "nvidia-a100-sxm4-80gb")})
# DeepBench times each library call as the average of a loop of back-to-back calls between two CUDA events
# (conv_bench.cu, gemm_bench.cu): a call cannot take less than the host needs to issue it (cuBLAS/cuDNN/MIOpen's
# API work and the launch), however short its kernels.
HOST_ISSUED_LOOPS = frozenset({"deepbench"})
# A DeepBench backward row is the sum of two such loops, backward data and backward filter, each timed on its own
# (time_cnn in conv_bench.cu: bwd_params_time, then bwd_inputs_time, each over num_repeats calls): it lasts at least
# two issue intervals.
LOOPED_CALLS_PER_ROW = {("deepbench", "conv2d_bwd"): 2}
# Vidur times a collective as the median Kineto duration of rank 0's NCCL kernels over 11 eager torch.distributed
# calls issued back to back after one barrier (vidur/profiling/collectives/collectives_wrapper.py: _run_collective,
# CudaTimer(aggregation_fn=np.median, filter_str="nccl"); main.py keeps rank 0's stats; microsoft/vidur @ e26eb8f).
# Nothing holds the ranks together between calls: where a call's device work is shorter than the host's time to
# issue the next eager call, rank 0's kernel, issued ahead of its slowest peer, runs until that peer has issued the
# same call, so it lasts one host issue interval per call (each rank issues at that pace); where the device work is
# longer, the calls queue on every GPU and the kernel lasts its device time. (Rank 0 is the slowest of p ranks in
# 1/p of the runs: a faster row, 7-13 us among 50-60 us ones, is that case.) A send is not held: its message goes
# into the receiver's FIFO (NCCL_STEPS slots) without waiting for the receiving kernel.
UNSYNCED_COLLECTIVE_LAUNCHES = frozenset({("vidur", "allreduce")})


def looped_calls(row: Row) -> int:
    """Library calls a row of a back-to-back loop data set (``HOST_ISSUED_LOOPS``) adds up: each is timed in its own
    loop and lasts at least the host's issue interval (``LOOPED_CALLS_PER_ROW``, else 1)."""
    return LOOPED_CALLS_PER_ROW.get((row.dataset, row.label), 1)


def compiled_call(row: Row) -> bool:
    """Whether the row's host-timed call went through torch.compile (``COMPILED_CALLS``)."""
    return (row.dataset, row.group, row.hardware) in COMPILED_CALLS


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def all_rows() -> list[Row]:
    return [*vidur(), *llmcompass(), *deepbench(), *collectives(), *ncu_relu()]
