"""The compare's fast paths give exactly what the plain definitions give: bootstrap medians from rank counts
(``np.median`` of each resample), group keys made once per distinct op (``op_key``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from perfmodel.compare.sides import OpKeys, op_key
from perfmodel.compare.stats import resampled_medians


@pytest.mark.parametrize("n", [1, 2, 3, 6, 17, 256])
def test_resampled_medians_equal_numpys(n: int) -> None:
    rng = np.random.default_rng(n)
    for values in (rng.normal(size=n), np.round(rng.normal(size=n), 1), np.full(n, 2.5)):  # ties included
        idx = rng.integers(0, n, (400, n))
        assert np.array_equal(resampled_medians(values, idx), np.median(values[idx], axis=1))


def test_op_keys_equal_op_key() -> None:
    ops: list[dict[str, Any]] = [
        {"kind": "matmul", "m": 8, "n": 16, "k": 4, "dtype": "bf16"},
        {"kind": "matmul", "m": 8, "n": 16, "k": 4.0, "dtype": "bf16"},
        {"kind": "x", "shape": [1, 2], "alpha": math.nan}, {"kind": "x", "shape": [1, 2], "alpha": None},
        {"kind": "x", "big": 2**70}, {"kind": "é", "object": object}]
    keys = OpKeys()
    for _ in range(2):  # the second pass reads what the first remembered
        for op in ops:
            assert keys("aten::mm", op) == op_key("aten::mm", op)
    assert len({keys("aten::mm", op) for op in ops}) == len(ops)
