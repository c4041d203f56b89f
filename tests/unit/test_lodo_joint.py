"""benchmarks/lodo_joint.py: ``matrix_efficiency`` and ``onchip_efficiency`` chosen as a pair on their grids'
product in the fold fit (conv19; off at the tip, ``lodo_conv_switches.py --switches J``)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import pytest
from benchmark_module import load_benchmark

import perfmodel
from perfmodel.efficiency import ModelDefaults, defaults_for
from perfmodel.specs import load_hardware

lodo = load_benchmark("lodo", "lodo_benchmark")
joint = load_benchmark("lodo_joint", "lodo_joint")
data = sys.modules["measured_data"]

A100 = "nvidia-a100-sxm4-80gb"
RELU: dict[str, Any] = {"kind": "elementwise", "shape": [4, 72, 1, 1], "dtype": "fp32"}
GEMM: dict[str, Any] = {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "fp16"}
GRIDS = {name: lodo.GRIDS[name] for name in ("matrix_efficiency", "onchip_efficiency")}


def _row(op: dict[str, Any], measured_s: float, label: str) -> Any:
    return data.Row("test", A100, op, measured_s, "kernel", label, label)


def _shipped() -> dict[str, ModelDefaults]:
    return {A100: defaults_for(load_hardware(A100))}


def _rows(matrix: float, onchip: float) -> list[Any]:
    """A 4096^3 fp16 GEMM measured at its prediction with the given pair, and a launch-bound ReLU at its own."""
    shipped = _shipped()[A100]
    at = dataclasses.replace(shipped, matrix_efficiency=matrix, onchip_efficiency=onchip)
    return [_row(GEMM, perfmodel.predict(A100, GEMM, defaults=at).time_s, "matmul"),
            _row(RELU, perfmodel.predict(A100, RELU, defaults=shipped).time_s, "elementwise")]


def test_the_tip_fits_coordinate_wise() -> None:
    """Off at the tip: lodo's fold fit is its own coordinate descent."""
    assert joint.lodo.fit_defaults is not joint.fit_defaults_joint
    assert lodo.fit_defaults is not joint.fit_defaults_joint


def test_the_pair_is_scored_on_the_grids_product(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pass scores every (matrix, onchip) pair of the two grids at once, 8 x 4 = 32 trials; neither is
    scored alone (the other calls are the harness terms' grids)."""
    seen: list[int] = []
    real = joint._scores

    def spy(*args: Any) -> list[float]:
        seen.append(len(args[4]))
        out: list[float] = real(*args)
        return out

    monkeypatch.setattr(joint, "_scores", spy)
    joint.fit_defaults_joint(_rows(0.7, 0.5), _shipped(), GRIDS)
    pairs = len(GRIDS["matrix_efficiency"]) * len(GRIDS["onchip_efficiency"])
    single = {len(grid) for grid in GRIDS.values()}
    harness = {len(grid) for grid in lodo.HARNESS_GRIDS.values()}
    assert seen.count(pairs) >= 1 and not single & (set(seen) - harness)


def test_the_joint_fit_reproduces_a_gemm_measured_at_a_pair() -> None:
    """A GEMM measured at its prediction with a grid pair: the joint choice predicts it exactly (score 0)."""
    rows = _rows(0.7, 0.5)
    choice = joint.fit_defaults_joint(rows, _shipped(), GRIDS)
    model, _ = lodo._split(choice)
    defaults = lodo.with_model(_shipped(), model)
    assert lodo._predict(rows[:1], defaults)[0] == pytest.approx(rows[0].measured_s, rel=1e-9)


@pytest.mark.parametrize("name", ["matrix_efficiency", "onchip_efficiency"])
def test_with_one_of_the_pair_searched_it_is_lodos_fit(name: str) -> None:
    """Without both defaults in the grids the joint fit is lodo's coordinate descent, value for value."""
    rows, grids = _rows(0.7, 0.6), {name: GRIDS[name]}
    assert joint.fit_defaults_joint(rows, _shipped(), grids) == lodo.fit_defaults(rows, _shipped(), grids)
