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
        assert memcpy.name == "[CUDA memcpy HtoD]" and memcpy.counters["bytes"] == 1e6


def test_sqlite_without_kernel_table_is_rejected(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x INTEGER)")
    db.commit()
    db.close()
    with pytest.raises(TraceError, match="CUPTI_ACTIVITY_KIND_KERNEL"):
        parse_trace(path)
