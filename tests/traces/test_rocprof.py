"""rocprof CSVs: the real omniperf files against csv-module sums, and the v1/v3/stats layouts."""

from __future__ import annotations

import csv

import pytest
from trace_builders import DATA, csv_text

from perfmodel.traces import parse_trace
from perfmodel.traces.records import TraceError

SHARED_ROCPROF = DATA.parents[3] / "shared" / "data" / "traces" / "rocprof"


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


def _rows(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_omniperf_counters_become_bytes_and_instructions() -> None:
    """vecCopy of 1,048,576 doubles: DRAM and L1->L2 traffic from the raw TCC/TCP requests (rocprof's formulas)."""
    rows = _rows("vcopy__MI100__pmc_perf.csv")
    parsed = parse_trace(DATA / "vcopy__MI100__pmc_perf.csv")
    for kernel, row in zip(parsed.kernels, rows, strict=True):
        rd, rd32 = float(row["TCC_EA_RDREQ_sum"]), float(row["TCC_EA_RDREQ_32B_sum"])
        wr, wr64 = float(row["TCC_EA_WRREQ_sum"]), float(row["TCC_EA_WRREQ_64B_sum"])
        assert kernel.counters["dram_bytes"] == pytest.approx(32 * rd32 + 64 * (rd - rd32) + 64 * wr64
                                                              + 32 * (wr - wr64))
        requests = sum(float(row[c]) for c in ("TCP_TCC_READ_REQ_sum", "TCP_TCC_WRITE_REQ_sum",
                                               "TCP_TCC_ATOMIC_WITH_RET_REQ_sum", "TCP_TCC_ATOMIC_WITHOUT_RET_REQ_sum"))
        assert kernel.counters["l2_bytes"] == pytest.approx(64 * requests)
        assert kernel.counters["valu_inst"] == float(row["SQ_INSTS_VALU"])
        assert kernel.counters["gpu_cycles"] == float(row["GRBM_GUI_ACTIVE"])
        # the copy reads 8 MiB; its 8 MiB of writes reach DRAM in full only in the first launch (later ones
        # leave part in L2 when they end)
        assert 8 * 2**20 <= kernel.counters["dram_bytes"] <= 16.2 * 2**20
    assert parsed.kernels[0].counters["dram_bytes"] == pytest.approx(16 * 2**20, rel=0.01)


def test_omniperf_counters_give_a_roofline_point_for_a_plain_hip_kernel() -> None:
    import perfmodel
    from perfmodel.machine import tables
    from perfmodel.traces.measured_roofline import counter_points

    hw = perfmodel.load_hardware("amd-mi100")
    parsed = parse_trace(DATA / "vcopy__MI100__pmc_perf.csv")
    (point,) = counter_points(hw, parsed.kernels)
    moved = sum(k.counters["dram_bytes"] for k in parsed.kernels)
    dram_bw = tables(hw).bandwidth_bytes_per_s(tables(hw).dram)
    assert point.launches == 3 and point.time_s == pytest.approx(parsed.total_kernel_time_s)
    assert point.share_of_roof["dram"] == pytest.approx(moved / parsed.total_kernel_time_s / dram_bw)
    assert point.nearest == "dram" and not point.derived
    assert all(k.grid == (4096, 1, 1) and k.block == (256, 1, 1) for k in parsed.kernels)


def test_mi200_counters_include_flops_by_dtype() -> None:
    parsed = parse_trace(SHARED_ROCPROF / "vcopy__MI200__pmc_perf.csv") if SHARED_ROCPROF.exists() else None
    if parsed is None:
        pytest.skip("../shared/data not present")
    for kernel in parsed.kernels:
        assert kernel.counters["flops_fp64"] == 0.0 and kernel.counters["matrix_flops_fp16"] == 0.0  # a copy
        assert kernel.counters["l2_bytes"] == pytest.approx(16 * 2**20)  # 8 MiB read + 8 MiB written by L1


def test_one_omniperf_pass_file() -> None:
    rows = _rows("vcopy__MI100__pmc_perf_0.csv")
    parsed = parse_trace(DATA / "vcopy__MI100__pmc_perf_0.csv")
    assert len(parsed.kernels) == 3
    assert parsed.total_kernel_time_s == pytest.approx(
        sum(int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in rows) * 1e-9)
    assert [k.counters["waves"] for k in parsed.kernels] == [float(r["SQ_WAVES"]) for r in rows]
    assert "dram_bytes" not in parsed.kernels[0].counters  # this pass counted no memory requests


def test_rocprofv3_counter_collection_is_one_record_per_dispatch() -> None:
    name = "rocprofiler-sdk__docs__pass_1__312_counter_collection.csv"
    rows = _rows(name)
    parsed = parse_trace(DATA / name)
    assert parsed.format == "rocprofv3_counter_csv"
    assert len(parsed.kernels) == len({r["Dispatch_Id"] for r in rows}) == 4
    assert parsed.total_kernel_time_s == pytest.approx(
        sum(int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in rows) * 1e-9)
    first = parsed.kernels[0]
    assert first.name == "void addition_kernel<float>(float*, float const*, float const*, int, int)"
    assert first.counters["waves"] == 16384.0 and first.device == 4
    assert first.grid == (16384, 1, 1) and first.block == (64, 1, 1)


def test_rocprofv3_counter_rows_of_one_dispatch_are_not_counted_twice() -> None:
    header = ["Correlation_Id", "Dispatch_Id", "Agent_Id", "Queue_Id", "Grid_Size", "Kernel_Name", "Workgroup_Size",
              "Counter_Name", "Counter_Value", "Start_Timestamp", "End_Timestamp"]
    rows = [[1, 1, "Agent 2", 1, 1024, "Cijk_tile", 256, "FETCH_SIZE", 2048, 100, 1100],
            [1, 1, "Agent 2", 1, 1024, "Cijk_tile", 256, "WRITE_SIZE", 1024, 100, 1100],
            [1, 1, "Agent 2", 1, 1024, "Cijk_tile", 256, "SQ_INSTS_VALU_FMA_F32", 10, 100, 1100],
            [1, 1, "Agent 2", 1, 1024, "Cijk_tile", 256, "SQ_INSTS_VALU_MFMA_MOPS_F16", 3, 100, 1100],
            [2, 2, "Agent 2", 1, 1024, "Cijk_tile", 256, "FETCH_SIZE", 4096, 2000, 2500]]
    parsed = parse_trace(csv_text(header, rows))
    assert [k.duration_s for k in parsed.kernels] == pytest.approx([1e-6, 0.5e-6])
    first = parsed.kernels[0]
    assert first.device == 2 and first.grid == (4, 1, 1)
    rows[0][2] = "GPU 3"  # --agent-index=type-relative
    assert parse_trace(csv_text(header, rows)).kernels[0].device == 3
    assert first.counters["dram_bytes"] == (2048 + 1024) * 1024  # rocprof's kilobytes
    assert first.counters["flops_fp32"] == 64 * 2 * 10 and first.counters["matrix_flops_fp16"] == 512 * 3
    import perfmodel
    from perfmodel.traces.measured_roofline import counter_points

    point = counter_points(perfmodel.load_hardware("amd-mi300x"), [first])[0]
    assert any("upper bound" in note for note in point.derived)


def test_mfma_flops_give_a_matrix_roof_share() -> None:
    import perfmodel
    from perfmodel.dtypes import DType
    from perfmodel.traces.measured_roofline import counter_points
    from perfmodel.traces.roof import kernel_alarms

    hw = perfmodel.load_hardware("amd-mi300x")
    peak = hw.peak_flops_per_s(DType.BF16, "matrix")
    assert peak
    header = ["Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value", "Start_Timestamp", "End_Timestamp"]
    duration_ns = 100_000
    mops = 0.4 * peak * duration_ns * 1e-9 / 512  # 40 % of the bf16 matrix peak
    rows = [[1, "Cijk_Alik_Bljk_BBS_BH_MT256x256x64", "SQ_INSTS_VALU_MFMA_MOPS_BF16", mops, 0, duration_ns]]
    (kernel,) = parse_trace(csv_text(header, rows)).kernels
    (point,) = counter_points(hw, [kernel])
    assert point.share_of_roof["tensor"] == pytest.approx(0.4)
    assert point.flops == pytest.approx(512 * mops)
    assert not kernel_alarms(hw, kernel)
    rows[0][3] = 1.5 * mops / 0.4  # 150 % of the peak: a wrong spec or another device
    (too_fast,) = parse_trace(csv_text(header, rows)).kernels
    (alarm,) = kernel_alarms(hw, too_fast)
    assert alarm.quantity == "matrix_flops_bf16" and alarm.ratio == pytest.approx(1.5)


def test_rounded_timestamps_are_flagged() -> None:
    parsed = parse_trace(DATA / "vcopy__MI300X_A1__timestamps.csv")
    assert len(parsed.kernels) == 3 and parsed.total_kernel_time_s == 0.0
    assert any("rounded scientific notation" in w for w in parsed.warnings)


@pytest.mark.parametrize("bad", [
    [[1, 1, "k", "FETCH_SIZE", "1", "soon", "later"]],  # timestamps that are not numbers
])
def test_counter_collection_with_wrong_types_is_a_clear_error(bad: list[list[object]]) -> None:
    header = ["Correlation_Id", "Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value", "Start_Timestamp",
              "End_Timestamp"]
    with pytest.raises(TraceError, match="not times in ns"):
        parse_trace(csv_text(header, bad))


def test_truncated_counter_collection_keeps_the_whole_dispatches() -> None:
    name = "rocprofiler-sdk__docs__pass_1__312_counter_collection.csv"
    text = (DATA / name).read_bytes()
    cut = text[: text.rindex(b'"divide_kernel') + 5]  # the last row cut inside its quoted kernel name
    with pytest.raises(TraceError):
        parse_trace(cut)
    cut_at_row = text[: text.rindex(b"\n4,4,") + 1]
    assert len(parse_trace(cut_at_row).kernels) == 3


def test_counter_columns_with_wrong_types_are_left_out() -> None:
    header = ["Index", "KernelName", "grd", "wgr", "BeginNs", "EndNs", "FETCH_SIZE", "WRITE_SIZE", "SQ_WAVES"]
    rows = [[0, "k", 1024, 256, 100, 1100, "n/a", "", "16"], [1, "k", 1024, 256, 2000, 3000, "8.0", "4.0", "x"]]
    first, second = parse_trace(csv_text(header, rows)).kernels
    assert "dram_bytes" not in first.counters and first.counters["waves"] == 16
    assert second.counters["dram_bytes"] == (8 + 4) * 1024 and "waves" not in second.counters


def test_truncated_pmc_file_keeps_its_whole_rows() -> None:
    text = (DATA / "vcopy__MI100__pmc_perf.csv").read_bytes()
    cut = text[: text.rindex(b"\n2,") + 400]  # the third dispatch cut long before its timestamps
    parsed = parse_trace(cut)
    assert len(parsed.kernels) == 2 and all("dram_bytes" in k.counters for k in parsed.kernels)


def test_rocprofv3_kernel_trace_with_agent_names() -> None:
    """rocprofv3 writes 'Agent 7' as the agent id and sizes per dimension in work-items."""
    (row,) = _rows("rocprofiler-sdk__docs__kernel_trace.csv")
    (kernel,) = parse_trace(DATA / "rocprofiler-sdk__docs__kernel_trace.csv").kernels
    assert kernel.device == 7 and kernel.stream == int(row["Queue_Id"]) and kernel.correlation == 101
    assert kernel.duration_s == pytest.approx((int(row["End_Timestamp"]) - int(row["Start_Timestamp"])) * 1e-9)
    assert kernel.grid == (1024 // 64, 1024, 1) and kernel.block == (64, 1, 1)


OPENMP = "HPCTrainingExamples__Rocprofv3__OpenMP__jacobi_kernel_{}.csv"


def test_real_rocprofv3_openmp_kernel_trace_reads_every_dispatch() -> None:
    """MI300A, ROCm 6 columns (no Stream_Id): grids in work-items become blocks; the OpenMP target regions name no
    work (their loops are in the program's source): each is sized by its launch alone, a lower bound of its loop
    (the runtime caps its teams), source launch geometry, confidence low."""
    from perfmodel.traces import match_runs

    parsed = parse_trace(DATA / OPENMP.format("trace"))
    with open(DATA / OPENMP.format("trace"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert parsed.format == "rocprof_csv" and len(parsed.kernels) == len(rows) == 9
    expected = sum(int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in rows) * 1e-9
    assert parsed.total_kernel_time_s == pytest.approx(expected)
    norm = parsed.kernels[0]
    assert norm.grid == (233472 // 256, 1, 1) and norm.block == (256, 1, 1)
    result = match_runs(parsed)
    assert result.unmodelled == [] and result.time_by_source() == {"launch geometry": pytest.approx(expected)}
    assert {r.confidence for r in result.runs} == {"low"}
    norms = [r for r in result.runs if r.op_name == "__omp_offloading_32_2f3c6__QMnorm_modPnorm_l26"]
    assert len(norms) == 3 and norms[0].op == {"kind": "reduce", "shape": [912, 256], "axes": [1], "dtype": "fp32",
                                               "op": "sum"}
    assert "norm_mod::norm (line 26)" in norms[0].notes[0] and "233,472 work-items" in norms[0].notes[0]
    assert "lower bound" in norms[0].notes[0]


ROCPD = "HPCTrainingExamples__Rocprofv3__rocpd__out_kernel_trace.csv"


def test_real_rocpd_csv_kernel_trace() -> None:
    """rocpd's CSV export (ROCm 7: a ``Guid`` column first, ``Lds_Block_Size`` / ``Vgpr_Count`` spellings, the agent
    as ``Agent 4``) of the same OpenMP Jacobi: every dispatch, its duration and grid against the csv module."""
    from perfmodel.traces import match_runs

    rows = _rows(ROCPD)
    parsed = parse_trace(DATA / ROCPD)
    assert parsed.format == "rocprof_csv" and len(parsed.kernels) == len(rows) == 9
    assert [k.name for k in parsed.kernels] == [r["Kernel_Name"] for r in rows]
    assert [k.duration_s for k in parsed.kernels] == pytest.approx(
        [(int(r["End_Timestamp"]) - int(r["Start_Timestamp"])) * 1e-9 for r in rows])
    boundary = parsed.kernels[2]
    assert boundary.device == 4 and boundary.block == (32, 1, 1) and boundary.grid == (4096 // 32, 1, 1)
    result = match_runs(parsed)
    assert result.unmodelled == [] and set(result.time_by_source()) == {"launch geometry"}
    assert [r.op["shape"] for r in result.runs if "boundary" in r.op_name] == [[4096], [4096]]


def test_real_rocprofv3_hip_kernel_stats() -> None:
    """A HIP Jacobi's ``--stats`` file (MPI rank of ``Jacobi_hip -g 2 1``, ROCm 6.2.1): calls and total ns per
    kernel against the csv module; its hand-written kernels name argument types, not their work: kept, unmatched."""
    from perfmodel.traces import match_runs

    name = "HPCTrainingExamples__Rocprofv3__HIP__jacobi_kernel_stats.csv"
    rows = _rows(name)
    parsed = parse_trace(DATA / name)
    assert parsed.format == "rocprof_stats" and len(parsed.kernels) == len(rows) == 6
    assert sum(k.instances for k in parsed.kernels) == sum(int(r["Calls"]) for r in rows) == 5003
    assert parsed.total_kernel_time_s == pytest.approx(sum(int(r["TotalDurationNs"]) for r in rows) * 1e-9)
    result = match_runs(parsed)
    assert result.runs == [] and result.unmodelled_time_share == pytest.approx(1.0)


def test_real_rocprofv3_kernel_stats() -> None:
    parsed = parse_trace(DATA / OPENMP.format("stats"))
    assert parsed.format == "rocprof_stats"
    by_name = {k.name: k for k in parsed.kernels}
    norm = by_name["__omp_offloading_32_2f3c6__QMnorm_modPnorm_l26"]
    assert norm.instances == 1001 and norm.duration_s == pytest.approx(87995483e-9)
    assert sum(k.instances for k in parsed.kernels) == 4001


@pytest.mark.parametrize(("name", "what"), [
    ("vcopy__MI200__sysinfo.csv", "sysinfo.csv: the device's description"),
    ("vcopy__MI200__roofline.csv", "roofline.csv: the device's measured peaks")])
def test_omniperf_side_files_name_what_they_are(name: str, what: str) -> None:
    """omniperf writes sysinfo.csv and roofline.csv beside the counters; uploading one said only "unrecognised
    content" (qa14's walkthrough): it now says which file it is and which of the run's files to upload."""
    with pytest.raises(TraceError, match=r"pmc_perf\.csv or timestamps\.csv") as caught:
        parse_trace(DATA / name)
    assert what in str(caught.value)
