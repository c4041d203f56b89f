"""Kernels sized by their launch alone (``geometry_ops``), and files that carry no work per launch."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfmodel import load_hardware
from perfmodel.traces import match_runs, parse_trace
from perfmodel.traces.geometry_ops import GEOMETRY, geometry_op, no_launch_work, signature_args
from perfmodel.traces.records import KernelRecord
from perfmodel.traces.report import format_trace_report, trace_report

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
JACOBI = "HPCTrainingExamples__Rocprofv3__"


def _kernel(name: str, grid: tuple[int, int, int] | None = (40, 1, 1),
            block: tuple[int, int, int] | None = (256, 1, 1)) -> KernelRecord:
    return KernelRecord(name, "kernel", 1e-5, "test", grid=grid, block=block)


@pytest.mark.parametrize(("name", "args"), [
    ("NormKernel1(int, double, double, double const*, double*)", ["int", "double", "double", "double const*",
                                                                   "double*"]),
    ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*, long*)",
     ["int", "float const*", "long*"]),
    ("ns::f<std::pair<int, int>>(Acc<float, 2>, int)", ["Acc<float, 2>", "int"]),
    ("k()", []), ("triton__0d1d2d", None), ("__omp_offloading_32_2f3c6__QMnorm_modPnorm_l26", None),
])
def test_signature_arguments_split_at_the_top_level(name: str, args: list[str] | None) -> None:
    assert signature_args(name) == args


@pytest.mark.parametrize(("name", "op"), [
    # const pointers read, the others written, their pointee type the element type
    ("JacobiIterationKernel(int, double, double, double const*, double const*, double*, double*)",
     {"kind": "elementwise", "shape": [10240], "dtype": "fp64", "inputs": 2, "outputs": 2, "flops_per_element": 1.0}),
    ("scale(const float *, float* const, int)",
     {"kind": "elementwise", "shape": [10240], "dtype": "fp32", "inputs": 1, "outputs": 1, "flops_per_element": 0.0}),
    # a reduction by name: one partial per block
    ("NormKernel1(int, double, double, double const*, double*)",
     {"kind": "reduce", "shape": [40, 256], "axes": [1], "dtype": "fp64", "op": "sum"}),
    ("blockSum(__half const*, __half const*, float*)",
     {"kind": "elementwise", "shape": [10240], "dtype": "fp16", "inputs": 2, "outputs": 0, "flops_per_element": 2.0}),
    # no signature: fp32, one read and one write assumed
    ("triton__0d1d2d", {"kind": "elementwise", "shape": [10240], "dtype": "fp32", "inputs": 1, "outputs": 1,
                        "flops_per_element": 0.0}),
])
def test_geometry_op_from_the_signature(name: str, op: dict[str, object]) -> None:
    found = geometry_op(_kernel(name))
    assert found is not None and found[0] == op and found[2:] == (GEOMETRY, "low")


@pytest.mark.parametrize("kernel", [
    _kernel("ampere_sgemm_128x64_nn"),  # a library rule names it
    _kernel("cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)"),  # a library's helper
    _kernel("consumer(float const*, float*)", grid=None),  # no launch recorded ("consumer" is no reduction)
    _kernel("f(float const*, float*)", block=(0, 1, 1)),
    KernelRecord("f(float const*, float*)", "memcpy", 1e-5, "test", grid=(1, 1, 1), block=(1, 1, 1)),
])
def test_no_geometry_op(kernel: KernelRecord) -> None:
    assert geometry_op(kernel) is None


def test_consumer_is_not_a_reduction() -> None:
    found = geometry_op(_kernel("consumer(float const*, float*)"))
    assert found is not None and found[0]["kind"] == "elementwise"


@pytest.mark.parametrize("name", [f"{JACOBI}OpenMP__jacobi_kernel_trace.csv", f"{JACOBI}rocpd__out_kernel_trace.csv"])
def test_real_openmp_dispatches_are_all_sized_by_their_launch(name: str) -> None:
    parsed = parse_trace(DATA / name)
    result = match_runs(parsed)
    assert result.matched_time_s == pytest.approx(parsed.total_kernel_time_s)
    assert set(result.time_by_source()) == {GEOMETRY} and {r.confidence for r in result.runs} == {"low"}
    # a lower bound of the loop: predicted below the measured time
    report = trace_report(load_hardware("amd-mi300x"), parsed, result)
    assert all(row.error_pct < 0 for row in report.ops)


@pytest.mark.parametrize(("name", "share"), [
    ("critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz", 0.015),
    ("kineto_resnet50_num_workers_0__worker0.1623143566756.pt.trace.json.gz", 0.005),
    ("timeline_analysis__sampled_rank-0.json.gz", 0.02),
])
def test_real_kineto_kernels_no_rule_names_are_sized_by_their_launch(name: str, share: float) -> None:
    """max_pool / adaptive pool / fbgemm helper kernels: their launch gives a low-confidence op, scored apart."""
    parsed = parse_trace(DATA / name)
    result = match_runs(parsed)
    by_source = result.time_by_source()
    assert by_source[GEOMETRY] > share * result.total_kernel_time_s
    assert "unrecognised kernel" not in result.time_by_category()
    assert {r.confidence for r in result.runs if r.source == GEOMETRY} == {"low"}


@pytest.mark.parametrize("name", [
    f"{JACOBI}HIP__jacobi_kernel_stats.csv", f"{JACOBI}OpenMP__jacobi_kernel_stats.csv",
    "vernier__11_NSIGHT_PROFILER__cuda_gpu_kern_sum.txt",
    "vernier__tools__py__tests__fixtures__nsight__nsys_stats_cuda_gpu_kern_sum.out",
])
def test_real_summaries_say_first_that_they_carry_no_work_per_launch(name: str) -> None:
    parsed = parse_trace(DATA / name)
    result = match_runs(parsed)
    assert result.runs == [] and result.unmodelled_time_share == pytest.approx(1.0)
    reason = no_launch_work(parsed.kernels, parsed.format)
    assert reason is not None and reason.startswith("NO WORK PER LAUNCH")
    text = format_trace_report(trace_report(load_hardware("amd-mi300x"), parsed, result))
    assert text.splitlines()[0] == reason
    assert trace_report(load_hardware("amd-mi300x"), parsed, result).to_json()["no_work"] == reason


@pytest.mark.parametrize("name", [
    f"{JACOBI}OpenMP__jacobi_kernel_trace.csv", "vcopy__MI100__timestamps.csv",
    "vernier__05_NvtxAnnotation__nsys_2025_3_2_thor__cuda_gpu_trace.csv",
    "kineto_resnet50_num_workers_0__worker0.1623143566756.pt.trace.json.gz",
])
def test_real_traces_carry_work_per_launch(name: str) -> None:
    parsed = parse_trace(DATA / name)
    assert no_launch_work(parsed.kernels, parsed.format) is None


def test_a_hip_summary_kernel_without_grid_says_the_grid_is_missing() -> None:
    parsed = parse_trace(DATA / f"{JACOBI}HIP__jacobi_kernel_stats.csv")
    assert set(match_runs(parsed).time_by_category()) == {"grid not recorded"}


@pytest.mark.parametrize(("name", "reads"), [
    ("void at::native::CatArrayBatchedCopy<float, unsigned int, 1, 128, 1>(float*, Meta<float, 128>, int)", 1),
    ("saxpy(float, float*, float*, int)", 2),  # nothing declared const: each pointer read and written
    ("fill_kernel(float*, float, int)", 0),  # a fill only writes
])
def test_pointers_none_of_them_const(name: str, reads: int) -> None:
    found = geometry_op(_kernel(name))
    assert found is not None and found[0]["inputs"] == reads and found[0]["outputs"] == max(reads, 1)
