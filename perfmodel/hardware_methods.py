"""The hardware model's lookups without pydantic, and plain frozen copies of validated devices (issue 25).

The pydantic models of perfmodel.hardware take these methods from the mixins below; ``plain_copy`` turns a
validated ``Hardware`` into objects of the ``Plain*`` classes here: the same field values (the very objects),
the same methods and the ``content_hash`` computed, so the model reads them as it reads the validated ones.
``perfmodel predict`` loads bundled devices as such copies (perfmodel.spec_cache) and so imports neither
pydantic nor the models (~0.1 s of CPU, benchmarks/cli_start.py). They have no pydantic API (``model_dump``,
validation): only the prediction code reads them.

Imports only the standard library and perfmodel.dtypes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from perfmodel.dtypes import DType

if TYPE_CHECKING:
    from perfmodel.hardware import ComputeEngine, Hardware, MemoryLevel

EngineClass = Literal["matrix", "vector", "special"]


class SourcedMethods:
    """``citation`` of a block with ``source`` and ``sources``."""

    __slots__ = ()
    if TYPE_CHECKING:
        source: str
        sources: dict[str, str]

    def citation(self, field: str) -> str:
        """The citation of one field (its own, else the block's)."""
        return self.sources.get(field, self.source)


class EngineMethods(SourcedMethods):
    """The compute engine's lookups."""

    __slots__ = ()
    if TYPE_CHECKING:
        peak_flops_per_s: dict[DType, float]
        sustained_clock_hz: dict[DType, float] | None
        energy_per_flop_j: dict[DType, float] | None

    def sustained_fraction(self, dtype: DType, clock_hz: float | None, tdp_w: float | None = None) -> float:
        """The share of ``dtype``'s peak (given at ``clock_hz``, Hz) that the engine sustains under dense matrix
        load: the measured sustained clock / clock_hz where the vendor publishes one; else, with an energy per FLOP
        and the board's ``tdp_w``, the power-limited share tdp_w / (energy × peak); else 1. Never above 1."""
        if self.sustained_clock_hz and clock_hz:
            clock = self.sustained_clock_hz.get(dtype, min(self.sustained_clock_hz.values()))
            return min(clock / clock_hz, 1.0)
        if self.energy_per_flop_j and tdp_w:
            shares = {d: tdp_w / (e * self.peak_flops_per_s[d]) for d, e in self.energy_per_flop_j.items()
                      if d in self.peak_flops_per_s}
            if shares:
                return min(shares.get(dtype, min(shares.values())), 1.0)
        return 1.0


class HardwareMethods(SourcedMethods):
    """The device's lookups used by the model."""

    __slots__ = ()
    if TYPE_CHECKING:
        id: str
        units: int
        engines: tuple[ComputeEngine, ...]
        levels: tuple[MemoryLevel, ...]

    @property
    def dram(self) -> MemoryLevel:
        return self.levels[0]

    def level(self, name: str) -> MemoryLevel:
        for level in self.levels:
            if level.name.lower() == name.lower():
                return level
        raise KeyError(f"{self.id} has no memory level {name!r}")

    def engine(self, name: str) -> ComputeEngine:
        for engine in self.engines:
            if engine.name == name:
                return engine
        raise KeyError(f"{self.id} has no engine {name!r}")

    def engines_of(self, engine_class: EngineClass) -> tuple[ComputeEngine, ...]:
        return tuple(e for e in self.engines if e.engine_class == engine_class)

    def level_capacity_bytes(self, level: MemoryLevel) -> float | None:
        """Whole-chip capacity of a level (per-unit capacity times units)."""
        if level.capacity_bytes is None:
            return None
        return level.capacity_bytes * (self.units if level.per_unit else 1)

    def peak_flops_per_s(self, dtype: DType, engine_class: EngineClass = "matrix") -> float | None:
        """Best dense peak for a dtype over the engines of one class, None if unsupported."""
        peaks = [e.peak_flops_per_s[dtype] for e in self.engines_of(engine_class) if dtype in e.peak_flops_per_s]
        return max(peaks) if peaks else None

    def best_sixteen_bit_flops_per_s(self) -> float | None:
        """The best dense 16-bit matrix peak, FLOP/s: the larger of fp16 and bf16 (they differ on some parts, e.g.
        MI100's fp16 184.6 vs bf16 92.3 TFLOP/s); one definition for the CLI and the dashboard."""
        peaks = [p for p in (self.peak_flops_per_s(DType.FP16), self.peak_flops_per_s(DType.BF16)) if p]
        return max(peaks) if peaks else None


# --- plain copies ----------------------------------------------------------------------------

class _Plain:
    """A frozen record: its fields in ``__dict__``, set once."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"

    def __getattr__(self, name: str) -> Any:  # a typo or a pydantic method: say which
        raise AttributeError(f"{type(self).__name__} (a plain copy of a validated device) has no {name!r}")


class PlainSourced(_Plain, SourcedMethods):
    """A plain copy of a memory level, interconnect or DMA block."""


class PlainEngine(_Plain, EngineMethods):
    """A plain copy of a ``ComputeEngine``."""


class PlainHardware(_Plain, HardwareMethods):
    """A plain copy of a ``Hardware``, with its ``content_hash``."""


def plain_copy(hardware: Hardware) -> PlainHardware:
    """``hardware`` as plain objects: every field of every block the very value validated."""
    values = _fields(hardware)
    values["engines"] = tuple(PlainEngine(_fields(e)) for e in hardware.engines)
    values["levels"] = tuple(PlainSourced(_fields(lv)) for lv in hardware.levels)
    for name in ("interconnect", "dma"):
        block = getattr(hardware, name)
        values[name] = None if block is None else PlainSourced(_fields(block))
    values["content_hash"] = hardware.content_hash
    return PlainHardware(values)


def _fields(block: Any) -> dict[str, Any]:
    return {name: getattr(block, name) for name in type(block).model_fields}
