"""rocprof CSVs: the real omniperf files against csv-module sums, and the v1/v3/stats layouts."""

from __future__ import annotations

import csv

import pytest
from trace_builders import DATA, csv_text

from perfmodel.traces import parse_trace


@pytest.mark.parametrize("name", ["vcopy__MI100__timestamps.csv", "vcopy__MI200__timestamps.csv",
                                  "vcopy__MI100__pmc_perf.csv"])
def test_real_files_match_an_independent_sum(name: str) -> None:
    with (DATA / name).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    parsed = parse_trace(DATA / name)
    assert parsed.format == "rocprof_csv"
    assert len(parsed.kernels) == len(rows) == 3
    expected = sum(int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in rows) * 1e-9
    assert parsed.total_kernel_time_s == pytest.approx(expected)
    kernel = parsed.kernels[0]
    assert kernel.name == "vecCopy(double*, double*, double*, int, int) [clone .kd]"
    assert kernel.grid == (4096, 1, 1) and kernel.block == (256, 1, 1)  # 1,048,576 work-items / 256


def test_v1_results_with_begin_end() -> None:
    header = ["Index", "KernelName", "gpu-id", "queue-id", "queue-index", "pid", "tid", "grd", "wgr", "lds", "scr",
              "vgpr", "sgpr", "fbar", "sig", "obj", "DispatchNs", "BeginNs", "EndNs", "CompleteNs"]
    rows = [[0, "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32", 1, 0, 0, 1, 1, 65536, 256, 0, 0, 64, 32, 0, "0x0", "0x0",
             100, 200, 5200, 5300],
            [1, "void at::native::vectorized_elementwise_kernel<4>", 1, 0, 1, 1, 1, 1024, 64, 0, 0, 8, 16, 0, "0x0",
             "0x0", 5400, 5500, 6500, 6600]]
    parsed = parse_trace(csv_text(header, rows))
    assert [k.duration_s for k in parsed.kernels] == pytest.approx([5e-6, 1e-6])
    assert parsed.kernels[0].device == 1 and parsed.kernels[0].grid == (256, 1, 1)


def test_duration_column() -> None:
    parsed = parse_trace(csv_text(["KernelName", "DurationNs"], [["k1", "1500"], ["k2", "2,500"]]))
    assert parsed.total_kernel_time_s == pytest.approx(4e-6)


def test_rocprofv3_kernel_trace() -> None:
    header = ["Kind", "Agent_Id", "Queue_Id", "Thread_Id", "Dispatch_Id", "Kernel_Id", "Kernel_Name",
              "Correlation_Id", "Start_Timestamp", "End_Timestamp", "Private_Segment_Size", "Group_Segment_Size",
              "Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z", "Grid_Size_X", "Grid_Size_Y", "Grid_Size_Z"]
    rows = [["KERNEL_DISPATCH", 2, 1, 77, 1, 9, "gemm_kernel", 12, 1000, 4000, 0, 0, 16, 16, 1, 256, 256, 1]]
    (kernel,) = parse_trace(csv_text(header, rows)).kernels
    assert kernel.duration_s == pytest.approx(3e-6) and kernel.correlation == 12
    assert kernel.grid == (16, 16, 1) and kernel.block == (16, 16, 1) and kernel.device == 2


def test_stats_file() -> None:
    rows = [["gemm_kernel", 10, 50000, 5000, 83.3], ["copy_kernel", 4, 10000, 2500, 16.7]]
    parsed = parse_trace(csv_text(["Name", "Calls", "TotalDurationNs", "AverageNs", "Percentage"], rows))
    assert parsed.format == "rocprof_stats"
    assert [(k.name, k.instances) for k in parsed.kernels] == [("gemm_kernel", 10), ("copy_kernel", 4)]
    assert parsed.total_kernel_time_s == pytest.approx(60e-6)
