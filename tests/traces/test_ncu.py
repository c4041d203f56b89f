"""Nsight Compute CSV: the real long and wide files against csv-module sums, and generated variants."""

from __future__ import annotations

import contextlib
import csv
from collections import defaultdict
from pathlib import Path

import pytest
from trace_builders import DATA, csv_text

from perfmodel.traces import parse_trace

LONG = DATA / "attention__actual_parameter_analysis__data__5-9__bert_flashattn_nsight.csv"
WIDE = DATA / "activation__relu__nsight_result_first500.csv"
# the whole file, which benchmarks/accuracy.py scores (its shapes in the JSON beside it)
WIDE_FULL = DATA.parents[2] / "benchmarks" / "data" / "activation__relu__nsight_result.csv"
SASS = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def test_long_form_matches_an_independent_reading() -> None:
    metrics: dict[str, dict[str, float]] = defaultdict(dict)
    with LONG.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["Metric Name"] and row["Metric Value"]:
                with contextlib.suppress(ValueError):
                    metrics[row["ID"]][row["Metric Name"]] = _num(row["Metric Value"])
    parsed = parse_trace(LONG)
    assert parsed.format == "ncu_csv"
    assert len(parsed.kernels) == len(metrics) == 10
    for kernel, (_, m) in zip(parsed.kernels, sorted(metrics.items(), key=lambda kv: int(kv[0])), strict=True):
        assert kernel.duration_s == pytest.approx(m["sm__cycles_elapsed.avg"] / m["sm__cycles_elapsed.avg.per_second"])
        assert kernel.counters["dram_bytes"] == pytest.approx(m["dram__bytes.sum"])
        assert kernel.counters["l2_bytes"] == pytest.approx(m["lts__t_bytes.sum"])
        assert kernel.counters["flops_fp32"] == pytest.approx(
            m[SASS.format("fadd")] + m[SASS.format("fmul")] + 2 * m[SASS.format("ffma")])
        assert kernel.counters["flops_fp16"] == pytest.approx(
            m[SASS.format("hadd")] + m[SASS.format("hmul")] + 2 * m[SASS.format("hfma")])
        assert kernel.counters["tensor_inst"] == pytest.approx(m["sm__inst_executed_pipe_tensor.sum"])
    assert any(k.counters["tensor_inst"] > 0 for k in parsed.kernels)
    assert all(k.block is not None and k.grid is not None for k in parsed.kernels)


@pytest.mark.parametrize(("path", "kernels"), [(WIDE, 500), (WIDE_FULL, 4237)], ids=["first500", "full"])
def test_wide_pivot_matches_an_independent_sum(path: Path, kernels: int) -> None:
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    parsed = parse_trace(path)
    assert parsed.format == "ncu_raw_csv"
    assert len(parsed.kernels) == len(rows) == kernels
    assert parsed.total_kernel_time_s == pytest.approx(sum(_num(r["gpu__time_duration.sum"]) for r in rows) * 1e-9)
    assert sum(k.counters["dram_bytes"] for k in parsed.kernels) == pytest.approx(
        sum(_num(r["dram__bytes.sum"]) for r in rows))


NEW_HEADER = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
              "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value"]


