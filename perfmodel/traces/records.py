"""What every trace parser produces: ``KernelRecord`` (SI units), ``ParsedTrace`` and ``TraceError``."""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

# "device": device work that is not a GPU kernel (an accelerator's own events, a CUPTI range): see device_kind
Category = Literal["kernel", "memcpy", "memset", "cpu_op", "device"]
DEVICE_TIME_CATEGORIES = frozenset({"kernel", "memcpy", "memset", "device"})

MAX_RECORDS = 5_000_000  # kernels kept from one trace; beyond it the parser stops with a warning
SELF_SUFFIX = " [self]"  # name suffix of a CPU op's own time outside the child ops split from it
MAX_NAME_CHARS = 4096  # kernel and op names are cut to this length (C++ template names run to ~3,000)
MAX_DIMS = 64  # tensors per op whose shapes are kept
MAX_RANK = 16  # dimensions per tensor shape
LIST_TYPE = "TensorList"  # the ``Input type`` PyTorch records for a tensor-list argument (foreach ops, cat)

_EMPTY: Mapping[str, float] = types.MappingProxyType({})


class TraceError(ValueError):
    """A file that is not a trace of a known format, or a broken one: says what was expected."""


@dataclass(frozen=True, slots=True)
class OpCall:
    """One framework op call (a Kineto ``cpu_op``) that enclosed the launch of a kernel."""

    call_id: int  # unique within one parsed trace
    name: str
    start_s: float
    duration_s: float
    input_dims: tuple[tuple[int, ...] | None, ...] | None = None  # None where a shape was not recorded
    input_types: tuple[str, ...] | None = None
    concrete_inputs: tuple[str, ...] | None = None  # scalar argument values (newer PyTorch)
    parent: OpCall | None = None  # the enclosing op on the same thread
    input_strides: tuple[tuple[int, ...] | None, ...] | None = None  # per argument, in elements (newer PyTorch)
    # shapes of the outputs, where the trace tells them: the gradients its backward node receives (linked by
    # the autograd sequence number); None where unknown
    output_dims: tuple[tuple[int, ...] | None, ...] | None = None
    # per argument, the shapes of a tensor list (``Input type`` ``TensorList``: foreach ops); None elsewhere
    input_lists: tuple[tuple[tuple[int, ...], ...] | None, ...] | None = None


@dataclass(frozen=True, slots=True)
class CommArgs:
    """The ``record_param_comms`` arguments of one collective (element counts per rank)."""

    collective: str
    in_elements: int
    out_elements: int
    group_size: int | None
    dtype: str  # a c10 scalar type name: ``Float``, ``BFloat16``, ...


@dataclass(frozen=True, slots=True)
class KernelRecord:
    """One measured kernel (or, from summary formats, ``instances`` launches of one kernel).

    ``duration_s`` is the total device time of the ``instances`` launches (1 for trace formats).
    ``grid``/``block`` are in thread blocks / threads per block (AMD grid sizes are converted).
    ``ops`` are the enclosing framework ops, outermost first (empty when the trace has none).
    """

    name: str
    category: Category
    duration_s: float
    source_format: str
    start_s: float | None = None
    device: int | None = None
    stream: int | None = None
    correlation: int | None = None
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    op_name: str | None = None
    input_dims: tuple[tuple[int, ...] | None, ...] | None = None
    input_types: tuple[str, ...] | None = None
    counters: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    instances: int = 1
    ops: tuple[OpCall, ...] = ()
    collective: CommArgs | None = None  # what record_param_comms recorded for an NCCL/RCCL kernel
    transfer_bytes: int | None = None  # bytes a memcpy/memset moved or filled, where recorded
    device_kind: str | None = None  # what ran it where not a GPU kernel ("mtia", "cupti range"); None: GPU

    @property
    def innermost_op(self) -> OpCall | None:
        return self.ops[-1] if self.ops else None


@dataclass
class ParsedTrace:
    """The kernels of one trace file, its detected format and what the parser had to skip or assume."""

    format: str
    kernels: list[KernelRecord]
    warnings: list[str] = field(default_factory=list)
    device_name: str | None = None  # the device the file names (Kineto deviceProperties), where it does
    world_size: int | None = None  # ranks of the default process group (Kineto distributedInfo)

    @property
    def total_kernel_time_s(self) -> float:
        return sum(k.duration_s for k in self.kernels)

    @property
    def has_device_time(self) -> bool:
        """False for a CPU-only profile: its records are framework op times, not device time."""
        return any(k.category in DEVICE_TIME_CATEGORIES for k in self.kernels)


class CounterTotals:
    """Profiler counters of several launches as one: totals (bytes, FLOPs, instructions, cycles) add up; rates and
    settings (``..._pct``, ``..._hz``, registers per thread) are averaged, weighted by each launch's time."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.weighted: dict[str, float] = {}
        self.weight_s: dict[str, float] = {}

    @staticmethod
    def additive(counter: str) -> bool:
        return not (counter.endswith(("_pct", "_hz")) or counter == "registers_per_thread")

    def add(self, counters: Mapping[str, float], duration_s: float) -> None:
        for key, value in counters.items():
            if self.additive(key):
                self.sums[key] = self.sums.get(key, 0.0) + float(value)
            else:
                self.weighted[key] = self.weighted.get(key, 0.0) + float(value) * duration_s
                self.weight_s[key] = self.weight_s.get(key, 0.0) + duration_s

    def result(self) -> dict[str, float]:
        means = {k: v / self.weight_s[k] for k, v in self.weighted.items() if self.weight_s[k] > 0}
        return {**self.sums, **means}


def clip_name(value: object) -> str:
    """A name as plain text, cut to ``MAX_NAME_CHARS`` (kept verbatim otherwise: no escaping here)."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return text if len(text) <= MAX_NAME_CHARS else text[:MAX_NAME_CHARS] + "…"


def as_int(value: object) -> int | None:
    """An integer from a JSON/CSV value ('7', 7, 7.0, '0x1f'), None if it is not one."""
    if type(value) is int:
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        text = value.strip().replace(",", "")
        try:
            return int(text, 0) if text.lower().startswith("0x") else int(float(text))
        except ValueError:
            return None
    return None


def as_float(value: object) -> float | None:
    """A finite float from a JSON/CSV value ('1,234.5' included), None otherwise."""
    if type(value) is float:
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value.strip().replace(",", ""))
        except ValueError:
            return None
    else:
        return None
    return result if result == result and abs(result) != float("inf") else None


def dim3(value: object) -> tuple[int, int, int] | None:
    """(x, y, z) from [x, y, z], '(x, y, z)', 'x y z' or a single number."""
    if type(value) is list and len(value) == 3 and all(type(v) is int for v in value):
        return value[0], value[1], value[2]
    if isinstance(value, str):
        parts = [p for p in value.strip("()[] ").replace(",", " ").split() if p]
        value = parts
    if isinstance(value, list | tuple):
        items = [as_int(v) for v in list(value)[:3]]
        if not items or any(v is None for v in items):
            return None
        padded = [int(v) for v in items if v is not None] + [1] * (3 - len(items))
        return padded[0], padded[1], padded[2]
    single = as_int(value)
    return (single, 1, 1) if single is not None else None
