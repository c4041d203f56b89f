"""A device's roofs: compute peaks per dtype (best engine) and the bandwidth of each memory level."""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.hardware import Hardware
from perfmodel.machine import tables

ENGINE_CLASSES = ("matrix", "vector")  # special-function engines count transcendentals, not FLOPs


@dataclass(frozen=True)
class ComputeRoof:
    dtype: str
    engine: str
    peak_flops_per_s: float


@dataclass(frozen=True)
class MemoryRoof:
    level: str
    kind: str
    bandwidth_bytes_per_s: float
    assumed: bool  # the spec gives no figure: the model's default multiple of DRAM


def compute_roofs(hw: Hardware, per_engine: bool = False) -> list[ComputeRoof]:
    """Per dtype, the best dense peak over the matrix and vector engines (``per_engine``: one roof per engine
    and dtype, as Nsight Compute draws tensor and FMA roofs apart), highest first."""
    best: dict[tuple[str, str], ComputeRoof] = {}
    for engine in hw.engines:
        if engine.engine_class not in ENGINE_CLASSES:
            continue
        for dtype, peak in engine.peak_flops_per_s.items():
            key = (dtype.value, engine.name if per_engine else "")
            current = best.get(key)
            if current is None or peak > current.peak_flops_per_s:
                best[key] = ComputeRoof(dtype.value, engine.name, peak)
    return sorted(best.values(), key=lambda r: -r.peak_flops_per_s)


def merged_roofs(hw: Hardware, dtypes: list[str] | None = None, per_engine: bool = False) -> list[ComputeRoof]:
    """Compute roofs with the dtypes that share an engine and a peak drawn once ("fp8_e4m3/int8")."""
    groups: dict[tuple[str, float], list[str]] = {}
    for roof in compute_roofs(hw, per_engine):
        if dtypes is None or roof.dtype in dtypes:
            groups.setdefault((roof.engine, roof.peak_flops_per_s), []).append(roof.dtype)
    return [ComputeRoof("/".join(names), engine, peak) for (engine, peak), names in groups.items()]


def memory_roofs(hw: Hardware) -> list[MemoryRoof]:
    """Chip-wide bandwidth per level, outermost first; levels without a figure use the model's default
    where it has one (the last-level cache) and are left out otherwise."""
    t = tables(hw)
    roofs: list[MemoryRoof] = []
    for level in hw.levels:
        if level.bandwidth_bytes_per_s is not None:
            roofs.append(MemoryRoof(level.name, level.kind, level.bandwidth_bytes_per_s, False))
        elif level is t.llc:
            roofs.append(MemoryRoof(level.name, level.kind, t.bandwidth_bytes_per_s(level), True))
    return roofs


def ridge_point(hw: Hardware, dtype: str) -> float | None:
    """Intensity [FLOP/byte] where the dtype's peak meets the DRAM roof."""
    roofs = {r.dtype: r for r in compute_roofs(hw)}
    dram = hw.levels[0].bandwidth_bytes_per_s
    if dtype not in roofs or not dram:
        return None
    return roofs[dtype].peak_flops_per_s / dram
