"""Per-device lookup tables for the vectorised model: effective peaks per dtype, levels, limits.

Built once per hardware content hash. A dtype the matrix engine lacks falls back to another
path (fp32 -> vector engine, fp8 -> 16-bit matrix, int4 -> int8 matrix ...) and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.efficiency import ModelDefaults, defaults_for
from perfmodel.ops.base import DTYPES, FloatArray
from perfmodel.small_kernels import floor_scale

if TYPE_CHECKING:
    from perfmodel.hardware import ComputeEngine, Hardware, MemoryLevel

# CUDA C++ Programming Guide, compute capability table: 2048 resident threads per SM on
# cc 6.0/7.0/8.0/9.0 (1024 on 7.5, 1536 on 8.6/8.9: specs give their own).
DEFAULT_RESIDENT_THREADS = 2048

# Shared-memory reads of a tile's A and B panels per K-step, by who issues one matrix instruction: a 2 x 2 grid of
# warps each reads its half of A and of B (mma.sync, MFMA); Hopper's 2 consumer warpgroups split M, each reading
# all of B (wgmma); Blackwell's tcgen05 MMA reads each operand once for the whole CTA tile (docs/model.md §4).
SMEM_OPERAND_READS = {"warp": (2.0, 2.0), "warpgroup": (1.0, 2.0), "cta": (1.0, 1.0)}

# Dense matrix work that falls back to the vector engine (SIMT GEMMs and convolutions: fp32 on the CUDA cores) runs at
# that engine's measured clock under GEMM load where its spec gives one (the T4's Citadel Fig. 4.5 clock is an fp32
# sgemm's); streaming vector work keeps the boost peak (docs/model.md section 2, "A SIMT GEMM's sustained clock").
# On (fourteenth pass, lead's decision): one device out conv2d, conv2d_bwd and matmul better, one vendor out
# conv2d_bwd and matmul better, conv2d 0.6 points worse (the MI25 takes the NVIDIA fold's share; docs/accuracy.md,
# conv20)
SIMT_SUSTAINED_CLOCK = True
# A convolution library's SIMT implicit GEMM on an engine whose integer work issues beside its FMAs
# (``ComputeEngine.concurrent_integer_issue``) runs at the GEMM's share, not the library's (docs/model.md section 5)
SIMT_INTEGER_OVERLAP = False

# Where a dtype goes when the matrix engine lacks it, in order of preference (matrix engine).
_MATRIX_FALLBACK: dict[DType, tuple[DType, ...]] = {
    DType.TF32: (DType.FP32,),
    DType.FP8_E4M3: (DType.FP8_E5M2, DType.FP16, DType.BF16),
    DType.FP8_E5M2: (DType.FP8_E4M3, DType.FP16, DType.BF16),
    DType.BF16: (DType.FP16,),
    DType.INT4: (DType.INT8, DType.FP16),
    DType.INT8: (DType.FP16,),
}
# On the vector engine: same dtype, else a wider one that holds it.
_VECTOR_FALLBACK: dict[DType, tuple[DType, ...]] = {
    DType.TF32: (DType.FP32,),
    DType.FP16: (DType.FP32,),
    DType.BF16: (DType.FP32,),
    DType.FP8_E4M3: (DType.FP16, DType.BF16, DType.FP32),
    DType.FP8_E5M2: (DType.FP16, DType.BF16, DType.FP32),
    DType.INT8: (DType.FP32,),
    DType.INT4: (DType.FP32,),
    DType.INT32: (DType.FP32,),
    DType.INT64: (DType.FP32,),
    DType.FP64: (),
    DType.FP32: (),
}


@dataclass(frozen=True)
class Path:
    """How one dtype's work runs: engine, dtype actually used, peak, and a note if it fell back."""

    engine: str
    dtype: DType
    peak_flops_per_s: float
    note: str
    supported: bool = True


