"""Random op dicts for the calibration tests: log-uniform sizes from a seeded generator."""

from __future__ import annotations

from typing import Any

import numpy as np


def random_gemms(n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """``n`` fp16 matmuls, each of m, n, k log-uniform in 64..8192."""
    dims = np.round(2 ** rng.uniform(6, 13, size=(n, 3))).astype(int)
    return [{"kind": "matmul", "m": int(m), "n": int(k), "k": int(j), "dtype": "fp16"} for m, k, j in dims]


def random_norms(n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """``n`` fp16 RMSNorms over 4,096 columns, rows log-uniform in 16..16384."""
    rows = np.round(2 ** rng.uniform(4, 14, size=n)).astype(int)
    return [{"kind": "rmsnorm", "shape": [int(r), 4096], "dtype": "fp16"} for r in rows]
