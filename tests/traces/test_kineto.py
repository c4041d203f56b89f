"""Kineto parser on the real traces, checked against json.load + sums written here."""

from __future__ import annotations

import io

import pytest
from trace_builders import DATA, KinetoTrace, load_events

from perfmodel.traces import parse_trace

KINETO_FILES = sorted(p.name for p in DATA.glob("*.json.gz"))
# Kineto device categories: PyTorch >= 1.10 writes gpu_memcpy / gpu_memset, PyTorch 1.9 Memcpy / Memset
DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset", "memcpy": "memcpy",
               "memset": "memset"}


def _device_events(name: str) -> list[dict[str, object]]:
    return [e for e in load_events(DATA / name) if e.get("ph") == "X" and str(e.get("cat", "")).lower() in DEVICE_CATS]


def _top_level_cpu_ops(name: str) -> list[float]:
    """Durations (µs) of the cpu_op events no other cpu_op of the same thread encloses (a CPU-only profile's
    records), by brute force over every pair."""
    spans = [((e["pid"], e["tid"]), float(e["ts"]), float(e["ts"]) + float(e["dur"]))  # type: ignore[arg-type]
             for e in load_events(DATA / name) if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    return [end - start for i, (thread, start, end) in enumerate(spans)
            if not any(j != i and t == thread and s <= start and e >= end and (s, -e) < (start, -end)
                       for j, (t, s, e) in enumerate(spans))]


@pytest.mark.parametrize("name", KINETO_FILES)
def test_counts_and_total_time_match_an_independent_sum(name: str) -> None:
    expected = _device_events(name)
    parsed = parse_trace(DATA / name)
    assert parsed.format == "pytorch_kineto"
    if not expected:  # a CPU-only profile: its top-level CPU ops are the records, some split into their children
        durations = _top_level_cpu_ops(name)
        assert len(parsed.kernels) >= len(durations) > 0
        assert parsed.total_kernel_time_s == pytest.approx(sum(durations) * 1e-6)
        return
    assert len(parsed.kernels) == len(expected)
    assert parsed.total_kernel_time_s == pytest.approx(sum(float(e["dur"]) for e in expected) * 1e-6)  # type: ignore[arg-type]
    for category in ("kernel", "memcpy", "memset"):
        assert sum(k.category == category for k in parsed.kernels) == sum(
            DEVICE_CATS[str(e["cat"]).lower()] == category for e in expected)


def test_hta_trace_has_the_documented_6080_kernels() -> None:
    parsed = parse_trace(DATA / "negative_queue_length_values_check__rank0.json.gz")
    assert sum(k.category == "kernel" for k in parsed.kernels) == 6080


def test_rocm_kernels_join_their_ops_like_the_external_ids_say() -> None:
    name = "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    events = load_events(DATA / name)
    ops = {e["args"]["External id"]: e["name"] for e in events if e.get("cat") == "cpu_op"}
    launches = {e["args"]["correlation"]: e["args"]["External id"] for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    parsed = parse_trace(DATA / name)
    for kernel in parsed.kernels:
        assert kernel.op_name == ops[launches[kernel.correlation]]
    mm = next(k for k in parsed.kernels if k.op_name == "aten::mm")
    assert mm.input_dims == ((128, 5), (5, 128))
    assert mm.input_types == ("float", "float")


def test_kernel_args_are_kept() -> None:
    parsed = parse_trace(DATA / "triton_example__triton_example.json.gz")
    (kernel,) = parsed.kernels
    assert kernel.name == "triton_poi_fused_add_cos_sin_0"
    assert kernel.grid == (1, 1, 1) and kernel.block == (128, 1, 1)
    assert kernel.duration_s == pytest.approx(1.76e-6)
    assert kernel.device == 0 and kernel.stream == 7


def test_path_bytes_and_stream_give_the_same_records() -> None:
    path = DATA / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
    data = path.read_bytes()
    by_path = parse_trace(path)
    by_bytes = parse_trace(data)
    by_stream = parse_trace(io.BytesIO(data))
    names = [k.name for k in by_path.kernels]
    assert names == [k.name for k in by_bytes.kernels] == [k.name for k in by_stream.kernels]


def test_old_category_names_and_launch_inside_nested_ops() -> None:
    trace = KinetoTrace()
    trace.op("aten::linear", 0, 100, [[8, 16], [32, 16], [32]], ["float", "float", "float"])
    trace.op("aten::addmm", 10, 80, [[32], [8, 16], [16, 32], [], []], ["float"] * 3 + ["Scalar"] * 2)
    trace.kernel("ampere_sgemm_32x32", 20, 200, 5, cat="Kernel")
    trace.kernel("[memset]", 95, 210, 1, cat="Memset")
    parsed = parse_trace(trace.to_bytes())
    assert [k.category for k in parsed.kernels] == ["kernel", "memset"]
    gemm, memset = parsed.kernels
    assert [o.name for o in gemm.ops] == ["aten::linear", "aten::addmm"]
    assert gemm.op_name == "aten::addmm" and gemm.input_dims == ((32,), (8, 16), (16, 32), (), ())
    assert [o.name for o in memset.ops] == ["aten::linear"]  # launched after addmm ended


def test_cpu_only_trace_measures_top_level_cpu_ops() -> None:
    trace = KinetoTrace()
    trace.op("aten::matmul", 0, 50, [[4, 8], [8, 2]], ["float", "float"], tid=1)
    trace.op("aten::mm", 5, 40, [[4, 8], [8, 2]], ["float", "float"], tid=1)
    trace.op("aten::relu", 60, 10, [[4, 2]], ["float"], tid=1)
    trace.op("aten::add", 5, 20, [[4], [4]], ["float", "float"], tid=2)  # top level on its own thread
    parsed = parse_trace(trace.to_bytes(gz=True))
    assert [(k.name, k.category) for k in parsed.kernels] == [
        ("aten::matmul", "cpu_op"), ("aten::add", "cpu_op"), ("aten::relu", "cpu_op")]
    assert [k.duration_s for k in parsed.kernels] == pytest.approx([50e-6, 20e-6, 10e-6])
    assert parsed.kernels[0].input_dims == ((4, 8), (8, 2))
    assert any("cpu_op" in w for w in parsed.warnings)


def test_graph_kernels_sharing_one_launch_all_join_its_op() -> None:
    """A CUDA graph replay launches several kernels under one correlation id: each finds the launch's op; a
    launch id seen twice keeps the last launch (a large External id matching no op is kept as it is)."""
    trace = KinetoTrace()
    external = trace.op("aten::mm", 0.0, 50.0, dims=[[64, 32], [32, 16]], types=["float", "float"])
    trace.kernel("sgemm_a", 10.0, 60.0, 5.0, external=external)
    shared = trace.events[-1]["args"]["correlation"]
    trace.events.append({**trace.events[-1], "name": "sgemm_b", "ts": 70.0})
    trace.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 9,
                         "ts": 500.0, "dur": 1, "args": {"correlation": 999, "External id": 2**62}})
    trace.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1,
                         "ts": 20.0, "dur": 1, "args": {"correlation": 999, "External id": external}})
    trace.events.append({**trace.events[-4], "name": "sgemm_c", "ts": 80.0,
                         "args": {**trace.events[-4]["args"], "correlation": 999, "External id": 2**62}})
    parsed = parse_trace(trace.to_bytes())
    assert [k.name for k in parsed.kernels] == ["sgemm_a", "sgemm_b", "sgemm_c"]
    assert all(k.op_name == "aten::mm" for k in parsed.kernels), shared
