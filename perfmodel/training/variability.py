"""Synchronous training runs at its slowest device's pace.

Devices of one SKU do not sustain the same speed: each chip's power manager sets its clock under load,
and chips differ in leakage, so at the same power limit some run slower. Sinha et al. 2022, "Not All GPUs
Are Created Equal: Characterizing Variability in Large-Scale, Accelerator-Rich Systems" (SC'22,
arXiv:2208.11035, abstract), measured 8 % average performance variation (max 22 %) between same-SKU GPUs
of five clusters (NVIDIA and AMD), outliers apart (up to 1.5x slower than the median, which operators retire).

A step of tensor, pipeline and data parallelism synchronises every device (tp collectives each layer,
pipeline sends each micro-batch, the data-parallel reduction each step), so its compute runs at the pace
of the slowest of its N devices. With speeds spread evenly over a range ``spread`` around the median, the
slowest of N sits at 1 − spread/2 + spread/(N + 1) of the median: no loss on one device, spread/2 on many.
"""

from __future__ import annotations

from typing import Any

import numpy as np

DEVICE_SPEED_SPREAD = 0.08  # Sinha et al. 2022 (SC'22), abstract: 8 % average variation, outliers apart


def slowest_device_slowdown(devices: Any, spread: float = DEVICE_SPEED_SPREAD) -> Any:
    """Compute time of N synchronised devices over one median device's (≥ 1; 1 for one device):
    1 / (1 − spread/2 + spread/(N + 1)), the expected slowest of N speeds uniform over ±spread/2."""
    if not 0.0 <= spread < 1.0:
        raise ValueError(f"device speed spread must be in [0, 1), got {spread}")
    n = np.asarray(devices, dtype=float)
    if np.any(n < 1):
        raise ValueError("devices must be at least 1")
    return 1.0 / (1.0 - spread / 2.0 + spread / (n + 1.0))
