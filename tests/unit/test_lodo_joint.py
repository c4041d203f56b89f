"""benchmarks/lodo.py's fold fit chooses ``matrix_efficiency`` and ``onchip_efficiency`` as a pair on their grids'
product (``lodo_joint.JOINT``, conv19; ``lodo_conv_switches.py`` without J: one at a time)."""

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
joint = sys.modules["lodo_joint"]
data = sys.modules["measured_data"]

A100 = "nvidia-a100-sxm4-80gb"
RELU: dict[str, Any] = {"kind": "elementwise", "shape": [4, 72, 1, 1], "dtype": "fp32"}
GEMM: dict[str, Any] = {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "fp16"}
GRIDS = {name: lodo.GRIDS[name] for name in ("matrix_efficiency", "onchip_efficiency", "vector_efficiency")}


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


def test_the_tip_fits_the_pair_jointly() -> None:
    assert joint.JOINT == ("matrix_efficiency", "onchip_efficiency")


def test_the_pair_is_one_step_on_the_grids_product() -> None:
    """matrix_efficiency's step scores its 8 values x onchip's 4 (32 pairs, in grid order); onchip_efficiency has no
    step of its own; any other default is scored alone over its grid."""
    pairs = joint.pair_trials("matrix_efficiency", GRIDS)
    assert len(pairs) == 32 and pairs[0] == {"matrix_efficiency": 0.6, "onchip_efficiency": 0.5}
    assert pairs[-1] == {"matrix_efficiency": 0.95, "onchip_efficiency": 0.9}
    assert joint.pair_trials("onchip_efficiency", GRIDS) == []
    vector = GRIDS["vector_efficiency"]
    assert joint.pair_trials("vector_efficiency", GRIDS) == [{"vector_efficiency": v} for v in vector]


def test_off_or_without_both_each_default_is_scored_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Off (``JOINT = ()``), or with only one of the pair searched, the descent is coordinate-wise."""
    one = {"onchip_efficiency": GRIDS["onchip_efficiency"]}
    assert joint.pair_trials("onchip_efficiency", one) == [{"onchip_efficiency": v} for v in one["onchip_efficiency"]]
    monkeypatch.setattr(joint, "JOINT", ())
    assert joint.pair_trials("onchip_efficiency", GRIDS) == [{"onchip_efficiency": v} for v in (0.5, 0.6, 0.75, 0.9)]


@pytest.mark.parametrize("pair", [(0.7, 0.5), (0.9, 0.9), (0.65, 0.6)])
def test_the_joint_fit_reproduces_a_gemm_measured_at_a_pair(pair: tuple[float, float]) -> None:
    """A GEMM measured at its prediction with a grid pair: the fit's choice predicts it exactly (score 0)."""
    rows = _rows(*pair)
    choice = lodo.fit_defaults(rows, _shipped(), GRIDS)
    model, _ = lodo._split(choice)
    assert lodo._predict(rows[:1], lodo.with_model(_shipped(), model))[0] == pytest.approx(rows[0].measured_s, rel=1e-9)
