"""The GEMM schedule space built as a meshgrid (issue 25: 12 ms -> 0.7 ms of every `perfmodel predict`) is the
``itertools.product`` it replaced: the same candidates in the same order."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from perfmodel.machine import tables
from perfmodel.search.gemm_space import _product, full_space
from perfmodel.specs import load_hardware

FIELDS = ("bm", "bn", "bk_bytes", "stages", "split", "group")


@pytest.mark.parametrize("axes", [
    ((16, 32), (64,), (32, 64, 128), (1, 2), (1, 2, 4), (1, 8)),
    ((16, 32, 64, 128, 256), (16, 32, 64, 128, 256), (32, 64, 128, 256), (1, 2, 3, 4, 5), (1, 2), (1, 4, 16)),
])
def test_product_is_itertools_product(axes: tuple[tuple[int, ...], ...]) -> None:
    space = _product(*axes)
    expected = np.array(list(itertools.product(*axes)), dtype=np.float64)
    assert space.size == len(expected)
    for i, name in enumerate(FIELDS):
        column = getattr(space, name)
        assert column.dtype == np.float64 and column.flags.writeable
        np.testing.assert_array_equal(column, expected[:, i])


@pytest.mark.parametrize("device", ["nvidia-h100-sxm5-80gb", "google-tpu-v5p", "intel-xeon-platinum-8480"])
def test_full_space_columns_are_independent(device: str) -> None:
    space = full_space(tables(load_hardware(device)))
    columns = [getattr(space, name) for name in FIELDS]
    assert all(c.base is None or not any(np.shares_memory(c, o) for o in columns if o is not c) for c in columns)
    assert space.size == len({tuple(row) for row in np.stack(columns, axis=1)})  # no repeats
