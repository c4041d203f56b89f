"""Systolic-array compute cycles against SCALE-Sim (external oracle) and against hand counts."""

from __future__ import annotations

from types import ModuleType

import pytest
from benchmark_module import load_benchmark

from perfmodel.systolic import DATAFLOWS, array_cycles


def _oracle() -> ModuleType:
    pytest.importorskip("scalesim")
    return load_benchmark("scalesim_oracle", "scalesim_oracle")


def test_cycles_match_scalesim_over_arrays_dataflows_and_shapes() -> None:
    """8x8 to 256x256 and rectangular arrays; OS, WS, IS; shapes that are and are not multiples of the
    array: within 5 % of SCALE-Sim's compute cycles (the closed form is exact), and so is the cycle
    count the GEMM cost model charges for an unbuffered weight-stationary schedule."""
    oracle = _oracle()
    cases, _ = oracle.run(arrays=((8, 8), (32, 32), (256, 256), (8, 32), (128, 32)),
                          shapes=((64, 64, 64), (100, 70, 50), (33, 257, 129)))
    assert {c.dataflow for c in cases} == set(DATAFLOWS)
    assert len(cases) >= 40
    for c in cases:
        assert c.error <= 0.05, c
        assert c.path_error <= 0.05, c


def test_hand_counts() -> None:
    """A 1024^3 GEMM on a 32x32 weight-stationary array: 32 x 32 folds of 1024 + 2·32 + 32 − 2 cycles:
    1,119,232, a little over the ideal 1024^3 / 32^2 = 1,048,576 (MODELING.md)."""
    assert float(array_cycles(1024, 1024, 1024, 32, 32, "ws")) == 32 * 32 * (1024 + 64 + 30)
    # output stationary: 2 x 3 folds of K + rows + cols - 2
    assert float(array_cycles(10, 20, 7, 8, 8, "os")) == 2 * 3 * (7 + 14)
    # input stationary: K on rows, M on cols, N streams
    assert float(array_cycles(10, 20, 7, 8, 8, "is")) == 1 * 2 * (20 + 16 + 6)


@pytest.mark.parametrize(("m", "rows", "dataflow"), [(0, 8, "ws"), (8, 0, "ws"), (8, 8, "xs")])
def test_bad_input_is_a_clear_error(m: int, rows: int, dataflow: str) -> None:
    with pytest.raises(ValueError, match=r"dimensions|rows|dataflow"):
        array_cycles(m, 8, 8, rows, 8, dataflow)  # type: ignore[arg-type]