@dataclass(frozen=True)
class MachineTables:
    hardware: Hardware
    defaults: ModelDefaults
    matrix_paths: tuple[Path, ...]  # indexed by dtype code
    vector_paths: tuple[Path, ...]
    matrix_peak: FloatArray
    vector_peak: FloatArray
    special_peak: float
    special_engine: str
    dram: MemoryLevel
    llc: MemoryLevel | None  # largest on-chip cache, None on scratchpad-only machines
    scratchpad: MemoryLevel | None
    scratchpad_bytes_per_unit: float
    max_resident_tiles: int
    resident_threads_per_unit: int
    register_bytes_per_unit: float  # inf where the spec has no register level
    scratchpad_bandwidth_per_unit: float | None
    dma_bandwidth_bytes_per_s: float | None
    dma_latency_s: float  # per descriptor; 0 without a DMA block
    mma_m: int
    mma_n: int
    mma_k: int
    operand_sharing_tiles: int = 1  # tiles sharing one LLC load of a B panel (TMA multicast, 2-SM MMA)
    smem_reads_a: float = 2.0  # shared-memory reads of the A panel per K-step (the matrix instruction's scope)
    smem_reads_b: float = 2.0  # ... and of the B panel
    gemm_units: int = 0  # units a GEMM's tiles run on (0: ``units``); see ``_gemm_units``
    gemm_scratchpad_bytes: float = 0.0  # tile store per GEMM unit, bytes (0: ``scratchpad_bytes_per_unit``)
    tiles_from_llc: bool = False  # a systolic device's matrix engines stream their tiles from the shared LLC

    @property
    def units(self) -> int:
        return self.hardware.units

    @property
    def integer_overlap(self) -> FloatArray:
        """Per dtype code, 1 where its matrix work runs on a vector engine that issues integer work beside its FMAs
        (``ComputeEngine.concurrent_integer_issue``), else 0."""
        engines = {e.name: e for e in self.hardware.engines}
        return np.array([float(e.engine_class == "vector" and bool(e.concurrent_integer_issue))
                         for e in (engines[p.engine] for p in self.matrix_paths)])

    def latency_s(self, level: MemoryLevel) -> float:
        if level.latency_s is not None:
            gpu_dram = level.kind == "dram" and self.hardware.kind == "gpu"
            return level.latency_s * (self.defaults.dram_latency_scale if gpu_dram else 1.0)
        return self.defaults.dram_latency_s if level.kind == "dram" else self.defaults.onchip_latency_s

    def bandwidth_bytes_per_s(self, level: MemoryLevel) -> float:
        """A level's bandwidth; an LLC without a figure gets the default multiple of DRAM's."""
        if level.bandwidth_bytes_per_s is not None:
            return level.bandwidth_bytes_per_s
        dram = self.dram.bandwidth_bytes_per_s or 1e12
        return dram * (self.defaults.llc_to_dram_bandwidth if level is self.llc else 1.0)

    @property
    def kernel_overhead_s(self) -> float:
        """Fixed device time per kernel (s): the spec's figure, else the default floor, scaled by the device's
        published small-kernel interval where ``small_kernel_reference_s`` is set (``perfmodel.small_kernels``)."""
        if self.hardware.launch_overhead_s is not None:
            return self.hardware.launch_overhead_s
        hw, reference = self.hardware, self.defaults.small_kernel_reference_s
        return self.defaults.kernel_overhead_s * floor_scale(hw.id, hw.derived_from, reference)


def _gemm_units(hw: Hardware, llc: MemoryLevel | None, pad_bytes: float) -> tuple[int, float, bool]:
    """Where a systolic device's GEMM tiles run: on its matrix engines where it has fewer of them than units (Gaudi's
    MMEs beside its TPCs), each streaming its tiles from an equal share of the shared on-die SRAM (the last-level
    cache: Gaudi 3's DCORE holds 2 MMEs and 24 MB), else on the units and their scratchpads (bytes)."""
    counts = [e.count for e in hw.engines_of("matrix") if e.count]
    if hw.kind not in ("tpu", "npu") or not counts or min(counts) >= hw.units:
        return hw.units, pad_bytes, False
    engines = min(counts)
    shared = hw.level_capacity_bytes(llc) if llc is not None else None
    return engines, (shared / engines if shared else pad_bytes), bool(shared)


