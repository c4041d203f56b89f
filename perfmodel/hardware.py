"""Hardware description: engines, memory levels, interconnect (pydantic, frozen, SI units).

The lookups the model uses (``citation``, ``level``, ``peak_flops_per_s``, ...) live in
perfmodel.hardware_methods, pydantic-free, shared with the plain copies ``perfmodel predict`` reads.

Every number carries a citation: a block's ``source`` covers its numbers, ``sources`` names a
different citation per field, and ``unknown`` gives the reason for every optional number left null.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from perfmodel.dtypes import DType
from perfmodel.hardware_methods import EngineClass, EngineMethods, HardwareMethods, SourcedMethods

LevelKind = Literal["dram", "cache", "scratchpad", "registers"]
HardwareKind = Literal["gpu", "npu", "tpu", "cpu"]

_LEVEL_RANK = {"dram": 0, "cache": 1, "scratchpad": 1, "registers": 2}


class Sourced(BaseModel, SourcedMethods):
    """Base for blocks whose numbers need citations."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True, allow_inf_nan=False)

    source: str = Field(min_length=3, description="Citation (document and section) for this block's numbers")
    sources: dict[str, str] = Field(default_factory=dict, description="Per-field citation overriding `source`")
    unknown: dict[str, str] = Field(default_factory=dict, description="Reason for each optional number left null")

    @model_validator(mode="after")
    def _check_citations(self) -> Sourced:
        names = set(type(self).model_fields) - {"source", "sources", "unknown"}
        for key in list(self.sources) + list(self.unknown):
            if key not in names:
                raise ValueError(f"citation for unknown field {key!r}; fields: {sorted(names)}")
        for name in self._explain_if_null:
            if getattr(self, name) is None and name not in self.unknown:
                raise ValueError(f"{name} is null or missing: give the number or unknown.{name}: reason")
        return self

    _explain_if_null: ClassVar[tuple[str, ...]] = ()


class ComputeEngine(Sourced, EngineMethods):
    """One class of compute unit (tensor/matrix, vector/SIMT, special-function)."""

    name: str = Field(min_length=1)
    engine_class: EngineClass
    count: int | None = Field(default=None, gt=0, description="Engines on the chip (e.g. tensor cores)")
    peak_flops_per_s: dict[DType, float] = Field(
        description="Dense peak per dtype, whole chip; absent dtype = unsupported. "
        "For special-function engines: transcendental operations per second."
    )
    mma_shape: tuple[int, int, int] | None = Field(
        default=None, description="Granularity m, n, k of one matrix instruction or systolic pass"
    )
    mma_scope: Literal["warp", "warpgroup", "cta"] | None = Field(
        default=None, description="Who issues one matrix instruction, which sets the shared-memory operand reads per "
        "K-step of a BM x BN tile: warp (mma.sync, MFMA: a 2 x 2 warp grid reads 2·(BM + BN) rows), warpgroup "
        "(wgmma: 2 warpgroups split M and each reads all of B: BM + 2·BN), cta (tcgen05: one MMA reads BM + BN); "
        "null: warp")
    sustained_clock_hz: dict[DType, float] | None = Field(
        default=None, description="Median clock per dtype the vendor measured under dense matrix load (the peaks are "
        "at the chip's clock_hz, its boost): a dtype's peak scales by its sustained clock / clock_hz; a dtype not "
        "listed takes the lowest listed clock")
    energy_per_flop_j: dict[DType, float] | None = Field(
        default=None, description="Board energy per dense matrix FLOP (J) per dtype at the power limit, where no "
        "sustained clock is measured: the engine then sustains at most tdp_w / energy_per_flop_j FLOP/s, so the "
        "dtype's peak scales by min(1, tdp_w / (energy × peak)); a dtype not listed takes the lowest listed share")
    concurrent_integer_issue: bool | None = Field(
        default=None, description="A vector/SIMT engine whose integer instructions (address arithmetic, predicates) "
        "issue to their own pipe beside its FP32 FMAs (Volta and later NVIDIA SMs); null: they share the FP32 issue "
        "slots (Pascal, GCN)")
    operand_sharing_tiles: int | None = Field(
        default=None, ge=1, le=16, description="Output tiles on neighbouring units that share one load of an operand "
        "panel from the last-level cache: TMA multicast in a thread-block cluster (Hopper), the 2-SM MMA "
        "(Blackwell); null or 1: every tile loads its own panels")

    @field_validator("sustained_clock_hz", "energy_per_flop_j")
    @classmethod
    def _positive_per_dtype(cls, values: dict[DType, float] | None, info: ValidationInfo) -> dict[DType, float] | None:
        """A per-dtype table, when given, names at least one dtype and holds only positive values."""
        if values is not None and (not values or not all(v > 0 for v in values.values())):
            unit = "clock > 0 Hz" if info.field_name == "sustained_clock_hz" else "energy > 0 J"
            raise ValueError(f"{info.field_name}: give at least one dtype, each {unit}")
        return values

    @field_validator("peak_flops_per_s")
    @classmethod
    def _positive_peaks(cls, peaks: dict[DType, float]) -> dict[DType, float]:
        if not peaks:
            raise ValueError("at least one dtype peak is needed")
        for dtype, value in peaks.items():
            if not value > 0:
                raise ValueError(f"peak for {dtype.value} must be > 0 (omit unsupported dtypes)")
        return peaks


