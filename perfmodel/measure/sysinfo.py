"""What the OS says about this host: CPU model, usable threads, caches (sysfs), memory size."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu{cpu}/cache")
CPUINFO = Path("/proc/cpuinfo")
MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class CacheInfo:
    """One data or unified cache level as sysfs describes it (capacity of one instance, bytes)."""

    level: int
    type: str  # "Data" or "Unified"
    size_bytes: int
    shared_cpus: int  # logical CPUs sharing one instance
    line_bytes: int | None
    source: str

    @property
    def name(self) -> str:
        """``L1D`` for a data cache, ``L2``/``L3`` for unified ones."""
        return f"L{self.level}" + ("D" if self.type == "Data" else "")


@dataclass(frozen=True)
class CpuInfo:
    """Host identity and topology."""

    model: str
    vendor: str
    threads: int  # logical CPUs this process may run on (os.sched_getaffinity)
    flags: frozenset[str]
    caches: tuple[CacheInfo, ...]  # innermost first; empty when sysfs has none
    caches_note: str
    memory_bytes: int | None


def usable_threads() -> int:
    """Logical CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _first_cpu() -> int:
    return min(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0


def _cpuinfo_fields(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # first processor block only
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


_VENDORS = {"AuthenticAMD": "amd", "GenuineIntel": "intel", "HygonGenuine": "hygon"}


def parse_size_bytes(text: str) -> int:
    """A sysfs cache size (``48K``, ``1024K``, ``32M``) in bytes."""
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def count_cpu_list(text: str) -> int:
    """Number of CPUs in a sysfs list such as ``0-3,8``."""
    total = 0
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        total += int(high or low) - int(low) + 1
    return total


def read_caches(cpu: int | None = None) -> tuple[tuple[CacheInfo, ...], str]:
    """Data/unified caches of one CPU from sysfs, innermost first, and a note on where they came from."""
    base = Path(str(SYSFS_CACHE).format(cpu=_first_cpu() if cpu is None else cpu))
    found: list[CacheInfo] = []
    for index in sorted(base.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = parse_size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        shared = _read_optional(index / "shared_cpu_list")
        line = _read_optional(index / "coherency_line_size")
        found.append(CacheInfo(level, kind, size, count_cpu_list(shared) if shared else 1,
                               int(line) if line else None, f"{index}/{{level,type,size,shared_cpu_list}}"))
    found.sort(key=lambda c: c.level)
    if not found:
        return (), f"no cache levels in {base} (not Linux, or hidden by the hypervisor): only DRAM is assigned"
    return tuple(found), f"cache sizes from {base}/index*"


def _read_optional(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def cpu_info() -> CpuInfo:
    """Everything the OS reports about this host that the measurement needs."""
    try:
        fields = _cpuinfo_fields(CPUINFO.read_text())
    except OSError:
        fields = {}
    import platform

    model = fields.get("model name") or platform.processor() or "unknown CPU"
    vendor = _VENDORS.get(fields.get("vendor_id", ""), fields.get("vendor_id", "unknown").lower() or "unknown")
    caches, note = read_caches()
    return CpuInfo(model=model, vendor=vendor, threads=usable_threads(),
                   flags=frozenset(fields.get("flags", "").split()), caches=caches, caches_note=note,
                   memory_bytes=_memory_bytes())


def _memory_bytes() -> int | None:
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
