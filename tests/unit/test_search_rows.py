"""The search's listed rows (built column-wise) and the per-tables arrays kept by ``machine.derived``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.labels import Labels
from perfmodel.machine import MachineTables, tables
from perfmodel.ops import Work
from perfmodel.roofline import work_of
from perfmodel.roofline_labels import bound_names
from perfmodel.search import gemm_kernel
from perfmodel.search.engine import _rows
from perfmodel.search.gemm_space import GemmCandidates, full_space

IntArray = np.ndarray[Any, np.dtype[np.intp]]
BoolArray = np.ndarray[Any, np.dtype[np.bool_]]

DEVICES = ["nvidia-h100-sxm5-80gb", "google-tpu-v5p", "generic-npu", "intel-gaudi2", "intel-xeon-platinum-8480"]


def _scalar_row(space: GemmCandidates, i: int, elem: float, mma_k: int, time_s: float, footprint: float,
                waves: float) -> dict[str, float]:
    """One listed row as the search built it before (one ``float`` per value)."""
    s = space
    bk = max(np.ceil(s.bk_bytes[i] / elem / mma_k) * mma_k, mma_k)
    return {"tile_m": float(s.bm[i]), "tile_n": float(s.bn[i]), "tile_k": float(bk),
            "stages": float(s.stages[i]), "split_k": float(s.split[i]),
            "raster_group": float(s.group[i]), "time_s": float(time_s),
            "footprint_bytes": float(footprint), "waves": float(waves)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("elem", [1.0, 2.0, 4.0])
def test_listed_rows_equal_the_scalar_rows(device: str, elem: float) -> None:
    t = tables(perfmodel.load_hardware(device))
    space = full_space(t)
    rng = np.random.default_rng(int(elem))
    at = rng.choice(space.size, size=40, replace=False)
    time_s, footprint, waves = rng.random(40) * 1e-3, rng.random(40) * 1e5, rng.random(40) * 8.0
    rows = _rows(space, at, elem, t, time_s, footprint, waves)
    expect = [_scalar_row(space, int(i), elem, t.mma_k, time_s[j], footprint[j], waves[j]) for j, i in enumerate(at)]
    assert rows == expect
    assert all(list(r) == list(e) and all(type(v) is float for v in r.values()) for r, e in zip(rows, expect,
                                                                                                 strict=True))


def test_device_vector_is_a_copy_of_the_kept_one() -> None:
    t = tables(perfmodel.load_hardware("nvidia-h100-sxm5-80gb"))
    first = gemm_kernel.device_vector(t)
    first[:] = -1.0  # a caller's edit (tests do this) must not reach the next search
    second = gemm_kernel.device_vector(t)
    assert np.array_equal(second, gemm_kernel._device_vector(t))
    assert not np.shares_memory(first, second)


def _bound_names_before(t: MachineTables, work: Work, which: IntArray, labels: list[str], latency: BoolArray,
                        idle: BoolArray) -> Labels:
    """``roofline_labels.bound_names`` as it was before its tables were kept (built on every call)."""
    names = [*labels, *(p.engine for p in t.matrix_paths), *(p.engine for p in t.vector_paths),
             t.special_engine, "latency", "none"]
    matrix_at, vector_at = len(labels), len(labels) + len(t.matrix_paths)
    special_at = vector_at + len(t.vector_paths)
    code = which.astype(np.intp)
    for cls, replacement in (("matrix", matrix_at + work.matrix_dtype),
                             ("vector", vector_at + work.vector_dtype),
                             ("special", np.full(code.size, special_at))):
        named = np.array([name == cls for name in names])
        code = np.where(named[code], replacement, code)
    code[latency] = special_at + 1
    code[idle] = special_at + 2
    return Labels.from_codes(code, names)


@pytest.mark.parametrize("device", DEVICES)
def test_kept_bound_table_gives_the_labels_built_per_call(device: str) -> None:
    t = tables(perfmodel.load_hardware(device))
    n = len(t.matrix_paths)
    work = work_of([perfmodel.ops.make_op({"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "bf16"})] * n, 1.0)
    work.matrix_dtype = np.arange(n)
    work.vector_dtype = np.arange(n)[::-1].copy()
    for labels in (["matrix", "vector", "special", t.dram.name, "interconnect"], ["matrix", "vector", "special"]):
        for which in range(len(labels)):
            codes = np.full(n, which, dtype=np.intp)
            latency, idle = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
            latency[0], idle[-1] = True, True
            for _ in range(2):  # built, then kept
                got = bound_names(t, work, codes, labels, latency, idle)
                want = _bound_names_before(t, work, codes, labels, latency, idle)
                assert got.names == want.names
                assert np.array_equal(got.codes, want.codes) and got.codes.dtype == want.codes.dtype
