"""AMD GPU counters (rocprof v1 / omniperf columns, rocprofv3 ``counter_collection`` rows) as the normalised
counters of ``KernelRecord``: bytes per memory level, FLOPs per dtype, instructions, cycles, busy percentages.

Bytes and FLOPs follow the formulas of rocprof's derived metrics and omniperf's roofline:
- DRAM (HBM) bytes: ``FETCH_SIZE + WRITE_SIZE`` (kilobytes of 1024 B), else from the L2-to-memory requests
  ``TCC_EA[0]_RDREQ`` (64 B; ``_32B`` ones 32 B; ``TCC_BUBBLE`` 128 B on MI300) and ``TCC_EA[0]_WRREQ`` (32 B;
  ``_64B`` ones 64 B);
- L2 bytes: the vector L1's requests to L2 (``TCP_TCC_{READ,WRITE,ATOMIC_*}_REQ``), 64 B each;
- FLOPs: per-wave VALU instruction counts x the wave's lanes (an FMA counts 2; an upper bound for kernels with
  masked lanes), and matrix-core FLOPs per dtype as ``SQ_INSTS_VALU_MFMA_MOPS_<dtype>`` x 512.
"""

from __future__ import annotations

from collections.abc import Mapping

KIB = 1024.0  # rocprof's FETCH_SIZE / WRITE_SIZE unit
L1_TO_L2_REQUEST_BYTES = 64.0
MFMA_FLOPS_PER_MOP = 512.0
DEFAULT_WAVE_SIZE = 64  # CDNA wavefronts; RDNA runs wave32 (the files say so in their wave size column)

_DIRECT = {
    "SQ_INSTS_VALU": "valu_inst", "SQ_INSTS_MFMA": "mfma_inst", "SQ_INSTS_SALU": "salu_inst",
    "SQ_INSTS_LDS": "lds_inst", "SQ_INSTS_VMEM_RD": "vmem_read_inst", "SQ_INSTS_VMEM_WR": "vmem_write_inst",
    "SQ_WAVES": "waves", "Wavefronts": "waves", "GRBM_GUI_ACTIVE": "gpu_cycles", "SQ_BUSY_CYCLES": "sq_busy_cycles",
    "SQ_WAVE_CYCLES": "wave_cycles",
    # rocprof derived metrics that are percentages (averaged, not added, over launches)
    "GPUBusy": "gpu_busy_pct", "VALUBusy": "valu_busy_pct", "SALUBusy": "salu_busy_pct",
    "MemUnitBusy": "mem_unit_busy_pct", "MemUnitStalled": "mem_unit_stalled_pct", "L2CacheHit": "l2_hit_rate_pct",
    "OccupancyPercent": "achieved_occupancy_pct",
}
_FETCH_WRITE = ("FETCH_SIZE", "WRITE_SIZE")
_EA_PREFIXES = ("TCC_EA0_", "TCC_EA_")
_EA = tuple(f"{p}{n}" for p in _EA_PREFIXES for n in ("RDREQ_sum", "RDREQ_32B_sum", "WRREQ_sum", "WRREQ_64B_sum"))
_L1_TO_L2 = ("TCP_TCC_READ_REQ_sum", "TCP_TCC_WRITE_REQ_sum", "TCP_TCC_ATOMIC_WITH_RET_REQ_sum",
             "TCP_TCC_ATOMIC_WITHOUT_RET_REQ_sum")
_VALU_DTYPES = {"fp16": "F16", "fp32": "F32", "fp64": "F64"}
_VALU_OPS = ("ADD", "MUL", "TRANS", "FMA")
_MOPS = {"F16": "fp16", "BF16": "bf16", "F32": "fp32", "F64": "fp64", "F8": "fp8", "I8": "int8"}
WANTED = frozenset(
    set(_DIRECT) | set(_FETCH_WRITE) | set(_EA) | set(_L1_TO_L2) | {"TCC_BUBBLE_sum"}
    | {f"SQ_INSTS_VALU_MFMA_MOPS_{t}" for t in _MOPS}
    | {f"SQ_INSTS_VALU_{op}_{suffix}" for op in _VALU_OPS for suffix in _VALU_DTYPES.values()})


def _dram_bytes(values: Mapping[str, float]) -> float | None:
    if any(name in values for name in _FETCH_WRITE):
        return sum(values.get(name, 0.0) for name in _FETCH_WRITE) * KIB
    for prefix in _EA_PREFIXES:
        reads, writes = values.get(prefix + "RDREQ_sum"), values.get(prefix + "WRREQ_sum")
        if reads is None and writes is None:
            continue
        reads_32 = values.get(prefix + "RDREQ_32B_sum", 0.0)
        bubble = values.get("TCC_BUBBLE_sum", 0.0)
        writes_64 = values.get(prefix + "WRREQ_64B_sum", 0.0)
        read_bytes = 32 * reads_32 + 128 * bubble + 64 * max(0.0, (reads or 0.0) - reads_32 - bubble)
        write_bytes = 64 * writes_64 + 32 * max(0.0, (writes or 0.0) - writes_64)
        return read_bytes + write_bytes
    return None


_VALU_NAMES = frozenset(f"SQ_INSTS_VALU_{op}_{suffix}" for op in _VALU_OPS for suffix in _VALU_DTYPES.values())
_MOPS_NAMES = frozenset(f"SQ_INSTS_VALU_MFMA_MOPS_{t}" for t in _MOPS)


def normalise(values: Mapping[str, float], wave_size: int | None = None) -> dict[str, float]:
    """Normalised counters from raw AMD counter values by name (names outside ``WANTED`` are ignored)."""
    out = {_DIRECT[name]: value for name, value in values.items() if name in _DIRECT}
    present = values.keys()
    dram = _dram_bytes(values)
    if dram is not None:
        out["dram_bytes"] = dram
    if not present.isdisjoint(_L1_TO_L2):
        out["l2_bytes"] = sum(values.get(name, 0.0) for name in _L1_TO_L2) * L1_TO_L2_REQUEST_BYTES
    if not present.isdisjoint(_VALU_NAMES):
        lanes = wave_size or DEFAULT_WAVE_SIZE
        for dtype, suffix in _VALU_DTYPES.items():
            counts = [values.get(f"SQ_INSTS_VALU_{op}_{suffix}") for op in _VALU_OPS]
            if any(c is not None for c in counts):
                add, mul, trans, fma = (c or 0.0 for c in counts)
                out[f"flops_{dtype}"] = lanes * (add + mul + trans + 2.0 * fma)
    if not present.isdisjoint(_MOPS_NAMES):
        for suffix, dtype in _MOPS.items():
            mops = values.get(f"SQ_INSTS_VALU_MFMA_MOPS_{suffix}")
            if mops is not None:
                out[f"matrix_flops_{dtype}"] = MFMA_FLOPS_PER_MOP * mops
    return out


__all__ = ["WANTED", "normalise"]