def _best(engines: tuple[ComputeEngine, ...], dtype: DType) -> tuple[ComputeEngine, float] | None:
    found = [(e, e.peak_flops_per_s[dtype]) for e in engines if dtype in e.peak_flops_per_s]
    return max(found, key=lambda pair: pair[1]) if found else None


def _vector_path(hw: Hardware, dtype: DType) -> Path:
    vectors = hw.engines_of("vector") or hw.engines_of("matrix")
    for candidate in (dtype, *_VECTOR_FALLBACK.get(dtype, ())):
        hit = _best(vectors, candidate)
        if hit:
            note = "" if candidate == dtype else f"{dtype.value} runs as {candidate.value} on {hit[0].name}"
            return Path(hit[0].name, candidate, hit[1], note)
    any_engine, peak = max(((e, max(e.peak_flops_per_s.values())) for e in vectors), key=lambda p: p[1])
    return Path(any_engine.name, dtype, peak, f"{dtype.value} is not supported on {hw.id}: no engine lists it "
                "or a wider type that holds it", supported=False)


def _matrix_path(hw: Hardware, dtype: DType) -> Path:
    matrices = hw.engines_of("matrix")
    for candidate in (dtype, *_MATRIX_FALLBACK.get(dtype, ())):
        hit = _best(matrices, candidate)
        if hit:
            note = "" if candidate == dtype else f"{dtype.value} runs as {candidate.value} on {hit[0].name}"
            # dense matrix work runs at the engine's sustained clock where the vendor publishes one, else at the
            # throughput its board power allows where an energy per FLOP is derived
            share = hit[0].sustained_fraction(candidate, hw.clock_hz, hw.tdp_w)
            return Path(hit[0].name, candidate, hit[1] * share, note)
    vector = _vector_path(hw, dtype)
    if not vector.supported:
        return vector
    reason = f"no matrix path for {dtype.value} on {hw.id}: falls back to {vector.engine}"
    if vector.note:
        reason += f" ({vector.note})"
    engine = next(e for e in hw.engines if e.name == vector.engine)
    share = engine.sustained_fraction(vector.dtype, hw.clock_hz, hw.tdp_w) if SIMT_SUSTAINED_CLOCK else 1.0
    return Path(vector.engine, vector.dtype, vector.peak_flops_per_s * share, reason)


_CACHE: dict[int, tuple[Hardware, MachineTables]] = {}


def tables(hw: Hardware) -> MachineTables:
    """Lookup tables of one device (cached per Hardware object; Hardware is immutable)."""
    hit = _CACHE.get(id(hw))
    if hit is not None and hit[0] is hw:
        return hit[1]
    if len(_CACHE) > 512:
        _CACHE.clear()
    built = _build(hw)
    _CACHE[id(hw)] = (hw, built)
    return built


_T = TypeVar("_T")
_DERIVED: dict[tuple[int, str], tuple[MachineTables, Any]] = {}


def derived(t: MachineTables, name: str, build: Callable[[MachineTables], _T]) -> _T:
    """``build(t)``, kept per tables object (by identity, as ``tables`` keeps them per Hardware) under ``name``: the
    small arrays a model step derives from the tables alone, built once instead of on every call. Callers must not
    modify what it returns."""
    hit = _DERIVED.get((id(t), name))
    if hit is not None and hit[0] is t:
        value: _T = hit[1]
        return value
    if len(_DERIVED) > 4096:  # tables replaced per call (``evaluate(defaults=...)``) would pile up
        _DERIVED.clear()
    value = build(t)
    _DERIVED[(id(t), name)] = (t, value)
    return value


