"""numba's on-disk cache keyed on the sources a compiled module reads.

numba invalidates a cached function by its own file's timestamp only; a kernel that inlines another module's
jitted functions or freezes its constants (``gemm_jit`` reads ``gemm_floor``, ``gemm_kernel`` and ``gemm_cost``)
would load stale machine code after an edit to those alone. ``drop_stale`` keeps a digest of the dependencies beside
the cache and deletes the module's cache files when it changes. A read-only install keeps numba's own behaviour.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path


def drop_stale(module_file: str, dependencies: tuple[str, ...]) -> bool:
    """Delete ``module_file``'s numba cache files (``__pycache__/<stem>.*.nbi|nbc``) when the digest of
    ``dependencies``' sources differs from the one stored with them; True when files were deleted."""
    module = Path(module_file)
    cache = module.parent / "__pycache__"
    digest = hashlib.sha256(b"".join(Path(d).read_bytes() for d in dependencies)).hexdigest()
    stamp = cache / f"{module.stem}.dependencies"
    with contextlib.suppress(OSError):  # no stamp yet: whatever is cached may be stale
        if stamp.read_text(encoding="ascii") == digest:
            return False
    dropped = False
    with contextlib.suppress(OSError):  # read-only or racing another process: numba's own invalidation still applies
        for stale in (*cache.glob(f"{module.stem}.*.nbi"), *cache.glob(f"{module.stem}.*.nbc")):
            stale.unlink()
            dropped = True
        cache.mkdir(exist_ok=True)
        stamp.write_text(digest, encoding="ascii")
    return dropped


__all__ = ["drop_stale"]