def test_long_form_current_header_with_auto_scaled_units() -> None:
    info = ["1", "4242", "python", "localhost", "sm90_xmma_gemm_bf16", "1", "7", "(128, 1, 1)", "(132, 1, 1)", "0",
            "9.0", "GPU Speed Of Light Throughput"]
    rows = [[*info, "Duration", "usecond", "1,234.50"],
            [*info, "dram__bytes.sum", "Mbyte", "12.5"],
            [*info, "lts__t_bytes.sum", "Gbyte", "1.5"],
            [*info, "l1tex__t_bytes.sum", "Kbyte", "2,048"],
            [*info, SASS.format("dfma"), "inst", "1,000"],
            [*info, "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "%", "87.5"]]
    (kernel,) = parse_trace(csv_text(NEW_HEADER, rows)).kernels
    assert kernel.duration_s == pytest.approx(1234.5e-6)
    assert kernel.counters["dram_bytes"] == pytest.approx(12.5e6)
    assert kernel.counters["l2_bytes"] == pytest.approx(1.5e9)
    assert kernel.counters["l1_bytes"] == pytest.approx(2.048e6)
    assert kernel.counters["flops_fp64"] == pytest.approx(2000.0)
    assert kernel.counters["tensor_active_pct"] == pytest.approx(87.5)
    assert kernel.grid == (132, 1, 1) and kernel.block == (128, 1, 1) and kernel.device == 0 and kernel.stream == 7


def test_raw_page_with_units_row_and_thousands_separators() -> None:
    header = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
              "Grid Size", "Device", "CC", "gpu__time_duration.sum", "dram__bytes.sum", SASS.format("ffma")]
    units = ["", "", "", "", "", "", "", "", "", "", "", "msecond", "Gbyte", "inst"]
    rows = [units,
            ["0", "1", "p", "h", "kernel_a", "1", "7", "(256, 1, 1)", "(1024, 1, 1)", "0", "8.0", "1.5", "2.25",
             "1,000,000"],
            ["1", "1", "p", "h", "kernel_b", "1", "7", "(256, 1, 1)", "(8, 8, 1)", "0", "8.0", "0.001", "0.5", "0"]]
    parsed = parse_trace(csv_text(header, rows))
    assert parsed.format == "ncu_raw_csv" and parsed.warnings == []
    a, b = parsed.kernels
    assert a.name == "kernel_a" and b.name == "kernel_b"
    assert a.duration_s == pytest.approx(1.5e-3) and b.duration_s == pytest.approx(1e-6)
    assert a.counters["dram_bytes"] == pytest.approx(2.25e9)
    assert a.counters["flops_fp32"] == pytest.approx(2e6)
    assert b.grid == (8, 8, 1)


def test_kernel_without_any_time_metric_is_skipped_with_a_warning() -> None:
    info = ["1", "1", "p", "h", "no_time_kernel", "1", "7", "(1, 1, 1)", "(1, 1, 1)", "0", "8.0", "s"]
    parsed = parse_trace(csv_text(NEW_HEADER, [[*info, "dram__bytes.sum", "byte", "10"]]))
    assert parsed.kernels == []
    assert any("no_time_kernel" in w for w in parsed.warnings)


SOL_LOG = DATA / "superbench__cublaslt_gemm_b200__ncu_default_set.log"


def _sol_rows() -> list[dict[str, str]]:
    """The log's CSV rows read independently: from the header line on, csv module, rows with a metric value."""
    lines = SOL_LOG.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID",'))
    return [r for r in csv.DictReader(lines[start:]) if r.get("Metric Value")]


def test_default_set_log_with_program_output_gives_duration_and_sol_counters() -> None:
    rows = {r["Metric Name"]: r for r in _sol_rows() if r["Section Name"] == "GPU Speed Of Light Throughput"}
    parsed = parse_trace(SOL_LOG)
    assert parsed.format == "ncu_csv"
    (kernel,) = parsed.kernels
    assert kernel.name.startswith("cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32")
    assert rows["Duration"]["Metric Unit"] == "ns"
    assert kernel.duration_s == pytest.approx(_num(rows["Duration"]["Metric Value"]) * 1e-9)
    assert kernel.grid == (9, 32, 1) and kernel.block == (384, 1, 1)
    for label, key in (("DRAM Throughput", "dram_throughput_pct"), ("L2 Cache Throughput", "l2_throughput_pct"),
                       ("L1/TEX Cache Throughput", "l1_throughput_pct"), ("Memory Throughput", "memory_throughput_pct"),
                       ("Compute (SM) Throughput", "sm_throughput_pct"), ("SM Frequency", "sm_clock_hz"),
                       ("Elapsed Cycles", "elapsed_cycles"), ("SM Active Cycles", "sm_active_cycles")):
        assert kernel.counters[key] == pytest.approx(_num(rows[label]["Metric Value"])), label
    assert "dram_bytes" not in kernel.counters  # nothing counted bytes: only shares of peak
    (warning,) = parsed.warnings
    assert "Speed-of-Light percentages only" in warning and "dram__bytes.sum" in warning


def test_default_set_gives_a_roofline_point_from_shares_of_peak() -> None:
    import perfmodel
    from perfmodel.machine import tables
    from perfmodel.traces.measured_roofline import counter_points

    hw = perfmodel.load_hardware("nvidia-b200")
    (kernel,) = parse_trace(SOL_LOG).kernels
    (point,) = counter_points(hw, [kernel])
    assert point.share_of_roof["dram"] == pytest.approx(0.0074)
    assert point.share_of_roof["l2"] == pytest.approx(0.1512)
    assert point.share_of_roof["sm"] == pytest.approx(0.2359)
    assert point.nearest == "sm"
    dram_bw = tables(hw).bandwidth_bytes_per_s(tables(hw).dram)
    assert point.bytes_by_level["dram"] == pytest.approx(0.0074 * dram_bw * kernel.duration_s)
    assert any("dram bytes = dram_throughput_pct" in d for d in point.derived)
    assert point.flops == 0.0


def test_memory_throughput_in_bytes_per_second_is_the_dram_rate(tmp_path: Path) -> None:
    header = ["ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
    rows = [["0", "k", "GPU Speed Of Light Throughput", "Duration", "usecond", "2.00"],
            ["0", "k", "GPU Speed Of Light Throughput", "Memory Throughput", "%", "40.0"],
            ["0", "k", "Memory Workload Analysis", "Memory Throughput", "Gbyte/second", "1,000.00"]]
    path = tmp_path / "mwa.csv"
    path.write_bytes(csv_text(header, rows, "==PROF== Connected to process 1\n") + b"==PROF== Disconnected\nbye\n")
    (kernel,) = parse_trace(path).kernels
    assert kernel.counters["memory_throughput_pct"] == pytest.approx(40.0)
    assert kernel.counters["dram_bytes"] == pytest.approx(1e12 * 2e-6)  # measured rate x measured duration
    assert not parse_trace(path).warnings


def test_per_kernel_summary_is_one_record_per_launch_shape() -> None:
    """``ncu --csv --print-summary per-kernel`` (layout as ncu 2024 prints it): Average is the value, Invocations the
    launches; totals (duration, bytes) scale with the launches, percentages stay averages."""
    header = ["Process ID", "Process Name", "Host Name", "Kernel Name", "Block Size", "Grid Size", "Device", "CC",
              "Invocations", "Section Name", "Metric Name", "Metric Unit", "Minimum", "Maximum", "Average"]
    common = ["109199", "bench", "127.0.0.1", "saxpyKernel(float, const float *, float *, unsigned long)"]
    rows = [[*common, "(256, 1, 1)", "(4096, 1, 1)", "0", "11.0", "14", "GPU Speed Of Light Throughput", "Duration",
             "us", "4.10", "4.35", "4.20"],
            [*common, "(256, 1, 1)", "(4096, 1, 1)", "0", "11.0", "14", "GPU Speed Of Light Throughput",
             "DRAM Throughput", "%", "80.1", "85.3", "83.0"],
            [*common, "(256, 1, 1)", "(4096, 1, 1)", "0", "11.0", "14", "Memory Workload Analysis", "dram__bytes.sum",
             "Mbyte", "12.58", "12.58", "12.58"],
            [*common, "(128, 1, 1)", "(64, 1, 1)", "0", "11.0", "2", "GPU Speed Of Light Throughput", "Duration", "us",
             "1.50", "1.70", "1.60"]]
    parsed = parse_trace(csv_text(header, rows, "==PROF== Disconnected from process 109199\n"))
    assert parsed.format == "ncu_csv"
    big, small = parsed.kernels
    assert (big.instances, big.block, big.grid) == (14, (256, 1, 1), (4096, 1, 1))
    assert big.duration_s == pytest.approx(14 * 4.20e-6)
    assert big.counters["dram_bytes"] == pytest.approx(14 * 12.58e6)
    assert big.counters["dram_throughput_pct"] == pytest.approx(83.0)
    assert (small.instances, small.duration_s) == (2, pytest.approx(2 * 1.60e-6))


def test_speed_of_light_labels_of_ncu_2020() -> None:
    """Nsight Compute 2019-2020 printed 'SM [%]', 'Memory [%]', 'SOL FB' (DRAM), 'SOL L2', 'SOL TEX' and clocks
    in cycle/second (layout as those versions wrote it, 'Kernel Time' before 'Context')."""
    header = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
              "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
    common = ["0", "28439", "cfd", "127.0.0.1", "cuda_compute_step_factor(int,float*,float*,float*)",
              "2020-May-29 12:02:46", "1", "7", "GPU Speed Of Light"]
    values = [("Memory Frequency", "cycle/second", "768683274.02"), ("SOL FB", "%", "46.47"),
              ("SM Frequency", "cycle/second", "1138271055.75"), ("Memory [%]", "%", "46.47"),
              ("Duration", "nsecond", "8992"), ("SOL L2", "%", "13.61"), ("SM [%]", "%", "22.48"),
              ("SOL TEX", "%", "11.33")]
    (kernel,) = parse_trace(csv_text(header, [[*common, *v] for v in values])).kernels
    assert kernel.duration_s == pytest.approx(8992e-9)
    assert kernel.counters["dram_throughput_pct"] == pytest.approx(46.47)
    assert kernel.counters["l2_throughput_pct"] == pytest.approx(13.61)
    assert kernel.counters["l1_throughput_pct"] == pytest.approx(11.33)
    assert kernel.counters["sm_throughput_pct"] == pytest.approx(22.48)
    assert kernel.counters["memory_throughput_pct"] == pytest.approx(46.47)
    assert kernel.counters["sm_clock_hz"] == pytest.approx(1138271055.75)


def test_roofline_chart_section_gives_flops_and_dram_bytes() -> None:
    """The Roofline Chart section (ncu 2024 layout, with its 'Body Item Label' column): thread instructions per
    elapsed cycle x SM clock x duration are the FLOPs, the DRAM Bandwidth x duration the bytes: a full point."""
    header = ["ID", "Kernel Name", "Block Size", "Grid Size", "Section Name", "Body Item Label", "Metric Name",
              "Metric Unit", "Metric Value"]
    k = ["0", "gemv_kernel", "(32, 4, 1)", "(224, 1, 1)"]
    sol, chart = "GPU Speed Of Light Throughput", "GPU Speed Of Light Roofline Chart"
    rows = [[*k, sol, "", "Duration", "us", "6.75"], [*k, sol, "", "DRAM Throughput", "%", "19.66"],
            [*k, chart, "", "Theoretical Predicated-On FFMA Thread Instructions Executed", "inst/cycle", "21,760"],
            [*k, chart, "", "Predicated-On FFMA Thread Instructions Executed Per Cycle", "inst/cycle", "79.06"],
            [*k, chart, "Single Precision Achieved Value", "SM Frequency", "Ghz", "2.15"],
            [*k, chart, "Single Precision Achieved Value", "Predicated-On FADD Thread Instructions Executed Per Cycle",
             "inst/cycle", "1.97"],
            [*k, chart, "Single Precision Achieved Value", "Predicated-On FMUL Thread Instructions Executed Per Cycle",
             "inst/cycle", "0"],
            [*k, chart, "Single Precision Achieved Value", "DRAM Bandwidth", "Gbyte/s", "345.14"]]
    parsed = parse_trace(csv_text(header, rows))
    (kernel,) = parsed.kernels
    cycles = 2.15e9 * 6.75e-6
    assert kernel.counters["flops_fp32"] == pytest.approx((1.97 + 0 + 2 * 79.06) * cycles)
    assert kernel.counters["dram_bytes"] == pytest.approx(345.14e9 * 6.75e-6)
    assert not parsed.warnings  # counted bytes and FLOPs: not a Speed-of-Light-only point
