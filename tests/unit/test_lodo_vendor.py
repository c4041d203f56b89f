"""benchmarks/lodo_vendor.py: per-vendor defaults and what a vendor without a value of its own takes (issue 24,
smx17: the own fallback on, the per-vendor host floor off)."""

from __future__ import annotations

import sys

import pytest
from benchmark_module import load_benchmark

from perfmodel.efficiency import defaults_for
from perfmodel.specs import load_hardware

lodo = load_benchmark("lodo", "lodo_benchmark")
vendor_mod = sys.modules["lodo_vendor"]

A100 = "nvidia-a100-sxm4-80gb"
MI210 = "amd-mi210"


def _shipped() -> dict[str, object]:
    return {hw: defaults_for(load_hardware(hw)) for hw in (A100, MI210)}


def test_switches_are_off_and_lodo_uses_the_module() -> None:
    assert not vendor_mod.HOST_OVERHEAD_PER_VENDOR and vendor_mod.UNSEEN_VENDOR_OWN_DEFAULT
    assert lodo.PER_VENDOR == vendor_mod.PER_VENDOR == frozenset({"stream_dram_efficiency"})
    assert lodo.with_model is vendor_mod.with_model and lodo.vendor(A100) == "nvidia"


def test_an_unseen_vendor_takes_the_others_mean_or_its_own_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """On: the MI210 without a value of its own streams at the fold's fitted ``dram_efficiency``
    (``ModelDefaults.stream_dram``'s own fallback); off: at NVIDIA's fitted share."""
    model = {"stream_dram_efficiency@nvidia": 0.95, "dram_efficiency": 0.8}
    out = vendor_mod.with_model(_shipped(), model)
    assert out[MI210].stream_dram == 0.8 and out[A100].stream_dram == 0.95
    monkeypatch.setattr(vendor_mod, "UNSEEN_VENDOR_OWN_DEFAULT", False)
    assert vendor_mod.with_model(_shipped(), model)[MI210].stream_dram == 0.95


def test_a_per_vendor_host_floor_reaches_its_vendor_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``HOST_OVERHEAD_PER_VENDOR`` and the own-default fallback, a vendor fitted on no wall-clock row keeps the
    GPU default host floor (12 us, MODELING.md), not the other vendor's."""
    monkeypatch.setattr(vendor_mod, "PER_VENDOR", frozenset({"stream_dram_efficiency", "host_overhead_s"}))
    monkeypatch.setattr(vendor_mod, "UNSEEN_VENDOR_OWN_DEFAULT", True)
    out = vendor_mod.with_model(_shipped(), {"host_overhead_s@amd": 20e-6})
    assert out[MI210].host_overhead_s == 20e-6
    assert out[A100].host_overhead_s == pytest.approx(12e-6)