class MemoryLevel(Sourced):
    """A memory level; bandwidth is the chip-wide aggregate, capacity per unit if ``per_unit``."""

    _explain_if_null = ("capacity_bytes", "bandwidth_bytes_per_s", "latency_s")

    name: str = Field(min_length=1)
    kind: LevelKind
    capacity_bytes: float | None = Field(default=None, gt=0)
    bandwidth_bytes_per_s: float | None = Field(default=None, gt=0, description="Read, chip-wide")
    write_bandwidth_bytes_per_s: float | None = Field(default=None, gt=0)
    latency_s: float | None = Field(default=None, gt=0, description="Load-to-use latency")
    per_unit: bool = False
    banks: int | None = Field(default=None, gt=0)
    bank_width_bytes: int | None = Field(default=None, gt=0)
    access_granularity_bytes: int | None = Field(
        default=None, gt=0, description="Smallest transfer (sector / cache line)"
    )


class Interconnect(Sourced):
    """Scale-up links within a node and the scale-out network across nodes (per device)."""

    _explain_if_null = (
        "link_bandwidth_bytes_per_s", "link_latency_s", "devices_per_node",
        "network_bandwidth_bytes_per_s", "network_latency_s",
    )

    link_bandwidth_bytes_per_s: float | None = Field(
        default=None, gt=0, description="Per device, per direction, all links together"
    )
    link_latency_s: float | None = Field(default=None, gt=0)
    devices_per_node: int | None = Field(
        default=None, gt=0, description="Scale-up domain: devices reachable over the links (NVLink, ICI)"
    )
    network_bandwidth_bytes_per_s: float | None = Field(
        default=None, gt=0, description="Per device, per direction"
    )
    network_latency_s: float | None = Field(default=None, gt=0)
    name: str | None = None
    topology: Literal["switch", "mesh", "pcie"] | None = Field(
        default=None, description="How the node's devices meet: a switch (NVSwitch), direct links (mesh: hybrid "
        "cube-mesh, xGMI, ICI) or the host's PCIe; null: a switch where devices_per_node is given, else PCIe")
    bridge_bandwidth_bytes_per_s: float | None = Field(
        default=None, gt=0, description="Per device, per direction: a bridge (NVLink bridge) joining pairs of cards")
    socket_link_bandwidth_bytes_per_s: float | None = Field(
        default=None, gt=0, description="Per direction, sustained: the CPU socket link (QPI, UPI, xGMI) of a dual-root "
        "PCIe node, which a ring over more than half the node's devices crosses; NCCL's topology counts Intel QPI 6, "
        "Skylake UPI 10, AMD 16 GB/s (src/graph/topo.h); null: one root, nothing to cross")
    devices_per_pcie_switch: int | None = Field(
        default=None, gt=0, description="PCIe nodes: devices behind one PCIe switch whose collective traffic shares "
        "the switch's one uplink (link_bandwidth_bytes_per_s) to the CPU, as where it is staged through host memory "
        "instead of moving peer to peer; null: each device's traffic has its own link")
    host_link_bandwidth_bytes_per_s: float | None = Field(
        default=None, gt=0, description="Per direction: the link to the host's memory (PCIe x16, NVLink-C2C) that "
        "memcpy HtoD/DtoH crosses; null: PCIe 4.0 x16 (25e9) is assumed")
    network_transport: Literal["rdma", "socket"] | None = Field(
        default=None, description="How NCCL crosses the network: rdma (InfiniBand, RoCE, EFA: each device's own NIC at "
        "network_bandwidth_bytes_per_s) or socket (TCP over the host's one Ethernet port, shared by the node's "
        "devices: network_bandwidth_bytes_per_s is then that port's, per node, of which NCCL's sockets reach about "
        "half); null: rdma")
    in_network_reduction: bool = Field(
        default=False, description="The switch reduces in the network (NVLink SHARP: NCCL's NVLS algorithm)")


