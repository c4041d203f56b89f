"""Nsight Systems stats CSVs and SQLite exports, generated in the documented layouts."""

from __future__ import annotations

import io
from pathlib import Path

import nsys_fixtures as nf
import pytest

from perfmodel.traces import TraceError, parse_trace

KERNEL_TIME_S = sum(d for _, _, d, _, _ in nf.KERNELS) * 1e-9


@pytest.mark.parametrize("old", [False, True])
def test_kernel_summary(old: bool) -> None:
    parsed = parse_trace(nf.kern_sum(old))
    assert parsed.format == "nsys_kern_sum_csv"
    assert {k.name: k.instances for k in parsed.kernels} == {
        "void gemm_kernel<float>(float*, float const*)": 2, "<img src=x onerror=alert(1)>": 1}
    assert parsed.total_kernel_time_s == pytest.approx(KERNEL_TIME_S)


@pytest.mark.parametrize(("old", "unit"), [(False, "ns"), (True, "ns"), (False, "us")])
def test_gpu_trace(old: bool, unit: str) -> None:
    parsed = parse_trace(nf.gpu_trace(old, unit))
    assert parsed.format == "nsys_gpu_trace_csv"
    kernels = [k for k in parsed.kernels if k.category == "kernel"]
    assert [k.name for k in kernels] == [n for n, *_ in nf.KERNELS]
    assert sum(k.duration_s for k in kernels) == pytest.approx(KERNEL_TIME_S)
    assert kernels[0].start_s == pytest.approx(1e-6) and kernels[0].grid == (64, 2, 1)
    assert kernels[0].block == (256, 1, 1) and kernels[0].correlation == 100
    assert kernels[0].device == 0 and kernels[0].stream == 7
    (memcpy,) = [k for k in parsed.kernels if k.category == "memcpy"]
    assert memcpy.duration_s == pytest.approx(800e-9)


@pytest.mark.parametrize("columns", [("demangledName", "shortName", "mangledName"), ("shortName",)])
def test_sqlite_export(tmp_path: Path, columns: tuple[str, ...]) -> None:
    path = nf.sqlite_export(tmp_path / "report.sqlite", columns)
    for source in (path, path.read_bytes(), io.BytesIO(path.read_bytes())):
        parsed = parse_trace(source)
        assert parsed.format == "nsys_sqlite"
        kernels = [k for k in parsed.kernels if k.category == "kernel"]
        expected = [n if columns[0] == "demangledName" else n.split("(")[0].split(" ")[-1] for n, *_ in nf.KERNELS]
        assert [k.name for k in kernels] == expected
        assert sum(k.duration_s for k in kernels) == pytest.approx(KERNEL_TIME_S)
        assert kernels[0].grid == (64, 2, 1) and kernels[0].correlation == 100
        (memcpy,) = [k for k in parsed.kernels if k.category == "memcpy"]
        assert memcpy.name == "[CUDA memcpy HtoD]" and memcpy.transfer_bytes == 1_000_000  # reaches copy_op


def test_sqlite_without_kernel_table_is_rejected(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x INTEGER)")
    db.commit()
    db.close()
    with pytest.raises(TraceError, match="CUPTI_ACTIVITY_KIND_KERNEL"):
        parse_trace(path)


