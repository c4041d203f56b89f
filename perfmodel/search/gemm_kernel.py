"""Compiled (numba) GEMM schedule costing: the arithmetic of ``gemm_cost.gemm_costs``, one candidate at a time.

``gemm_cost`` keeps the numpy implementation as the reference and the fallback; this module
computes the same figures in one loop over (op, candidate) with the operations in the same
order, so the answers are bit-for-bit those of numpy (``tests/unit/test_gemm_kernel.py``
checks them on many shapes and devices). numba is imported on first use only (it costs ~0.4 s
of CPU), and ``PERFMODEL_NO_JIT=1`` or a missing numba selects the numpy path.

Device constants travel as one float64 vector (``device_vector``), indexed by the ``D_*``
positions below, so the kernel has a single compiled signature cached on disk.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from perfmodel.machine import MachineTables, derived
from perfmodel.ops.base import FloatArray
from perfmodel.search.gemm_space import GemmCandidates, is_systolic

# positions in the device vector
(D_SYSTOLIC, D_HAS_LLC, D_UNITS, D_MMA_M, D_MMA_N, D_MMA_K, D_SCRATCHPAD, D_REGISTERS, D_MAX_RESIDENT,
 D_MATRIX_EFF, D_BLOCKS_PER_UNIT, D_LOAD_BW, D_SMEM_BW, D_LATENCY, D_REDUCE_BW, D_FILL, D_LLC_HALF, D_DRAM_BW,
 D_DRAM_LATENCY, D_LLC_BW, D_LLC_LATENCY, D_OVERHEAD, D_SHARING, D_SMEM_A, D_SMEM_B, D_LLC_FED, D_IN_FLIGHT,
 D_DRAM_PEAK_BW, D_LOADED_LATENCY, D_SIZE) = range(30)

# rows of the float output block of ``cost_grid``
FIELDS = ("compute_s", "dram_s", "reuse_s", "body_s", "judged_s", "dram_bytes", "reuse_bytes", "smem_bytes",
          "footprint_bytes", "resident", "waves", "tiles", "busy")
# rows of the output block of ``best_per_op`` (the candidate index is returned apart)
CHOICE_FIELDS = ("compute_s", "dram_s", "reuse_s", "body_s", "dram_bytes", "reuse_bytes", "busy", "waves", "tiles",
                 "resident", "footprint_bytes")

# a grid this large amortises loading the kernels in a process that has not yet (numba's import and the cached
# machine code: ~1-2 s of CPU, ~20 s the first time ever, when they compile); smaller ones use numpy until then
MIN_ELEMENTS = 1 << 20
_LOADED: list[bool] = []  # [True] once ``load`` has run in this process


def systolic_load_bandwidth(t: MachineTables) -> float:
    """Bytes/s that feed a systolic device's tiles: its DMA engines, else the shared on-die SRAM its matrix engines
    stream from (``tiles_from_llc``: Gaudi), else DRAM; each at its sustained share."""
    d = t.defaults
    if t.dma_bandwidth_bytes_per_s:
        return t.dma_bandwidth_bytes_per_s * d.dram_efficiency
    if t.tiles_from_llc and t.llc is not None:
        return t.bandwidth_bytes_per_s(t.llc) * d.onchip_efficiency
    return t.bandwidth_bytes_per_s(t.dram) * d.dram_efficiency


def device_vector(t: MachineTables) -> FloatArray:
    """The device constants the kernel reads, in the units ``gemm_costs`` uses (s, bytes, bytes/s): a copy (the
    caller's to edit) of the vector built once per tables object (``machine.derived``)."""
    v: FloatArray = derived(t, "gemm_device_vector", _device_vector).copy()
    return v


def _device_vector(t: MachineTables) -> FloatArray:
    d = t.defaults
    systolic = is_systolic(t)
    v = np.zeros(D_SIZE)
    v[D_SYSTOLIC] = 1.0 if systolic else 0.0
    v[D_HAS_LLC] = 1.0 if t.llc is not None else 0.0
    v[D_UNITS] = float(t.gemm_units or t.units)
    v[D_MMA_M], v[D_MMA_N], v[D_MMA_K] = float(t.mma_m), float(t.mma_n), float(t.mma_k)
    v[D_SCRATCHPAD] = t.gemm_scratchpad_bytes or t.scratchpad_bytes_per_unit
    v[D_REGISTERS] = t.register_bytes_per_unit
    v[D_MAX_RESIDENT] = float(t.max_resident_tiles)
    v[D_MATRIX_EFF] = d.matrix_efficiency
    v[D_BLOCKS_PER_UNIT] = d.blocks_per_unit_for_bandwidth
    if systolic:
        v[D_LOAD_BW] = systolic_load_bandwidth(t)
        v[D_SMEM_BW] = np.inf
        v[D_LATENCY] = t.dma_latency_s
    else:
        reuse_bw = t.bandwidth_bytes_per_s(t.llc) if t.llc is not None else t.bandwidth_bytes_per_s(t.dram)
        v[D_LOAD_BW] = reuse_bw * d.onchip_efficiency
        v[D_SMEM_BW] = t.scratchpad_bandwidth_per_unit or np.inf
        v[D_LATENCY] = t.latency_s(t.llc) if t.llc is not None else t.latency_s(t.dram)
    v[D_REDUCE_BW] = t.bandwidth_bytes_per_s(t.llc if t.llc is not None else t.dram) * d.onchip_efficiency
    v[D_FILL] = t.latency_s(t.dram)
    v[D_LLC_HALF] = ((t.hardware.level_capacity_bytes(t.llc) or 0.0) * d.llc_resident_fraction
                     if t.llc is not None else 0.0)
    v[D_DRAM_BW] = t.bandwidth_bytes_per_s(t.dram) * d.dram_efficiency
    v[D_DRAM_LATENCY] = t.latency_s(t.dram)
    v[D_LLC_FED] = 1.0 if t.llc is not None and (not systolic or t.tiles_from_llc) else 0.0
    if t.llc is not None:
        v[D_LLC_BW] = t.bandwidth_bytes_per_s(t.llc) * d.onchip_efficiency
        v[D_LLC_LATENCY] = t.latency_s(t.llc)
    v[D_OVERHEAD] = t.kernel_overhead_s
    v[D_SHARING] = 1.0 if systolic else float(t.operand_sharing_tiles)
    v[D_SMEM_A], v[D_SMEM_B] = t.smem_reads_a, t.smem_reads_b
    # Little's law on the tile loads (``gemm_cost.in_flight_bandwidth``): peak figures, the loaded-latency factor
    v[D_IN_FLIGHT] = 1.0 if t.hardware.kind == "gpu" and not systolic else 0.0
    v[D_DRAM_PEAK_BW] = t.bandwidth_bytes_per_s(t.dram)
    v[D_LOADED_LATENCY] = d.loaded_latency_factor
    return v


def _disabled() -> bool:
    return os.environ.get("PERFMODEL_NO_JIT", "").lower() in ("1", "true", "yes")


def jit_enabled() -> bool:
    """True unless ``PERFMODEL_NO_JIT`` is set (to 1/true/yes) or numba does not import."""
    return not _disabled() and _kernels() is not None


def use_kernel(elements: int) -> bool:
    """Whether ``elements`` (op, candidate) pairs go through the compiled kernels: once they are loaded
    (``load``), always; before, only a grid of ``MIN_ELEMENTS`` or more, which loads them (a one-off
    ``perfmodel search`` or ``predict`` stays on numpy and does not import numba)."""
    if _disabled():
        return False
    if not _LOADED and elements < MIN_ELEMENTS:
        return False
    return load()


def load() -> bool:
    """Import numba and load (compiling the first time) every kernel now, for a long-running process (a
    server, a benchmark, a sweep) that will use them; True when the compiled path is on."""
    if _disabled():
        return False
    if not _LOADED:
        if not warm():
            return False
        _LOADED.append(True)
    return True


def cost_grid(v: FloatArray, space: GemmCandidates, batch: FloatArray, m: FloatArray, n: FloatArray,
              k: FloatArray, elem_bytes: FloatArray, peak: FloatArray, compulsory_bytes: FloatArray,
              b_ratio: FloatArray | None = None) -> tuple[FloatArray, np.ndarray[Any, np.dtype[np.int64]]]:
    """Every field of ``FIELDS`` for every (op, candidate): a (fields, ops, candidates) block and the reject codes."""
    kernels = _kernels()
    assert kernels is not None
    out = np.empty((len(FIELDS), batch.size, space.size))
    reject = np.empty((batch.size, space.size), dtype=np.int64)
    kernels[0](v, *space_arrays(space), *(kernel_array(a) for a in (
        batch, m, n, k, elem_bytes, peak, compulsory_bytes, _ratio(batch, b_ratio))), out, reject)
    return out, reject


def best_per_op(v: FloatArray, space: GemmCandidates, batch: FloatArray, m: FloatArray, n: FloatArray,
                k: FloatArray, elem_bytes: FloatArray, peak: FloatArray, compulsory_bytes: FloatArray,
                b_ratio: FloatArray | None = None) -> tuple[np.ndarray[Any, np.dtype[np.intp]], FloatArray]:
    """The cheapest candidate of each op (ties: smallest footprint, then first index) and its ``CHOICE_FIELDS``."""
    kernels = _kernels()
    assert kernels is not None
    index = np.empty(batch.size, dtype=np.intp)
    out = np.empty((len(CHOICE_FIELDS), batch.size))
    kernels[1](v, *space_arrays(space), *(kernel_array(a) for a in (
        batch, m, n, k, elem_bytes, peak, compulsory_bytes, _ratio(batch, b_ratio))), index, out)
    return index, out


def kernel_array(a: Any) -> FloatArray:
    """``a`` as the one array type the kernels are compiled for: float64, C-contiguous and writeable (``a``
    itself when it is one already). numba compiles a new machine-code signature for a strided ('A' layout) or a
    read-only array; each cost a live server's first ``/runs`` or ``/tiling`` ~7 s of CPU (issue 27, pages14):
    ``warm`` compiles only this type, so every call of a served process loads it instead."""
    out: FloatArray = np.ascontiguousarray(a, dtype=np.float64)
    return out if out.flags.writeable else out.copy()


def space_arrays(space: GemmCandidates) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray,
                                                 FloatArray]:
    """The candidate columns in the kernels' argument order (bm, bn, bk_bytes, stages, split, group), each a
    ``kernel_array``."""
    k = kernel_array
    return (k(space.bm), k(space.bn), k(space.bk_bytes), k(space.stages), k(space.split), k(space.group))