class Dma(Sourced):
    """Explicit DMA engines of a scratchpad machine."""

    _explain_if_null = ("engines", "latency_s", "bandwidth_bytes_per_s")

    engines: int | None = Field(default=None, gt=0)
    latency_s: float | None = Field(default=None, gt=0, description="Fixed cost per descriptor")
    bandwidth_bytes_per_s: float | None = Field(default=None, gt=0, description="All engines")


class Hardware(Sourced, HardwareMethods):
    """A device: compute engines, memory levels outermost first, interconnect."""

    _explain_if_null = ("clock_hz", "launch_overhead_s", "tdp_w")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=80)
    name: str
    vendor: str
    kind: HardwareKind
    units: int = Field(gt=0, description="SMs / CUs / cores / NeuronCores / TensorCores")
    unit_name: str
    clock_hz: float | None = Field(default=None, gt=0, description="Boost clock of the peaks")
    engines: tuple[ComputeEngine, ...] = Field(min_length=1)
    levels: tuple[MemoryLevel, ...] = Field(min_length=1, description="Outermost first")
    interconnect: Interconnect | None = None
    dma: Dma | None = None
    launch_overhead_s: float | None = Field(
        default=None, gt=0, description="Fixed per-kernel cost: launch, ramp-up and tail"
    )
    max_resident_tiles_per_unit: int | None = Field(
        default=None, gt=0, description="Max thread blocks / tiles resident on one unit"
    )
    max_resident_threads_per_unit: int | None = Field(
        default=None, gt=0, description="Max threads resident on one unit (GPUs)"
    )
    tdp_w: float | None = Field(default=None, gt=0)
    supported_ops: tuple[str, ...] | None = Field(
        default=None, description="Ops the device's compiler runs: op kinds (matmul, conv2d, ...) or importer op "
        "types (ONNX Conv, Gelu, ...), case-insensitive; null: all. Others fall back to the host (perfmodel.advice)")
    derived_from: str | None = None
    overrides: dict[str, Any] | None = None

    @field_validator("engines")
    @classmethod
    def _unique_engines(cls, engines: tuple[ComputeEngine, ...]) -> tuple[ComputeEngine, ...]:
        names = [e.name for e in engines]
        if len(set(names)) != len(names):
            raise ValueError(f"engine names repeat: {names}")
        return engines

    @field_validator("levels")
    @classmethod
    def _ordered_levels(cls, levels: tuple[MemoryLevel, ...]) -> tuple[MemoryLevel, ...]:
        names = [lv.name.lower() for lv in levels]
        if len(set(names)) != len(names):
            raise ValueError(f"level names repeat: {[lv.name for lv in levels]}")
        if levels[0].kind != "dram":
            raise ValueError("levels[0] must be the off-chip memory (kind dram): list outermost first")
        for index in range(1, len(levels)):
            level, previous = levels[index], levels[index - 1]
            if _LEVEL_RANK[level.kind] < _LEVEL_RANK[previous.kind]:
                raise ValueError(f"levels[{index}] ({level.name}, {level.kind}) after {previous.name} "
                                 f"({previous.kind}): levels are out of order, list outermost first")
            if (level.kind != "registers" and level.capacity_bytes is not None
                    and previous.capacity_bytes is not None and level.capacity_bytes > previous.capacity_bytes):
                raise ValueError(f"levels[{index}] ({level.name}) is larger than {previous.name}: "
                                 "levels are out of order, list outermost first")
        return levels

    @functools.cached_property
    def content_hash(self) -> str:
        """Short sha256 of the canonical JSON, for provenance."""
        data = self.model_dump(mode="json")
        if data.get("supported_ops") is None:  # absent = all ops: the hash of specs without it is unchanged
            data.pop("supported_ops", None)
        for engine in data.get("engines", []):  # likewise the engine fields added later, where absent
            for field in ("mma_scope", "sustained_clock_hz", "energy_per_flop_j", "operand_sharing_tiles"):
                if engine.get(field) is None:
                    engine.pop(field, None)
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]
