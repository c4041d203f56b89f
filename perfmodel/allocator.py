"""glibc's allocator kept in a long-running process's state, set once from inside the process (``mallopt``).

A batch prediction allocates its result and intermediates as arrays of a few MiB (100,000 rows: 0.8 MB per
float64 column; 1,000,000 rows: 8 MB). glibc serves a request above its mmap threshold (128 KiB at start,
rising dynamically only up to the largest block freed) with a fresh ``mmap``, so every call's result is new
pages that fault in on first touch: ~13,000 minor faults and ~10 % of an all-distinct 200,000-row table's
``predict_columns`` (docs/accuracy.md, speed29; arrays of 4 MiB and more get transparent huge pages, so a
1,000,000-row table faults less per byte). ``tune`` sets (glibc's mallopt(3); the thresholds speed29
measured as environment variables):

- ``M_MMAP_THRESHOLD`` = 32 MiB (``MMAP_THRESHOLD`` bytes, glibc's documented ``DEFAULT_MMAP_THRESHOLD_MAX`` on
  64-bit): blocks up to it come from the heap, so a freed result's pages serve the next call's;
- ``M_TRIM_THRESHOLD`` = 512 MiB (``TRIM_THRESHOLD``): free memory at the heap's top up to it is kept instead of
  returned to the kernel after each call (glibc returns all of it once the top passes the threshold, so it must
  exceed one batch's result: ~250 MB for a 1,000,000-row table). That is the cost: the process stays at its
  high-water mark (up to that much more resident memory after a large batch; the peak itself does not grow:
  ``benchmarks/allocator_speed.py``).

Setting either turns glibc's dynamic threshold off (GNU C Library manual, "Malloc Tunable Parameters",
https://www.gnu.org/software/libc/manual/html_node/Malloc-Tunable-Parameters.html; mallopt(3) gives the mmap
threshold's upper limit, 4·1024·1024·sizeof(long) = 32 MiB on 64-bit). The manual marks ``mallopt``
MT-Unsafe (it changes process-wide constants): it runs once, on the model's first import, which the service and
the CLI do on their main thread before any worker starts. Nothing is set when the C library is not glibc (musl,
macOS, Windows), when ``PERFMODEL_MALLOPT=0``, or when the process was started with glibc's own settings for
these (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``, or ``glibc.malloc`` in ``GLIBC_TUNABLES``): the
deployment's choice wins; nor after ``hold`` (``perfmodel measure`` times torch under glibc's defaults, as its
users run it). ``tune`` never raises. ``perfmodel.roofline`` calls it on import.
"""

from __future__ import annotations

import os
import sys
import threading

M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (glibc malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # bytes
TRIM_THRESHOLD = 512 * 1024 * 1024  # bytes
DISABLE = "PERFMODEL_MALLOPT"
GLIBC_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")

_LOCK = threading.Lock()
_STATE: dict[str, str] = {}


def tune() -> str:
    """Set glibc's mmap and trim thresholds once per process; returns what was done ("set", or why not)."""
    with _LOCK:
        if "outcome" not in _STATE:
            _STATE["outcome"] = _tune()
        return _STATE["outcome"]


def hold(reason: str) -> str:
    """Keep glibc's defaults in this process (``tune`` will not set them): for a process that times other code
    under the allocator its users run with (``perfmodel measure``'s torch suite). Returns ``tune``'s outcome,
    "set" when it already ran (too late to undo)."""
    with _LOCK:
        return _STATE.setdefault("outcome", f"off ({reason})")


def outcome() -> str | None:
    """What ``tune`` did in this process (None before its first call)."""
    return _STATE.get("outcome")


def _tune() -> str:
    if os.environ.get(DISABLE, "1").strip().lower() in ("0", "false", "no", "off"):
        return f"off ({DISABLE})"
    if any(name in os.environ for name in GLIBC_SETTINGS) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return "off (glibc settings from the environment)"
    if not sys.platform.startswith("linux"):
        return "off (not glibc)"
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
            return "off (not glibc)"
        mallopt = libc.mallopt
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt.restype = ctypes.c_int
        done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD), mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    except (OSError, AttributeError, TypeError, ValueError) as exc:
        return f"off ({type(exc).__name__})"
    return "set" if all(done) else "off (mallopt refused)"
