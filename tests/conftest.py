"""Shared fixtures: a toy device with round numbers for golden tests worked out on paper, and an isolated
data folder per pytest(-xdist) worker so parallel workers never share ./var or a developer's database."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from perfmodel.hardware import Hardware
from perfmodel.specs import parse_spec

# property tests check answers, not speed: Hypothesis's per-example deadline (200 ms) only fails them when a busy
# CI machine is slow (seen under load: 397 ms, then 8 ms on the rerun); a test that wants one sets its own
settings.register_profile("perfmodel", deadline=None)
settings.load_profile("perfmodel")

TOY: dict[str, Any] = {
    "id": "toy-gpu", "name": "Toy GPU", "vendor": "test", "kind": "gpu", "units": 4, "unit_name": "SM",
    "clock_hz": 1e9, "launch_overhead_s": None, "tdp_w": None, "max_resident_tiles_per_unit": 8,
    "max_resident_threads_per_unit": 1024,
    "source": "test fixture: round numbers chosen for hand calculation",
    "unknown": {"launch_overhead_s": "model default", "tdp_w": "n/a"},
    "engines": [
        {"name": "tensor", "engine_class": "matrix", "mma_shape": [16, 8, 16],
         "peak_flops_per_s": {"fp16": 8e12, "bf16": 8e12, "int8": 16e12}, "source": "fixture"},
        {"name": "simt", "engine_class": "vector",
         "peak_flops_per_s": {"fp32": 1e12, "fp16": 2e12, "bf16": 2e12}, "source": "fixture"},
        {"name": "sfu", "engine_class": "special", "peak_flops_per_s": {"fp32": 1e11}, "source": "fixture"},
    ],
    "levels": [
        {"name": "DRAM", "kind": "dram", "capacity_bytes": 1e9, "bandwidth_bytes_per_s": 1e12,
         "latency_s": None, "access_granularity_bytes": 32, "source": "fixture",
         "unknown": {"latency_s": "model default"}},
        {"name": "L2", "kind": "cache", "capacity_bytes": 4194304, "bandwidth_bytes_per_s": 4e12,
         "latency_s": None, "source": "fixture", "unknown": {"latency_s": "model default"}},
        {"name": "SMEM", "kind": "scratchpad", "per_unit": True, "capacity_bytes": 98304,
         "bandwidth_bytes_per_s": 16e12, "latency_s": None, "banks": 32, "bank_width_bytes": 4,
         "source": "fixture", "unknown": {"latency_s": "model default"}},
    ],
    "interconnect": {"link_bandwidth_bytes_per_s": 1e11, "link_latency_s": 1e-6, "devices_per_node": 8,
                     "network_bandwidth_bytes_per_s": 1e10, "network_latency_s": 5e-6, "source": "fixture"},
}


@pytest.fixture(scope="session")
def toy() -> Hardware:
    return parse_spec(TOY, "toy fixture")


@pytest.fixture(scope="session", autouse=True)
def isolated_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``PERFMODEL_DATA_DIR`` and ``PERFMODEL_CACHE_DIR`` in this worker's own temporary folders and no inherited
    ``PERFMODEL_DATABASE_URL``: a command or app run with default settings uses a fresh SQLite file here, not ./var
    shared by all workers, and writes no pickles to ~/.cache (tests that need another database set their own with
    monkeypatch)."""
    saved = {name: os.environ.get(name)
             for name in ("PERFMODEL_DATA_DIR", "PERFMODEL_DATABASE_URL", "PERFMODEL_CACHE_DIR")}
    os.environ["PERFMODEL_DATA_DIR"] = str(tmp_path_factory.mktemp("var"))
    os.environ["PERFMODEL_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))  # perfmodel.spec_cache's pickles
    os.environ.pop("PERFMODEL_DATABASE_URL", None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
