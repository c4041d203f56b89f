"""MIOpen's direct forward solvers (``algorithm='direct'``): the implicit GEMM's work, at the direct kernels' own
sustained share of matrix peak (``conv_direct_matrix_efficiency``, docs/model.md section 5), shipped unset (the
library's ``conv_matrix_efficiency``); ``benchmarks/lodo.py`` chooses it on the training devices' direct rows only
and leaves it unset in a fold without any (docs/accuracy.md, thirteenth pass, conv17)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import numpy as np
import pytest
from benchmark_module import load_benchmark

import perfmodel
from perfmodel.efficiency import defaults_for
from perfmodel.ops.columns import from_dicts
from perfmodel.ops.conv import Conv2d
from perfmodel.specs import load_hardware

lodo = load_benchmark("lodo", "lodo_benchmark")
data = sys.modules["measured_data"]

MI25 = "amd-mi25"
# a compute-bound 3x3 forward MIOpen 1.3 ran with its direct solver on the MI25 (DeepBench-like, fp32 NCHW)
DEEP: dict[str, Any] = {"kind": "conv2d", "batch": 16, "in_channels": 256, "out_channels": 256, "height": 28,
                        "width": 28, "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp32"}
# a streaming 1x1 forward
THIN: dict[str, Any] = {"kind": "conv2d", "batch": 8, "in_channels": 64, "out_channels": 64, "height": 112,
                        "width": 112, "kernel_h": 1, "kernel_w": 1, "dtype": "fp32"}


LIBRARY_SHARE = defaults_for(load_hardware(MI25)).conv_matrix_efficiency  # 0.65 shipped (fourteenth pass)


def _time(op: dict[str, Any], **values: float) -> float:
    d = dataclasses.replace(defaults_for(load_hardware(MI25)), **values)
    return perfmodel.predict(MI25, op, timing="kernel", defaults=d).time_s


@pytest.mark.parametrize("op", [DEEP, THIN, {**DEEP, "pass": "forward_backward"}, {**THIN, "stride": 2}])
def test_unset_a_direct_forward_is_the_implicit_gemm_to_the_bit(op: dict[str, Any]) -> None:
    assert defaults_for(load_hardware(MI25)).conv_direct_matrix_efficiency is None
    assert _time({**op, "algorithm": "direct"}) == _time(op)


def test_at_the_librarys_share_a_direct_forward_is_the_implicit_gemm_to_the_bit() -> None:
    assert LIBRARY_SHARE == 0.65
    assert _time({**DEEP, "algorithm": "direct"}, conv_direct_matrix_efficiency=LIBRARY_SHARE) == _time(DEEP)


def test_a_compute_bound_direct_forward_runs_at_its_own_share() -> None:
    """DEEP: 2 x 16 x 256 x 28^2 x 256 x 9 = 14.8 GFLOP; on the MI25's VALU (12.3 TFLOP/s) at the library's 0.65 of
    it the body is 1.85 ms, at 0.3 0.65 / 0.3 times that; the implicit GEMM and a gradient ignore the direct share."""
    half = _time({**DEEP, "algorithm": "direct"}, conv_direct_matrix_efficiency=0.3)
    full = _time({**DEEP, "algorithm": "direct"})
    assert half / full == pytest.approx(0.65 / 0.3, rel=0.02)
    assert full == pytest.approx(1.85e-3, rel=0.1)
    assert _time(DEEP, conv_direct_matrix_efficiency=0.3) == _time(DEEP)
    backward = {**DEEP, "pass": "backward", "algorithm": "direct"}
    assert _time(backward, conv_direct_matrix_efficiency=0.3) == _time(backward)


def test_a_direct_forward_backward_runs_its_gradients_at_the_librarys_share() -> None:
    """Forward at 0.3, gradients (2/3 of the GEMM FLOPs) at the library's 0.65: slower than the library's share
    and faster than 0.3 throughout."""
    op = {**DEEP, "pass": "forward_backward", "algorithm": "direct"}
    mixed = _time(op, conv_direct_matrix_efficiency=0.3)
    assert _time(op) < mixed < _time(op, conv_matrix_efficiency=0.3)


def test_columns_and_ops_give_the_same_work() -> None:
    ops = [{**DEEP, "algorithm": "direct"}, DEEP, {**THIN, "algorithm": "direct"}]
    cols = Conv2d.work(from_dicts(Conv2d, ops))
    each = Conv2d.work([op for op in map(perfmodel.make_op, ops) if isinstance(op, Conv2d)])
    assert cols.conv_direct.tolist() == each.conv_direct.tolist() == [1.0, 0.0, 1.0]
    assert np.array_equal(cols.flops_matrix, each.flops_matrix)


def _rows(share: float) -> list[Any]:
    """MI25 direct forwards measured as the model predicts them at ``share``, and implicit GEMMs at the library's."""
    d = defaults_for(load_hardware(MI25))
    direct = [{**DEEP, "algorithm": "direct"}, {**DEEP, "batch": 32, "algorithm": "direct"}]
    implicit = [DEEP, {**DEEP, "batch": 32}]
    out = []
    for op in direct:
        t = perfmodel.predict(MI25, op, timing="kernel",
                              defaults=dataclasses.replace(d, conv_direct_matrix_efficiency=share)).time_s
        out.append(data.Row("deepbench", MI25, op, t, "kernel", "-", "conv2d"))
    for op in implicit:
        t = perfmodel.predict(MI25, op, timing="kernel", defaults=d).time_s
        out.append(data.Row("deepbench", MI25, op, t, "kernel", "-", "conv2d"))
    return out


def test_the_fit_chooses_the_direct_share_on_direct_rows_and_leaves_the_librarys_to_the_others() -> None:
    shipped = {MI25: defaults_for(load_hardware(MI25))}
    grids = {**lodo.DIRECT_GRIDS, "conv_matrix_efficiency": lodo.GRIDS["conv_matrix_efficiency"]}
    choice = lodo.fit_defaults(_rows(0.35), shipped, grids)
    assert choice["conv_direct_matrix_efficiency"] == 0.35 and choice["conv_matrix_efficiency"] == LIBRARY_SHARE
    # no direct row among the training rows: unset, the library's share
    implicit = [r for r in _rows(0.35) if r.op.get("algorithm") != "direct"]
    assert "conv_direct_matrix_efficiency" not in lodo.fit_defaults(implicit, shipped, grids)


@pytest.mark.parametrize("on", [True, False])
def test_deepbench_maps_miopens_direct_forwards_when_switched_on(on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """MIOpen 1.3 reported ConvolutionFwdAlgoDirect for 36 MI25 forwards; their backwards keep the implicit GEMM. Off
    (shipped: the LODO data as on ``main``) none is direct."""
    monkeypatch.setattr(data, "MIOPEN_DIRECT_SOLVER", on)
    direct = [r for r in data.deepbench() if r.op.get("algorithm") == "direct"]
    assert len(direct) == (36 if on else 0)
    assert all(r.label == "conv2d" and r.hardware == MI25 for r in direct)
