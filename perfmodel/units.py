"""SI units: constants for readable specs and human formatting of times, bytes and rates."""

from __future__ import annotations

KIB = 1024
MIB = 1024**2
GIB = 1024**3
KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12


def _scaled(value: float, steps: list[tuple[float, str]], unit: str) -> str:
    for scale, prefix in steps:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    scale, prefix = steps[-1]
    return f"{value / scale:.3g} {prefix}{unit}"


def format_time_s(seconds: float) -> str:
    """'12.3 µs' style."""
    return _scaled(seconds, [(1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")], "s")


def format_bytes(n_bytes: float) -> str:
    """Decimal prefixes: '1.5 GB'."""
    return _scaled(n_bytes, [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")], "B")


def format_rate(per_s: float, unit: str) -> str:
    """'989 TFLOP/s' style for unit='FLOP/s', 'B/s'..."""
    steps = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
    return _scaled(per_s, steps, unit)
