"""Broken, empty, wrong, huge and hostile inputs: clear TraceErrors, bounded work, names kept verbatim."""

from __future__ import annotations

import gzip
import io
import tracemalloc
from pathlib import Path

import pytest
from trace_builders import DATA, KinetoTrace

from perfmodel.traces import TraceError, parse_trace
from perfmodel.traces.records import MAX_NAME_CHARS

ALEXNET = DATA / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"


def test_truncated_gzip() -> None:
    data = ALEXNET.read_bytes()
    with pytest.raises(TraceError, match="truncated or corrupt"):
        parse_trace(data[: len(data) // 2])


def test_corrupt_gzip_header() -> None:
    with pytest.raises(TraceError, match="gzip"):
        parse_trace(b"\x1f\x8b\x08\x00" + b"\xff" * 64)


@pytest.mark.parametrize("content", [b"", b"   \n\n"])
def test_empty(content: bytes) -> None:
    with pytest.raises(TraceError, match=r"empty.*expected a PyTorch profiler"):
        parse_trace(content)


@pytest.mark.parametrize("content", [
    b'{"hello": "world"}', b"a,b,c\n1,2,3\n", b"just some text\n", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8,
])
def test_wrong_format_names_what_was_expected(content: bytes) -> None:
    with pytest.raises(TraceError, match="expected") as error:
        parse_trace(content)
    assert isinstance(error.value, ValueError)


def test_truncated_json() -> None:
    data = KinetoTrace()
    data.op("aten::mm", 0, 10, [[2, 2], [2, 2]], ["float", "float"])
    with pytest.raises(TraceError, match=r"JSON|truncated"):
        parse_trace(data.to_bytes()[:-40])


def test_file_name_does_not_decide_the_format(tmp_path: Path) -> None:
    path = tmp_path / "looks_like.json"
    path.write_bytes(b"Name,Calls,TotalDurationNs,AverageNs,Percentage\nk,1,100,100,100\n")
    assert parse_trace(path, filename="looks_like.json").format == "rocprof_stats"


def test_markup_in_a_kernel_name_is_kept_verbatim() -> None:
    t = KinetoTrace()
    name = '<img src=x onerror=alert(1)>"; DROP TABLE runs; --'
    t.kernel(name, 0, 10, 1.0)
    (kernel,) = parse_trace(t.to_bytes()).kernels
    assert kernel.name == name


def test_huge_strings_are_clipped() -> None:
    t = KinetoTrace()
    t.op("x" * 1_000_000, 0, 100, [[1] * 10_000], ["float"] * 10_000, ["y" * 100_000])
    t.kernel("k" * 2_000_000, 1, 10, 1.0)
    (kernel,) = parse_trace(t.to_bytes()).kernels
    assert len(kernel.name) == MAX_NAME_CHARS + 1
    assert len(kernel.ops[0].name) == MAX_NAME_CHARS + 1
    assert kernel.input_dims == (None,)  # a 10,000-dimension "shape" is not a shape


def test_deeply_nested_args_are_refused_without_recursion() -> None:
    """20,000 levels were read (the kernel kept, its grid dropped), but ijson's memory grows with the square of
    the depth: this file took about 2 GB and 200,000 levels had the service OOM-killed (qa15). Now a TraceError
    names the depth, before ijson reads past it; no RecursionError either way."""
    depth = 20_000  # json.loads would hit the recursion limit; the guard counts brackets, it does not recurse
    deep = "[" * depth + "1" + "]" * depth
    text = ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 1, "ts": 1, "dur": 2, '
            f'"args": {{"grid": {deep}, "Input Dims": {deep}}}}}]}}')
    with pytest.raises(TraceError, match="nests deeper than 100 levels"):
        parse_trace(text.encode())


def _many_kernels(count: int) -> bytes:
    events = ",".join(
        f'{{"ph":"X","cat":"kernel","name":"k{i % 7}","pid":0,"tid":7,"ts":{i * 3},"dur":2,'
        f'"args":{{"correlation":{i},"device":0,"stream":7}}}}' for i in range(count))
    return gzip.compress(('{"traceEvents":[' + events + "]}").encode(), compresslevel=1)


def test_100k_kernels() -> None:
    data = _many_kernels(100_000)
    tracemalloc.start()
    parsed = parse_trace(io.BytesIO(data))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(parsed.kernels) == 100_000
    assert parsed.total_kernel_time_s == pytest.approx(0.2)
    assert peak < 200 * 1024 * 1024  # records only, no DOM: ~1 KB per kernel at most


def test_record_cap_stops_with_a_warning() -> None:
    parsed = parse_trace(_many_kernels(1_000), max_records=100)
    assert len(parsed.kernels) == 100
    assert any("more than 100 kernels" in w for w in parsed.warnings)


def test_csv_with_a_huge_field() -> None:
    big = "x" * (2 << 20)
    with pytest.raises(TraceError, match="malformed CSV"):
        parse_trace(f"KernelName,DurationNs\nk,100\n{big},5\n".encode())
