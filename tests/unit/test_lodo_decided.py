"""benchmarks/lodo.py can choose ``onchip_efficiency`` on the rows whose prediction it decides (``DECIDED_DEFAULTS``,
``_decided_rows``; off at the tip, ``lodo_conv_switches.py --switches O``), as the kernel floor is chosen on the rows
it bounds: a row the on-chip share cannot move (a launch-bound kernel, a DRAM stream) then never dilutes the median
of its cell in the shared score (docs/accuracy.md, conv18)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest
from benchmark_module import load_benchmark

from perfmodel.efficiency import ModelDefaults, defaults_for
from perfmodel.specs import load_hardware

lodo = load_benchmark("lodo", "lodo_benchmark")
data = sys.modules["measured_data"]

A100 = "nvidia-a100-sxm4-80gb"
# launch-bound (2.68 us at any share), HBM-bound (78.3 us at any share), and 583.4 us at 0.5-0.75, 554.4 us at 0.9
RELU: dict[str, Any] = {"kind": "elementwise", "shape": [4, 72, 1, 1], "dtype": "fp32"}
STREAM: dict[str, Any] = {"kind": "elementwise", "shape": [4096, 4096], "dtype": "fp32"}
GEMM: dict[str, Any] = {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "fp16"}
GRID = lodo.GRIDS["onchip_efficiency"]


def _row(op: dict[str, Any], measured_s: float, label: str) -> Any:
    return data.Row("test", A100, op, measured_s, "kernel", label, label)


def _shipped() -> dict[str, ModelDefaults]:
    return {A100: defaults_for(load_hardware(A100))}


@pytest.fixture
def decided(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lodo, "DECIDED_DEFAULTS", frozenset({"onchip_efficiency"}))


def test_the_tip_scores_the_onchip_share_on_every_row() -> None:
    """Off at the tip (the fit as main's): no default is restricted to the rows it decides."""
    assert frozenset() == lodo.DECIDED_DEFAULTS


@pytest.mark.usefixtures("decided")
def test_only_rows_the_onchip_share_moves_are_decided() -> None:
    """Of a launch-bound ReLU, an HBM-bound stream and a 4096^3 fp16 GEMM, only the GEMM's time moves between the
    grid's ends (0.5 and 0.9), so only it is kept."""
    rows = [_row(RELU, 3e-6, "elementwise"), _row(STREAM, 80e-6, "elementwise"), _row(GEMM, 570e-6, "matmul")]
    kept = lodo._decided_rows(rows, np.arange(3), _shipped(), {"onchip_efficiency": 0.75}, "onchip_efficiency", GRID)
    assert kept.tolist() == [2]


@pytest.mark.usefixtures("decided")
def test_rows_the_share_cannot_move_do_not_dilute_its_cell() -> None:
    """One matmul cell: the GEMM measured at its prediction at 0.9 (the 4096^3 GEMM's time steps between 0.75 and
    0.9) and two launch-bound ReLUs measured at theirs. Scored on all three, the cell's median error is the ReLUs' 0
    at every share, nothing scores strictly better and the shipped 0.75 stays; on the decided row alone the GEMM
    chooses 0.9. With no decided row the shipped value stays."""
    import dataclasses

    import perfmodel

    shipped = _shipped()
    at_09 = perfmodel.predict(A100, GEMM, defaults=dataclasses.replace(shipped[A100], onchip_efficiency=0.9)).time_s
    relu_s = perfmodel.predict(A100, RELU, defaults=shipped[A100]).time_s
    gemm = _row(GEMM, at_09, "matmul")
    relus = [_row(RELU, relu_s, "matmul"), _row(RELU, relu_s, "matmul")]
    grids = {"onchip_efficiency": GRID}
    assert lodo.fit_defaults([gemm], shipped, grids)["onchip_efficiency"] == 0.9
    assert lodo.fit_defaults([gemm, *relus], shipped, grids)["onchip_efficiency"] == 0.9
    assert lodo.fit_defaults(relus, shipped, grids)["onchip_efficiency"] == shipped[A100].onchip_efficiency == 0.75


def test_off_the_undecided_rows_dilute_the_cell() -> None:
    """The same cell scored on every row (the tip): the ReLUs' zero median holds the shipped 0.75."""
    import dataclasses

    import perfmodel

    shipped = _shipped()
    at_09 = perfmodel.predict(A100, GEMM, defaults=dataclasses.replace(shipped[A100], onchip_efficiency=0.9)).time_s
    relu_s = perfmodel.predict(A100, RELU, defaults=shipped[A100]).time_s
    rows = [_row(GEMM, at_09, "matmul"), _row(RELU, relu_s, "matmul"), _row(RELU, relu_s, "matmul")]
    assert lodo.fit_defaults(rows, shipped, {"onchip_efficiency": GRID})["onchip_efficiency"] == 0.75
