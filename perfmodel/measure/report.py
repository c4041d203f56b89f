"""Plain-text tables of a ``HostMeasurement`` (for the CLI and the benchmark)."""

from __future__ import annotations

from perfmodel.measure.host import HostMeasurement


def _size(n: float | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n:.0f} B"


def format_measurement(m: HostMeasurement, sweep: bool = True) -> str:
    """Levels, peaks, dispatch overhead and (optionally) the whole working-set sweep."""
    lines = [f"host: {m.cpu.model} ({m.cpu.vendor}), {m.threads} threads, measured {m.measured_at} "
             f"in {m.duration_s:.1f} s{' (quick)' if m.quick else ''}", "",
             f"{'level':<6} {'capacity':>12} {'per thread':>10} {'read GB/s':>10}"]
    for level in m.levels:
        bandwidth = f"{level.bandwidth.value / 1e9:10.1f}" if level.bandwidth else f"{'-':>10}"
        lines.append(f"{level.name:<6} {_size(level.capacity_bytes):>12} {'yes' if level.per_unit else 'no':>10} "
                     f"{bandwidth}")
    lines += ["", f"{'dtype':<6} {'GFLOP/s':>10} {'n':>6}  kernel"]
    for name, peak in m.peaks.items():
        rate = f"{peak.flops_per_s / 1e9:10.1f}" if peak.flops_per_s else f"{'-':>10}"
        lines.append(f"{name:<6} {rate} {peak.size:>6}  {peak.kernel}; {peak.note}")
    lines += ["", f"dispatch overhead: {m.dispatch_overhead.value * 1e6:.2f} µs ({m.dispatch_overhead.method})"]
    lines += [f"first-touch write: {m.first_touch.value / 1e9:.1f} GB/s ({m.first_touch.method})"]
    lines += ["plateaus (read kernel, no cache sizes used): " + ", ".join(
        f"{_size(p.first_bytes)}-{_size(p.last_bytes)}: {p.bandwidth_bytes_per_s / 1e9:.0f} GB/s" for p in m.plateaus)]
    lines += [f"note: {note}" for note in m.notes]
    if sweep:
        kernels = sorted({p.kernel for p in m.sweep})
        lines += ["", f"{'working set':>12} " + " ".join(f"{k + ' GB/s':>11}" for k in kernels)]
        sizes = sorted({p.working_set_bytes for p in m.sweep})
        table = {(p.kernel, p.working_set_bytes): p.bandwidth_bytes_per_s for p in m.sweep}
        for size in sizes:
            lines.append(f"{_size(size):>12} " + " ".join(f"{table.get((k, size), 0.0) / 1e9:11.1f}"
                                                           for k in kernels))
    return "\n".join(lines)
