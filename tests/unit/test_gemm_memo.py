"""GEMM choices kept across calls (``gemm_memo``): the kernel's answers, searched once per row, device and space."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.machine import tables
from perfmodel.search import gemm_kernel, gemm_memo
from perfmodel.search.gemm_cost import GemmChoice, best_gemms
from perfmodel.search.gemm_space import compact_space, full_space

pytestmark = pytest.mark.skipif(not gemm_kernel.jit_enabled(), reason="numba kernel disabled or not installed")


def _rows(t: Any, count: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    m, n, k = (rng.integers(1, 20_000, count) * 1.0 for _ in range(3))
    peak = np.full(count, t.matrix_peak[t.matrix_peak > 0][0])
    return np.ones(count), m, n, k, np.full(count, 2.0), peak, rng.random(count) * 1e9


def _direct(t: Any, space: Any, args: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    return gemm_kernel.best_per_op(gemm_kernel.device_vector(t), space, *args)


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    assert gemm_kernel.load()
    gemm_memo.clear()
    yield
    gemm_memo.clear()


def test_kept_choices_equal_the_kernel_and_only_new_rows_are_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    t = tables(perfmodel.load_hardware("nvidia-h100-sxm5-80gb"))
    space = full_space(t)
    args = _rows(t, 12, seed=3)
    searched: list[int] = []
    real = gemm_kernel.best_per_op

    def counting(*a: Any) -> Any:
        searched.append(int(a[2].size))
        return real(*a)

    monkeypatch.setattr(gemm_kernel, "best_per_op", counting)
    first = best_gemms(t, space, *(c[:8] for c in args))
    mixed = best_gemms(t, space, *(c[4:] for c in args))  # rows 4-7 kept, 8-11 new
    again = best_gemms(t, space, *args)
    assert searched == [8, 4]
    monkeypatch.setattr(gemm_kernel, "best_per_op", real)
    index, block = _direct(t, space, args)
    for got, rows in ((first, slice(0, 8)), (mixed, slice(4, 12)), (again, slice(0, 12))):
        np.testing.assert_array_equal(got.index, index[rows])
        for f, name in enumerate(gemm_kernel.CHOICE_FIELDS):
            np.testing.assert_array_equal(getattr(got, name), block[f, rows], err_msg=name)


def test_device_and_space_are_part_of_the_key() -> None:
    h100, a100 = (tables(perfmodel.load_hardware(d)) for d in ("nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb"))
    args = _rows(h100, 6, seed=5)
    for t in (h100, a100, h100):
        full = full_space(t)
        reversed_space = full.take(np.arange(full.size)[::-1])  # the same candidates, other indices
        for space in (full, reversed_space, compact_space(t)):
            got = best_gemms(t, space, *args)
            index, block = _direct(t, space, args)
            np.testing.assert_array_equal(got.index, index)
            np.testing.assert_array_equal(got.body_s, block[gemm_kernel.CHOICE_FIELDS.index("body_s")])
    assert len(gemm_memo._MEMO) == 5  # two full spaces, three reversed copies (one per loop); no compact set


def test_a_caller_changing_its_arrays_does_not_change_the_kept_choice() -> None:
    t = tables(perfmodel.load_hardware("nvidia-h100-sxm5-80gb"))
    args = _rows(t, 3, seed=9)
    first = best_gemms(t, full_space(t), *args)
    want = {name: getattr(first, name).copy() for name in GemmChoice.__dataclass_fields__}
    for name in want:
        getattr(first, name)[:] = 0
    again = best_gemms(t, full_space(t), *args)
    for name, values in want.items():
        np.testing.assert_array_equal(getattr(again, name), values, err_msg=name)


def test_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gemm_memo, "MAX_ROWS", 10)
    t = tables(perfmodel.load_hardware("nvidia-h100-sxm5-80gb"))
    for seed in range(4):
        best_gemms(t, full_space(t), *_rows(t, 6, seed=seed))
    assert gemm_memo._MEMO and all(len(rows) <= 10 for _, rows in gemm_memo._MEMO.values())
