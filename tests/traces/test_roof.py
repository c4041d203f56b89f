"""Roof alarm: measured points above their roof are flagged with the likely cause."""

from __future__ import annotations

import pytest

from perfmodel.hardware import Hardware
from perfmodel.traces import KernelRecord, MatchedRun, kernel_alarms, roof_alarms, run_alarms


def _kernel(duration_s: float, **counters: float) -> KernelRecord:
    return KernelRecord(name="k", category="kernel", duration_s=duration_s, source_format="test", counters=counters)


def test_a_point_under_every_roof_raises_nothing(toy: Hardware) -> None:
    # toy: fp32 vector peak 1e12 FLOP/s, DRAM 1e12 B/s; 1 ms -> 5e8 FLOP and 5e8 B are half the roofs
    assert kernel_alarms(toy, _kernel(1e-3, flops_fp32=5e8, dram_bytes=5e8)) == []


def test_flops_above_the_peak_blame_the_peak(toy: Hardware) -> None:
    (alarm,) = kernel_alarms(toy, _kernel(1e-3, flops_fp32=2e9))
    assert alarm.kind == "wrong_peak" and alarm.quantity == "flops_fp32"
    assert alarm.ratio == pytest.approx(2.0)


def test_within_tolerance_is_not_an_alarm(toy: Hardware) -> None:
    assert kernel_alarms(toy, _kernel(1e-3, flops_fp32=1.04e9)) == []
    assert kernel_alarms(toy, _kernel(1e-3, flops_fp32=1.06e9))


def test_dram_bytes_above_bandwidth_blame_the_level(toy: Hardware) -> None:
    (alarm,) = kernel_alarms(toy, _kernel(1e-3, dram_bytes=3e9))
    assert alarm.kind == "wrong_bytes_level" and alarm.quantity == "dram_bytes"
    assert alarm.roof_per_s == pytest.approx(1e12)


def test_tensor_pipe_with_only_simt_flops_is_a_missing_counter(toy: Hardware) -> None:
    (alarm,) = kernel_alarms(toy, _kernel(1e-3, flops_fp32=10.0, dram_bytes=1e8, tensor_active_pct=80.0))
    assert alarm.kind == "missing_flop_counter"


def test_matched_run_faster_than_its_roof(toy: Hardware) -> None:
    # 1024^3 fp16 GEMM: 2.1e9 FLOP; toy tensor peak 8e12 -> at least 268 us; measured 100 us
    run = MatchedRun({"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp16"}, 1e-4, ("gemm",), 1,
                     "aten::mm")
    alarms = run_alarms(toy, run)
    assert [a.kind for a in alarms] == ["wrong_peak"]
    assert alarms[0].ratio == pytest.approx(2 * 1024**3 / 1e-4 / 8e12)
    slow = MatchedRun(run.op, 1e-2, ("gemm",), 1, "aten::mm")
    assert roof_alarms(toy, [slow, _kernel(1.0)]) == []
