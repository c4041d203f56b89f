"""Turn a ``HostMeasurement`` into a hardware spec dict (``kind: cpu``) that ``parse_spec`` accepts."""

from __future__ import annotations

from typing import Any

from perfmodel.measure.host import HostMeasurement, LevelMeasurement

_LATENCY_UNKNOWN = ("not measured: a dependent pointer chase cannot be timed from numpy/torch without an "
                    "interpreter cost per access that dwarfs the latency")


def host_spec(m: HostMeasurement, host_id: str = "host") -> dict[str, Any]:
    """A spec of this host from its measurement; every number says how it was measured."""
    date = m.measured_at[:10]
    header = f"measured by perfmodel measure on {date}, {m.cpu.model}"
    return {
        "id": host_id,
        "name": f"{m.cpu.model} ({m.threads} threads, measured)",
        "vendor": m.cpu.vendor,
        "kind": "cpu",
        "units": m.threads,
        "unit_name": "hardware thread",
        "clock_hz": None,
        "tdp_w": None,
        "launch_overhead_s": m.dispatch_overhead.value,
        "source": header,
        "sources": {
            "units": f"os.sched_getaffinity: {m.threads} logical CPUs usable by this process",
            "launch_overhead_s": f"{header}: {m.dispatch_overhead.method}",
        },
        "unknown": {
            "clock_hz": "not used: peaks were measured directly; /proc/cpuinfo 'cpu MHz' is the current (under a "
                        "hypervisor, the TSC) frequency, not the clock the peaks ran at",
            "tdp_w": "not measurable from user space",
        },
        "engines": _engines(m, header),
        "levels": [_level(level, header) for level in m.levels],
    }


def _engines(m: HostMeasurement, header: str) -> list[dict[str, Any]]:
    measured = {name: r for name, r in m.peaks.items() if r.flops_per_s}
    missing = [f"{name}: {r.note}" for name, r in m.peaks.items() if not r.flops_per_s]
    how = "; ".join(f"{name} {r.kernel} n={r.size}" for name, r in measured.items())
    matrix_source = (f"{header}: best-of-N square products with {m.threads} torch threads, the largest rate over "
                     f"n = 256.. while a call stays short: {how}")
    if missing:
        matrix_source += "; left out (not measured): " + "; ".join(missing)
    slow = [n for n in m.notes if "matmul runs at" in n]
    if slow:
        matrix_source += "; " + "; ".join(slow)
    vector = {d: measured[d].flops_per_s for d in ("fp64", "fp32") if d in measured}
    engines = [{"name": "blas", "engine_class": "matrix", "count": m.threads,
                "peak_flops_per_s": {d: r.flops_per_s for d, r in measured.items()}, "source": matrix_source}]
    if vector:
        engines.append({
            "name": "simd", "engine_class": "vector", "count": m.threads, "peak_flops_per_s": vector,
            "source": f"{header}: derived: the fp64/fp32 torch.mm rates above; on a CPU the BLAS GEMM runs on "
                      "the same SIMD FMA units as elementwise code and is the highest FMA rate software reaches "
                      "(elementwise torch ops are memory bound, so they cannot measure it)",
        })
    return engines


def _level(level: LevelMeasurement, header: str) -> dict[str, Any]:
    block: dict[str, Any] = {
        "name": level.name, "kind": level.kind, "capacity_bytes": level.capacity_bytes,
        "bandwidth_bytes_per_s": level.bandwidth.value if level.bandwidth else None, "latency_s": None,
        "source": header, "sources": {}, "unknown": {"latency_s": _LATENCY_UNKNOWN},
    }
    if level.kind == "cache":
        block["per_unit"] = level.per_unit
    if level.capacity_bytes is not None:
        block["sources"]["capacity_bytes"] = level.capacity_source + (" (per hardware thread)" if level.per_unit
                                                                      else "")
    else:
        block["unknown"]["capacity_bytes"] = "the OS did not report it"
    if level.bandwidth is not None:
        block["sources"]["bandwidth_bytes_per_s"] = f"{header}: {level.bandwidth.method}"
    else:
        block["unknown"]["bandwidth_bytes_per_s"] = "no working set of the sweep fell inside this level"
    if level.line_bytes:
        block["access_granularity_bytes"] = level.line_bytes
        block["sources"]["access_granularity_bytes"] = "sysfs coherency_line_size"
    return block