# The printed (column-format) report, laid out as nsys 2023+ prints it under `nsys profile --stats=true`: the
# header, a dashed rule giving the column extents, right-aligned numbers with thousands separators, the name
# last (cut at 100 characters with '…'); then the next report. Generated here in that layout.
_MATMUL = "matmul_gpu(float *, float *, float *, int, int, int)"
_LONG = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::A…"
PRINTED = f"""Generating '/tmp/nsys-report-2ee6.qdstrm'
[1/8] [========================100%] report1.nsys-rep
[6/8] Executing 'cuda_gpu_kern_sum' stats report

 Time (%)  Total Time (ns)  Instances  Avg (ns)   Med (ns)   Min (ns)  Max (ns)  StdDev (ns)  {"Name":<100}
 --------  ---------------  ---------  ---------  ---------  --------  --------  -----------  {"-" * 100}
     92.1        2,554,738      2,046    1,248.7    1,216.0       960     2,080        119.0  {_MATMUL:<100}
      7.9          219,225          3   73,075.0   73,000.0    72,000    74,225        500.0  {_LONG}

[7/8] Executing 'cuda_gpu_mem_time_sum' stats report

 Time (%)  Total Time (ns)  Count  Avg (ns)   Med (ns)   Min (ns)  Max (ns)  StdDev (ns)           Operation
 --------  ---------------  -----  ---------  ---------  --------  --------  -----------  ----------------------------
     63.1          1166531      1  1166531.0  1166531.0   1166531   1166531          0.0  [CUDA memcpy Device-to-Host]
"""


def test_printed_kernel_summary_table() -> None:
    parsed = parse_trace(PRINTED.encode())
    assert parsed.format == "nsys_kern_sum_csv"
    assert [(k.name, k.instances) for k in parsed.kernels] == [
        ("matmul_gpu(float *, float *, float *, int, int, int)", 2046), (_LONG, 3)]
    assert parsed.total_kernel_time_s == pytest.approx((2_554_738 + 219_225) * 1e-9)  # not the memcpy after it
    assert any("cut by nsys's column format" in w for w in parsed.warnings)


def test_csv_kernel_summary_after_other_reports_stops_at_its_end() -> None:
    """`nsys stats --format csv` to stdout: every report after its banner; the API and memory tables around the
    kernel summary are not kernels (the API summary alone runs past the detector's first 40 lines)."""
    api_rows = "".join(f'"{0.5:.1f}","{1000 + i}","{i + 1}","1.0","1.0","1","1","0.0","cudaCall{i}"\n'
                       for i in range(60))
    text = ("Generating SQLite file report.sqlite from report.nsys-rep\n"
            "Processing [report.sqlite] with [/opt/nvidia/reports/cuda_api_sum.py]... \n\n"
            " ** CUDA API Summary (cuda_api_sum):\n\n"
            '"Time (%)","Total Time (ns)","Num Calls","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)",'
            '"Name"\n' + api_rows +
            "\nProcessing [report.sqlite] with [/opt/nvidia/reports/cuda_gpu_kern_sum.py]... \n\n"
            " ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\n"
            '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)",'
            '"Name"\n'
            '"88.7","10650240","24","443760.0","443520","441120","449280","2048.5","gemm_fp64_kernel(double *, int)"\n'
            '"11.3","1357824","24","56576.0","56512","56320","57344","301.2","scale_kernel(double *, int)"\n'
            "\n ** CUDA GPU MemOps Summary (by Size) (cuda_gpu_mem_size_sum):\n\n"
            '"Total (MB)","Count","Avg (MB)","Med (MB)","Min (MB)","Max (MB)","StdDev (MB)","Operation"\n'
            '"402.653","48","8.389","8.389","8.389","8.389","0.000","[CUDA memcpy Host-to-Device]"\n')
    parsed = parse_trace(text.encode())
    assert [k.name for k in parsed.kernels] == ["gemm_fp64_kernel(double *, int)", "scale_kernel(double *, int)"]
    assert parsed.total_kernel_time_s == pytest.approx((10650240 + 1357824) * 1e-9)


def test_printed_table_cut_mid_row_keeps_the_whole_rows() -> None:
    cut = PRINTED[: PRINTED.index("73,075.0")]
    parsed = parse_trace(cut.encode())
    assert [k.instances for k in parsed.kernels] == [2046]
    assert any("without a name" in w for w in parsed.warnings)


def test_skipped_kernel_summary_says_so() -> None:
    text = ("Processing [report.sqlite] with [/opt/nvidia/reports/cuda_gpu_kern_sum.py]... \n\n"
            " ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\n"
            "SKIPPED: report.sqlite does not contain CUDA kernel data.\n")
    with pytest.raises(TraceError, match="does not contain CUDA kernel data"):
        parse_trace(text.encode())
