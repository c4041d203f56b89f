"""benchmarks/transfer_bands.py (issue 22 goal 3): the regime of a bound read from the device's spec tables, and
band rules that never see the target device's rows."""

from __future__ import annotations

import numpy as np
from benchmark_module import load_benchmark

bands = load_benchmark("transfer_bands", "transfer_bands_benchmark")


def test_regime_from_the_spec_not_the_name() -> None:
    # A100: tensor cores run matrix work only; P100 runs its GEMMs on CUDA cores, which also run vector work
    assert bands.regime_of("nvidia-a100-sxm4-80gb", ["tensor", "cuda_core", "sfu", "HBM2e", "L2", "latency"]) == [
        "matrix", "vector", "vector", "memory", "memory", "latency"]
    assert bands.regime_of("nvidia-p100-sxm2-16gb", ["cuda_core"]) == ["vector"]
    assert bands.has_matrix_engine("nvidia-a100-sxm4-80gb") and bands.has_matrix_engine("amd-mi210")
    assert not bands.has_matrix_engine("nvidia-p100-sxm2-16gb") and not bands.has_matrix_engine("amd-mi25")


def test_rules_leave_the_target_out() -> None:
    rng = np.random.default_rng(0)
    devices = ["nvidia-a100-sxm4-80gb", "nvidia-a40", "nvidia-v100-sxm2-32gb", "nvidia-t4"]  # T4: the target
    dev = np.repeat(devices, 200)
    cls = np.array(["matmul"] * dev.size)
    reg = np.where(np.arange(dev.size) % 2 == 0, "matrix", "memory")
    log_ratio = rng.normal(0.0, 0.1, dev.size) + np.where(dev == "nvidia-t4", 5.0, 0.0)  # the target far off
    rules = bands.rules(np.exp(log_ratio), cls, reg, dev)
    for name, rule in rules.items():
        low, high = rule("nvidia-t4", "matmul", "matrix")
        assert 0.5 < low < 1.0 < high < 2.0, name  # built from the other three only: the target's x150 never enters
        inside = bands.coverage(rule, "nvidia-t4", dev == "nvidia-t4", np.exp(log_ratio), cls, reg)
        assert inside == 0.0, name
        assert 0.7 < bands.coverage(rule, "nvidia-a40", dev == "nvidia-a40", np.exp(log_ratio), cls, reg) <= 1.0, name