def _ratio(batch: FloatArray, b_ratio: FloatArray | None) -> FloatArray:
    """B's element size over A's per op (ones where not given)."""
    return np.ones(np.size(batch)) if b_ratio is None else np.asarray(b_ratio, dtype=np.float64)


@cache
def _kernels() -> tuple[Callable[..., None], Callable[..., None]] | None:
    try:
        from perfmodel.search import gemm_jit
    except ImportError:  # pragma: no cover - numba is a dependency; the numpy path covers its absence
        return None
    return gemm_jit.grid, gemm_jit.best


def warm() -> bool:
    """Compile every kernel once (numba writes them to its disk cache): for an image build, so the first
    request of a fresh process loads them instead of compiling (~20 s of CPU). False where the JIT is off."""
    if not jit_enabled():
        return False
    from perfmodel.machine import tables
    from perfmodel.search.gemm_scoring import score_compiled
    from perfmodel.search.gemm_space import compact_space, full_space
    from perfmodel.specs import load_hardware

    t = tables(load_hardware("nvidia-h100-sxm5-80gb"))
    one = np.ones(1)
    args = (one, one * 512, one * 512, one * 512, one * 2.0, one * t.matrix_peak[t.matrix_peak > 0][0], one)
    best_per_op(device_vector(t), compact_space(t), *args)
    cost_grid(device_vector(t), compact_space(t), *args)
    score_compiled(t, full_space(t), *(float(a[0]) for a in args))
    return True


if __name__ == "__main__":
    print("numba kernels compiled and cached" if warm() else "JIT disabled: nothing to compile")
