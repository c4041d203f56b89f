"""Quick host measurement: plausible numbers, a spec that validates, and the fallbacks."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

pytest.importorskip("torch")

import perfmodel
from perfmodel.measure import HostMeasurement, host_spec, measure_host
from perfmodel.measure.bandwidth import SweepPoint, level_bandwidths, plateaus, sweep_sizes_bytes
from perfmodel.measure.flops import PeakResult
from perfmodel.measure.report import format_measurement
from perfmodel.measure.sysinfo import CacheInfo, count_cpu_list, parse_size_bytes, read_caches
from perfmodel.specs import parse_spec


@pytest.fixture(scope="module")
def measured() -> HostMeasurement:
    return measure_host(quick=True)


def test_numbers_are_plausible(measured: HostMeasurement) -> None:
    assert measured.threads == len(os.sched_getaffinity(0))
    bandwidths = {lv.name: lv.bandwidth.value for lv in measured.levels if lv.bandwidth}
    assert "DRAM" in bandwidths and all(v > 0 for v in bandwidths.values())
    assert measured.levels[0].name == "DRAM"
    innermost = measured.levels[-1]
    if innermost.bandwidth is not None and innermost.name != "DRAM":
        assert innermost.bandwidth.value >= bandwidths["DRAM"]
    for dtype in ("fp32", "fp64"):
        assert (measured.peak_flops_per_s(dtype) or 0.0) > 1e9
    assert 0 < measured.dispatch_overhead.value < 1e-3
    assert all(lv.bandwidth.method for lv in measured.levels if lv.bandwidth)


def test_spec_validates_and_predicts(measured: HostMeasurement) -> None:
    spec = host_spec(measured, "test-host")
    hw = parse_spec(spec)
    assert hw.kind == "cpu" and hw.id == "test-host" and hw.units == measured.threads
    assert spec["source"].startswith("measured by perfmodel measure on ")
    assert measured.cpu.model in spec["source"]
    assert "bandwidth_bytes_per_s" in spec["levels"][0]["sources"]
    cost = perfmodel.predict(hw, {"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "fp32"})
    assert 0 < cost.time_s < 10
    table = format_measurement(measured)
    assert "DRAM" in table and "fp32" in table


def test_unmeasured_dtype_is_left_out_with_its_reason(measured: HostMeasurement) -> None:
    peaks = dict(measured.peaks, int8=PeakResult("int8", None, 0, 0, "torch._int_mm", "not measurable here: x"))
    spec = host_spec(dataclasses.replace(measured, peaks=peaks))
    matrix = spec["engines"][0]
    assert "int8" not in matrix["peak_flops_per_s"] and "int8: not measurable here" in matrix["source"]
    parse_spec(spec)


def test_without_cache_sizes_only_dram_is_assigned(measured: HostMeasurement) -> None:
    cpu = dataclasses.replace(measured.cpu, caches=(), caches_note="no cache levels (test)")
    from perfmodel.measure.host import _levels

    levels, _notes = _levels(cpu, list(measured.sweep), list(measured.plateaus))
    assert [lv.name for lv in levels] == ["DRAM"] and levels[0].bandwidth is not None
    spec = host_spec(dataclasses.replace(measured, cpu=cpu, levels=tuple(levels)))
    assert len(parse_spec(spec).levels) == 1


def _points(values: dict[int, float]) -> list[SweepPoint]:
    return [SweepPoint("read", size, 2, bw, 3) for size, bw in values.items()]


def test_plateaus_and_level_windows_on_a_synthetic_curve() -> None:
    kib, mib = 1024, 1 << 20
    curve = {16 * kib: 200e9, 32 * kib: 210e9, 256 * kib: 150e9, 512 * kib: 155e9, 8 * mib: 90e9,
             16 * mib: 92e9, 128 * mib: 30e9, 256 * mib: 31e9}
    runs = plateaus(_points(curve))
    assert [round(p.bandwidth_bytes_per_s / 1e9) for p in runs] == [205, 152, 91, 30]
    caches = (CacheInfo(1, "Data", 48 * kib, 1, 64, "t"), CacheInfo(2, "Unified", 1 * mib, 1, 64, "t"),
              CacheInfo(3, "Unified", 32 * mib, 2, 64, "t"))
    found = level_bandwidths(_points(curve), caches, threads=2)
    assert {k: round(v[0] / 1e9) for k, v in found.items()} == {"L1D": 205, "L2": 152, "L3": 91, "DRAM": 30}


def test_sweep_reaches_four_times_the_llc() -> None:
    sizes = sweep_sizes_bytes(32 << 20, quick=True)
    assert sizes[0] == 16 << 10 and sizes[-1] >= 4 * (32 << 20)


def test_sysfs_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_size_bytes("48K") == 49152 and parse_size_bytes("32M\n") == 32 << 20
    assert count_cpu_list("0-3,8") == 5
    for index, (level, kind, size, shared) in enumerate([(1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"),
                                                         (3, "Unified", "32768K", "0-1")]):
        folder = tmp_path / "cpu0" / "cache" / f"index{index}"
        folder.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (folder / name).write_text(f"{value}\n")
    monkeypatch.setattr("perfmodel.measure.sysinfo.SYSFS_CACHE", tmp_path / "cpu{cpu}" / "cache")
    caches, _ = read_caches(0)
    assert [(c.name, c.size_bytes, c.shared_cpus) for c in caches] == [("L1D", 49152, 1), ("L3", 32 << 20, 2)]
    empty, note = read_caches(7)
    assert empty == () and "only DRAM" in note
