"""Each profiled kernel's own point against the roofs, from its counters (Nsight Compute)."""

from __future__ import annotations

import csv
import json

import pytest
from trace_builders import DATA
from typer.testing import CliRunner

import perfmodel
from perfmodel.cli import app
from perfmodel.traces import match_runs, parse_trace
from perfmodel.traces.measured_roofline import counter_points, time_by_headroom
from perfmodel.traces.records import KernelRecord
from perfmodel.traces.report import format_trace_report, trace_report
from perfmodel.traces.roof import kernel_alarms

A100 = "nvidia-a100-sxm4-80gb"
A100_DRAM_BYTES_PER_S = 2.039e12  # the spec's HBM2e figure
A100_L2_BYTES_PER_S = 7.219e12
A100_FP32_FLOPS = 19.5e12
RELU = DATA.parents[2] / "benchmarks" / "data" / "activation__relu__nsight_result.csv"


def _kernel(name: str, duration_s: float, **counters: float) -> KernelRecord:
    return KernelRecord(name=name, category="kernel", duration_s=duration_s, source_format="ncu_csv",
                        counters=counters)


def test_shares_of_each_roof_by_hand() -> None:
    hw = perfmodel.load_hardware(A100)
    t = 1e-3
    kernel = _kernel("k", t, dram_bytes=0.5 * A100_DRAM_BYTES_PER_S * t, l2_bytes=0.9 * A100_L2_BYTES_PER_S * t,
                     flops_fp32=0.25 * A100_FP32_FLOPS * t)
    (point,) = counter_points(hw, [kernel])
    assert point.share_of_roof["dram"] == pytest.approx(0.5)
    assert point.share_of_roof["l2"] == pytest.approx(0.9)
    assert point.share_of_roof["compute"] == pytest.approx(0.25)
    assert point.nearest == "l2"
    assert time_by_headroom([point]) == {"at_roof": 1.0, "near_roof": 0.0, "far_below": 0.0, "no_counter": 0.0}


def test_launches_of_one_name_add_up_and_a_rate_counter_is_time_weighted() -> None:
    hw = perfmodel.load_hardware(A100)
    kernels = [_kernel("gemm", 1e-3, dram_bytes=1e8, tensor_active_pct=90.0),
               _kernel("gemm", 3e-3, dram_bytes=2e8, tensor_active_pct=50.0),
               _kernel("copy", 1e-3), _kernel("idle", 0.0, dram_bytes=1.0)]
    points = counter_points(hw, kernels)
    assert [p.name for p in points] == ["gemm"]  # no counters, or no time: not a point
    (gemm,) = points
    assert gemm.launches == 2 and gemm.time_s == pytest.approx(4e-3)
    assert gemm.bytes_by_level == {"dram": 3e8}
    assert gemm.share_of_roof["dram"] == pytest.approx(3e8 / 4e-3 / A100_DRAM_BYTES_PER_S)
    assert gemm.share_of_roof["tensor"] == pytest.approx((0.9 * 1 + 0.5 * 3) / 4)
    assert gemm.nearest == "tensor"


def test_real_relu_kernels_against_an_independent_reading() -> None:
    hw = perfmodel.load_hardware(A100)
    with RELU.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    points = counter_points(hw, parse_trace(RELU).kernels)
    assert len(points) == len(rows) == 4237  # named by their IDs: one point each
    longest = max(rows, key=lambda r: float(r["gpu__time_duration.sum"]))
    expected = float(longest["dram__bytes.sum"]) / (float(longest["gpu__time_duration.sum"]) * 1e-9)
    assert points[0].time_s == pytest.approx(float(longest["gpu__time_duration.sum"]) * 1e-9)
    assert points[0].share_of_roof["dram"] == pytest.approx(expected / A100_DRAM_BYTES_PER_S)
    assert points[0].nearest == "dram"
    split = time_by_headroom(points)
    assert sum(split.values()) == pytest.approx(1.0)
    assert all(p.best_share <= 1.05 for p in points)  # no ReLU kernel beats a roof (and none raised an alarm)


def test_report_prints_and_serialises_the_measured_roofline() -> None:
    hw = perfmodel.load_hardware(A100)
    parsed = parse_trace(RELU)
    report = trace_report(hw, parsed, match_runs(parsed))
    text = format_trace_report(report, top=3)
    assert "measured roofline (4,237 kernel names with counters" in text
    assert text.count("  dram     kernel ") == 3
    out = report.to_json(top=3)
    assert len(out["measured_roofline"]["kernels"]) == 3
    assert out["measured_roofline"]["kernels"][0]["nearest_roof"] == "dram"
    json.dumps(out, allow_nan=False)


def test_cli_json_carries_the_measured_roofline() -> None:
    result = CliRunner().invoke(app, ["trace", str(RELU), "--hardware", A100, "--json", "--top", "2"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data["measured_roofline"]["time_by_headroom"]) == {"at_roof", "near_roof", "far_below", "no_counter"}


def test_a_level_without_a_bandwidth_figure_has_no_roof() -> None:
    import copy

    from perfmodel.specs import library, parse_spec

    spec = copy.deepcopy(library()[A100].model_dump(mode="json"))
    for level in spec["levels"]:
        if level["per_unit"] and level["kind"] in ("cache", "scratchpad"):
            level["bandwidth_bytes_per_s"] = None
            level.setdefault("unknown", {})["bandwidth_bytes_per_s"] = "not published"
    hw = parse_spec(spec, "test spec")
    (point,) = counter_points(hw, [_kernel("k", 1e-3, l1_bytes=1e9, dram_bytes=1e9)])
    assert set(point.share_of_roof) == {"dram"}  # not L1 against some other level's bandwidth
    assert point.bytes_by_level == {"dram": 1e9, "l1": 1e9}  # the bytes are still reported
    busy_l1 = _kernel("k", 1e-3, l1_bytes=1e11)  # 100 TB/s: above every bandwidth this device has
    assert kernel_alarms(hw, busy_l1) == []  # no alarm against a roof the spec does not give
    assert [a.quantity for a in kernel_alarms(perfmodel.load_hardware(A100), busy_l1)] == ["l1_bytes"]