def _build(hw: Hardware) -> MachineTables:
    matrix_paths = tuple(_matrix_path(hw, d) for d in DTYPES)
    vector_paths = tuple(_vector_path(hw, d) for d in DTYPES)
    specials = hw.engines_of("special")
    if specials:
        special_engine = specials[0].name
        special_peak = max(specials[0].peak_flops_per_s.values())
    else:  # transcendentals on the vector engine at a quarter of its fp32 rate (polynomial)
        fp32 = _vector_path(hw, DType.FP32)
        special_engine, special_peak = fp32.engine, fp32.peak_flops_per_s / 4.0
    caches = [lv for lv in hw.levels if lv.kind == "cache" and not lv.per_unit]
    caches = caches or [lv for lv in hw.levels if lv.kind == "cache"]
    llc = caches[0] if caches else None
    pads = [lv for lv in hw.levels if lv.kind == "scratchpad"]
    scratchpad = pads[-1] if pads else None
    pad_bytes = float("inf")
    if scratchpad is not None and scratchpad.capacity_bytes is not None:
        pad_bytes = scratchpad.capacity_bytes / (1 if scratchpad.per_unit else hw.units)
    mma = next((e.mma_shape for e in hw.engines_of("matrix") if e.mma_shape), None) or (16, 8, 16)
    sharing = next((e.operand_sharing_tiles for e in hw.engines_of("matrix") if e.operand_sharing_tiles), None) or 1
    scope = next((e.mma_scope for e in hw.engines_of("matrix") if e.mma_scope), None) or "warp"
    reads_a, reads_b = SMEM_OPERAND_READS[scope]
    registers = [lv for lv in hw.levels if lv.kind == "registers" and lv.capacity_bytes]
    if hw.kind == "cpu":
        # cache blocking: the operand panels live in the per-core L2, the accumulator block in L1
        private = [lv for lv in hw.levels if lv.kind == "cache" and lv.per_unit and lv.capacity_bytes]
        if private:
            pad_bytes = float(max(lv.capacity_bytes or 0.0 for lv in private))
    reg_bytes = float("inf")
    if registers and registers[-1].capacity_bytes is not None:
        reg_bytes = registers[-1].capacity_bytes / (1 if registers[-1].per_unit else hw.units)
    if hw.kind == "cpu":
        private = [lv for lv in hw.levels if lv.kind == "cache" and lv.per_unit and lv.capacity_bytes]
        if private:
            reg_bytes = 2.0 * float(min(lv.capacity_bytes or 0.0 for lv in private))
    pad_bw = None
    if scratchpad is not None and scratchpad.bandwidth_bytes_per_s is not None:
        pad_bw = scratchpad.bandwidth_bytes_per_s / hw.units
    dma = hw.dma
    gemm_units, gemm_pad, from_llc = _gemm_units(hw, llc, pad_bytes)
    return MachineTables(
        hardware=hw, defaults=defaults_for(hw),
        matrix_paths=matrix_paths, vector_paths=vector_paths,
        matrix_peak=np.array([p.peak_flops_per_s for p in matrix_paths]),
        vector_peak=np.array([p.peak_flops_per_s for p in vector_paths]),
        special_peak=special_peak, special_engine=special_engine,
        dram=hw.levels[0], llc=llc, scratchpad=scratchpad, scratchpad_bytes_per_unit=pad_bytes,
        max_resident_tiles=hw.max_resident_tiles_per_unit or 1,
        resident_threads_per_unit=hw.max_resident_threads_per_unit or DEFAULT_RESIDENT_THREADS,
        register_bytes_per_unit=reg_bytes, scratchpad_bandwidth_per_unit=pad_bw,
        dma_bandwidth_bytes_per_s=dma.bandwidth_bytes_per_s if dma else None,
        dma_latency_s=(dma.latency_s or 0.0) if dma else 0.0,
        mma_m=mma[0], mma_n=mma[1], mma_k=mma[2], operand_sharing_tiles=sharing,
        smem_reads_a=reads_a, smem_reads_b=reads_b, gemm_units=gemm_units, gemm_scratchpad_bytes=gemm_pad,
        tiles_from_llc=from_llc,
    )

