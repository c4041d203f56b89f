"""Fixtures shared by the calibration tests: one fit of Vidur's A100 runs (the dev data) per session."""

from __future__ import annotations

import pytest
from benchmark_module import load_benchmark

from perfmodel.calibration import Calibration, fit_calibration

VIDUR_A100 = "nvidia-a100-sxm4-80gb"


@pytest.fixture(scope="session")
def vidur() -> Calibration:
    """The calibration fitted on every Vidur run of the A100 (``benchmarks/measured_data.py``)."""
    data = load_benchmark("measured_data", "measured_data")
    return fit_calibration(VIDUR_A100, [(r.op, r.measured_s) for r in data.vidur() if r.hardware == VIDUR_A100])
