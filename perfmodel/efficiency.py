"""Defaults of the uncalibrated model: the effects datasheets do not give, per hardware kind.

These are model parameters, not hardware facts: each says where its value comes from.
Calibration (fitted per hardware, op class and dtype) replaces them with measured values.
A spec's own number (e.g. ``launch_overhead_s``, a level's ``latency_s``) wins over these.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfmodel.hardware import Hardware


@dataclass(frozen=True)
class ModelDefaults:
    """Parameters of the speed-of-light-to-real gap (SI units, fractions in 0..1)."""

    kernel_overhead_s: float  # fixed device time per kernel: launch, ramp-up, tail
    host_overhead_s: float  # extra per kernel when a host wall clock times one op + synchronize
    dram_latency_s: float  # first-byte latency of a DRAM stream (Little's law ramp)
    onchip_latency_s: float  # first-byte latency of an on-chip cache level
    matrix_efficiency: float  # sustained share of dense matrix peak (clocks under load, issue)
    vector_efficiency: float  # sustained share of vector peak
    dram_efficiency: float  # sustained share of DRAM peak bandwidth for large streams
    onchip_efficiency: float  # sustained share of on-chip cache bandwidth
    link_efficiency: float  # sustained share of link bandwidth in collectives (NCCL-style)
    blocks_per_unit_for_bandwidth: float  # resident blocks one unit needs to pull its share of DRAM
    llc_resident_fraction: float  # share of the last-level cache a working set can count on
    loaded_latency_factor: float  # DRAM latency under a saturating load / idle latency
    llc_to_dram_bandwidth: float  # LLC bandwidth / DRAM bandwidth when a spec has no LLC figure
    # outputs this large get fresh pages from the OS on every call (page faults and zeroing) ...
    fresh_output_threshold_bytes: float = float("inf")
    fresh_output_bytes_per_s: float = float("inf")  # ... at this rate, on top of the op's own time
    # NCCL's published base and per-hop latencies (collectives.py) x this; 0: none (a spec's hop latency stays)
    collective_latency_scale: float = 1.0
    # dependent DRAM round trips a GPU kernel pays before its first load when every cache was flushed before it
    # (Nsight Compute's default --cache-control all): 2, the instruction fetch and then the kernel-parameter load
    # the first address needs; 0 (the default) for a kernel launched again and again, whose code and parameters
    # stay cached whether or not its data does
    cold_start_round_trips: float = 0.0
    # sustained share of dense matrix peak in a convolution library's own kernels (cuDNN, MIOpen: implicit GEMM,
    # Winograd, FFT) instead of ``matrix_efficiency`` (cuBLAS/rocBLAS GEMMs); None: ``matrix_efficiency``
    conv_matrix_efficiency: float | None = None
    # the same share for a convolution's gradient kernels (cuDNN's BackwardData / BackwardFilter, MIOpen's
    # BackwardData / BackwardWeights: other kernels than the forward's); None: ``conv_matrix_efficiency``
    conv_backward_matrix_efficiency: float | None = None
    # the same share for a library's direct forward kernels (MIOpen's direct solvers: hand-tiled, no im2col GEMM's
    # operand reuse); None: ``conv_matrix_efficiency`` (docs/model.md section 4)
    conv_direct_matrix_efficiency: float | None = None
    # sustained share of DRAM peak of a convolution's weight-gradient kernel streaming x and dy (its reduction over
    # N·P·Q onto the small K·C/g·R·S output, split across CTAs and summed): with the data gradient's stream at
    # ``dram_efficiency`` it bounds a backward from below (``roofline._gradient_streams``); None: no bound
    conv_wgrad_dram_efficiency: float | None = None

    # sustained share of DRAM peak for a streaming kernel (elementwise, norms, gathers: every thread loads, computes
    # little and stores); None: ``dram_efficiency``, the share the GEMM and attention tile models use
    stream_dram_efficiency: float | None = None
    # a GPU spec's own DRAM latency (an idle round trip from microbenchmarks) x this = the first-byte latency of a
    # stream; ``dram_latency_s`` stands for specs without a figure (docs/model.md section 5). 2: what
    # ``benchmarks/lodo.py --fit-all`` (the folds' fit over every dev device) chooses, as every one-device-out fold does
    dram_latency_scale: float = 2.0
    # a GPU's kernel floor x its published small-kernel interval / this (s), where ``perfmodel.small_kernels`` lists
    # the device; None (shipped): ``kernel_overhead_s`` on every device (docs/model.md, "Small-kernel floors per
    # device ..."; docs/accuracy.md, ln16: off)
    small_kernel_reference_s: float | None = None

    @property
    def stream_dram(self) -> float:
        """The DRAM share a streaming kernel sustains (``stream_dram_efficiency``, else ``dram_efficiency``)."""
        return self.dram_efficiency if self.stream_dram_efficiency is None else self.stream_dram_efficiency


# Nsight Compute flushes every cache before each replay by default (--cache-control all): the kernel's first
# instructions and then its parameters (the constant bank its first address is computed from) come from DRAM, two
# dependent round trips before its own first load. A data set measured that way sets cold_start_round_trips to it.
FLUSHED_CACHE_ROUND_TRIPS = 2.0

_GPU = ModelDefaults(
    # MODELING.md: near-empty kernels last ~2 µs in CUPTI/Kineto on recent NVIDIA parts.
    kernel_overhead_s=2.0e-6,
    # MODELING.md: host wall-clock timing adds 5-20 µs of launch and synchronisation.
    host_overhead_s=12e-6,
    # Published pointer-chase microbenchmarks put GPU DRAM latency at ~400-700 ns
    # (Jia et al. 2018 Volta; 2019 Turing); a stream pays it once before bandwidth applies.
    dram_latency_s=0.6e-6,
    onchip_latency_s=0.3e-6,
    # Large cuBLAS GEMMs reach ~75-85 % of dense tensor peak (A100 ~250-260 of 312 TFLOP/s),
    # mostly because clocks drop below boost under full tensor load; the rest of
    # the gap (tiles, waves, short K) is computed structurally by the GEMM tile model.
    matrix_efficiency=0.8,
    vector_efficiency=0.85,
    # STREAM-like copies reach ~85-92 % of HBM peak and ~80-90 % of GDDR peak.
    dram_efficiency=0.87,
    onchip_efficiency=0.75,
    # NCCL's topology model counts 20 GB/s per 25 GB/s NVLink (topo.h SM70/SM80_NVLINK_BW 20.0) and
    # caps Ampere at 235 of 300 GB/s (tuning.cc v2.8): 0.8 of the per-direction link figure.
    link_efficiency=0.8,
    blocks_per_unit_for_bandwidth=2.0,
    # A100/H100 split L2 into two partitions and copy lines across them; other data competes:
    # count on half of the LLC for a working set to stay resident between kernels.
    llc_resident_fraction=0.5,
    # Loaded-latency curves (latency vs offered bandwidth) rise steeply near saturation: with
    # queueing in the memory system, latency at full bandwidth is a few times the idle
    # pointer-chase latency. Model: linear growth to 3x at 100 % utilisation.
    loaded_latency_factor=3.0,
    # Where a spec has no L2 figure: A100 has 7.2 TB/s of L2 over 2.0 TB/s of HBM (3.5x), V100
    # 2048 B/clk (3.1 TB/s) over 0.9 TB/s (3.5x); use 3x.
    llc_to_dram_bandwidth=3.0,
    # every LODO fold's choice on the other devices with the CUDA cores' sustained clock (0.6 before it), one device
    # and one vendor out (docs/accuracy.md, conv20 and "Fourteenth pass, merged")
    conv_matrix_efficiency=0.65,
    # a convolution weight gradient's stream (docs/model.md section 5): 0.25, every LODO fold's choice on the other
    # devices (0.2 without the MI25 or AMD), one device and one vendor out (docs/accuracy.md, conv17, conv19)
    conv_wgrad_dram_efficiency=0.25,
)

_NPU = ModelDefaults(
    kernel_overhead_s=5.0e-6, host_overhead_s=20e-6, dram_latency_s=1.0e-6, onchip_latency_s=0.5e-6,
    matrix_efficiency=0.85, vector_efficiency=0.8, dram_efficiency=0.85, onchip_efficiency=0.8,
    link_efficiency=0.8, blocks_per_unit_for_bandwidth=1.0, llc_resident_fraction=0.5, loaded_latency_factor=3.0,
    llc_to_dram_bandwidth=3.0,
)

_CPU = ModelDefaults(
    # A function call into a BLAS/ufunc loop costs about a microsecond; no device launch.
    kernel_overhead_s=1.0e-6, host_overhead_s=1.0e-6, dram_latency_s=0.1e-6,
    onchip_latency_s=0.02e-6, matrix_efficiency=0.8, vector_efficiency=0.7, dram_efficiency=0.75,
    onchip_efficiency=0.7, link_efficiency=0.8, blocks_per_unit_for_bandwidth=1.0, llc_resident_fraction=0.5,
    loaded_latency_factor=3.0,
    llc_to_dram_bandwidth=3.0,
    # glibc serves allocations above its mmap threshold (dynamic, at most 32 MiB on 64-bit:
    # DEFAULT_MMAP_THRESHOLD_MAX) with fresh mappings, returned on free: an out-of-place op with a
    # larger output page-faults and zeroes all of it on every call (torch.add 4096^2 fp32: 40 ms vs
    # 3.1 ms into an existing buffer on the project's CI VM). ~4 GB/s of first touch was measured
    # there by `perfmodel measure` (2.9-16 GB/s over runs); GPUs use caching allocators.
    fresh_output_threshold_bytes=32 * 2**20,
    fresh_output_bytes_per_s=4.0e9,
)

_BY_KIND = {"gpu": _GPU, "npu": _NPU, "tpu": _NPU, "cpu": _CPU}


def defaults_for(hardware: Hardware) -> ModelDefaults:
    """The defaults for a device's kind."""
    return _BY_KIND[hardware.kind]


IDEAL = ModelDefaults(
    kernel_overhead_s=0.0, host_overhead_s=0.0, dram_latency_s=0.0, onchip_latency_s=0.0,
    matrix_efficiency=1.0, vector_efficiency=1.0, dram_efficiency=1.0, onchip_efficiency=1.0,
    link_efficiency=1.0, blocks_per_unit_for_bandwidth=1.0, llc_resident_fraction=1.0, loaded_latency_factor=1.0,
    llc_to_dram_bandwidth=3.0, collective_latency_scale=0.0,
)
"""A pure speed-of-light roofline: no overheads, no latencies, every peak reached."""
