"""Real ``nsys stats`` outputs (apexedgesystems/vernier's SAXPY demo, see tests/data/traces/README.md): the
GPU trace CSV of two devices, the kernel summary as CSV after nsys's ``Processing`` line and as the printed
table; each checked against the file's own rows read with the csv module."""

from __future__ import annotations

import csv

import pytest
from trace_builders import DATA

from perfmodel.traces import match_runs, parse_trace
from perfmodel.traces.kernel_ops import transfer_direction
from perfmodel.traces.matching import reason_category

GPU_TRACES = {"vernier__05_NvtxAnnotation__nsys_2026_3_1_rtx5000ada__cuda_gpu_trace.csv":
              "NVIDIA RTX 5000 Ada Generation Laptop GPU",
              "vernier__05_NvtxAnnotation__nsys_2025_3_2_thor__cuda_gpu_trace.csv": "NVIDIA Thor"}
SAXPY = "vernier::bench::demo::<unnamed>::saxpyKernel(float, const float *, float *, unsigned long)"


@pytest.mark.parametrize("name", sorted(GPU_TRACES))
def test_gpu_trace_rows_durations_bytes_and_device(name: str) -> None:
    with (DATA / name).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    parsed = parse_trace(DATA / name)
    assert parsed.format == "nsys_gpu_trace_csv" and parsed.device_name == GPU_TRACES[name]
    assert len(parsed.kernels) == len(rows) == 16
    assert parsed.total_kernel_time_s == pytest.approx(sum(int(r["Duration (ns)"]) for r in rows) * 1e-9)
    categories = [k.category for k in parsed.kernels]
    assert categories.count("kernel") == 4 and categories.count("memcpy") == 12
    for kernel, row in zip(parsed.kernels, rows, strict=True):
        if kernel.category == "memcpy":  # 4.194 MB: nsys's MB is 10^6 bytes
            assert kernel.transfer_bytes == round(float(row["Bytes (MB)"]) * 1e6) == 4_194_000
            assert kernel.name.endswith(f"({row['SrcMemKd']} -> {row['DstMemKd']})")
        else:
            assert kernel.name == SAXPY and kernel.grid == (4096, 1, 1) and kernel.block == (256, 1, 1)


@pytest.mark.parametrize("name", sorted(GPU_TRACES))
def test_gpu_trace_every_activity_gets_its_op(name: str) -> None:
    parsed = parse_trace(DATA / name)
    result = match_runs(parsed)
    assert all(run is not None for run in result.kernel_runs)
    ops = [result.runs[i].op for i in result.kernel_runs if i is not None]
    copies = [op for op in ops if op["kind"] == "hostcopy"]
    assert sorted({op["direction"] for op in copies}) == ["d2h", "h2d"] and len(copies) == 12
    assert not any(op["pageable"] for op in copies)  # the demo's host buffers are pinned (SrcMemKd/DstMemKd)
    saxpy = [op for op in ops if op["kind"] == "elementwise"]
    # y = a*x + y over 4096 x 256 floats: x and y read, y written
    assert saxpy == [{"kind": "elementwise", "shape": [1_048_576], "dtype": "fp32", "inputs": 2, "outputs": 1,
                      "flops_per_element": 2.0}] * 4


@pytest.mark.parametrize("name", ["vernier__tools__py__tests__fixtures__nsight__nsys_stats_cuda_gpu_kern_sum.out",
                                  "vernier__11_NSIGHT_PROFILER__cuda_gpu_kern_sum.txt"])
def test_kernel_summary_csv_and_printed(name: str) -> None:
    parsed = parse_trace(DATA / name)
    assert parsed.format == "nsys_kern_sum_csv"
    (kernel,) = parsed.kernels
    assert kernel.name == SAXPY and kernel.instances == 61 and kernel.grid is None
    total_ns = 178_481_856 if name.endswith(".out") else 176_606_848
    assert kernel.duration_s == pytest.approx(total_ns * 1e-9)
    result = match_runs(parsed)
    # a summary has no launch grid: the kernel is a streaming one by name, its element count not in the file
    assert result.kernel_runs == [None]
    assert reason_category(result.kernel_reasons[0] or "") == "grid not recorded"


def test_transfer_directions_as_nsys_names_them() -> None:
    assert [transfer_direction(f"[CUDA memcpy {d}]") for d in
            ("Host-to-Device", "Device-to-Host", "Device-to-Device", "Peer-to-Peer")] == ["h2d", "d2h", "d2d", "p2p"]
