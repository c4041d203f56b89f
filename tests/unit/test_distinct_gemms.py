"""Repeated GEMM shapes are searched once (``roofline._best_distinct``), kinds factorised by binary search:
both give what the plain per-row forms give."""

from __future__ import annotations

import dataclasses

import numpy as np

from perfmodel.machine import tables
from perfmodel.ops.columns import factorize
from perfmodel.roofline import DISTINCT_FROM_GEMMS, _best_distinct
from perfmodel.search.gemm_cost import GemmChoice, best_gemms
from perfmodel.search.gemm_space import compact_space
from perfmodel.specs import load_hardware


def test_distinct_rows_get_the_per_row_choice() -> None:
    t = tables(load_hardware("nvidia-h100-sxm5-80gb"))
    space = compact_space(t)
    rng = np.random.default_rng(0)
    rows = 4 * DISTINCT_FROM_GEMMS
    dims = np.array([16.0, 128.0, 1024.0, 4096.0])
    m, n, k = (rng.choice(dims, rows) for _ in range(3))
    batch, elem = np.ones(rows), rng.choice(np.array([1.0, 2.0]), rows)
    peak = np.where(elem == 1.0, 1.979e15, 0.989e15)
    compulsory = (m * k + k * n + m * n) * elem
    got = _best_distinct(t, space, batch, m, n, k, elem, peak, compulsory)
    want = best_gemms(t, space, batch, m, n, k, elem, peak, compulsory)
    for f in dataclasses.fields(GemmChoice):
        assert np.array_equal(getattr(got, f.name), getattr(want, f.name)), f.name


def test_factorize_matches_one_comparison_per_name() -> None:
    names = ["softmax", "matmul", "rmsnorm", "attention"]
    values = np.array(["matmul", "rmsnorm", "zzz", "attention", "", "matmul", "aaa", "softmax"])
    expected = np.full(values.size, -1)
    for i, name in enumerate(names):
        expected[values == name] = i
    assert factorize(values, names).tolist() == expected.tolist()
    assert factorize(values[:0], names).size == 0
