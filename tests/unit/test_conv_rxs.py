"""MIOpen's binary RxS Winograd (``algorithm='winograd_rxs'``): the padded 3x3 blocks, the GEMMs, where it applies."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from benchmark_module import load_benchmark

import perfmodel
from perfmodel import OpError, make_op
from perfmodel.ops.columns import from_dicts
from perfmodel.ops.conv import Conv2d
from perfmodel.ops.conv_rxs import rxs_blocks

CONV: dict[str, Any] = {"kind": "conv2d", "batch": 16, "in_channels": 32, "out_channels": 32, "height": 48,
                        "width": 80, "kernel_h": 5, "kernel_w": 5, "padding": 2, "dtype": "fp32"}


@pytest.mark.parametrize(("r", "s", "stride", "blocks"), [
    (3, 3, 1, 1),  # F(2x2, 3x3) itself
    (1, 1, 1, 1),  # S <= 3 pads to 3, R to 3
    (5, 5, 1, 4),  # 6 x 6
    (5, 5, 2, 4),  # stride 2: S to 6, R (5 % 6 != 1) to 6
    (5, 10, 2, 8),  # DeepSpeech's second layer: 6 x 12
    (7, 7, 2, 12),  # R % 6 == 1: R to 9, S to 12
    (3, 3, 2, 4),  # stride 2 pads a 3x3 to 6 x 6
    (7, 7, 1, 12),  # stride 1: S > 3 pads to 12, R to 9
])
def test_blocks_are_the_padded_filter_over_nine(r: int, s: int, stride: int, blocks: int) -> None:
    assert rxs_blocks(np.array([r]), np.array([s]), np.array([stride]))[0] == blocks


@pytest.mark.parametrize("hardware", ["amd-mi25", "nvidia-v100-sxm2-32gb", "nvidia-a100-sxm4-80gb"])
@pytest.mark.parametrize("pass_", ["forward", "backward"])
def test_a_3x3_stride_1_filter_is_one_block_the_fused_winograd(hardware: str, pass_: str) -> None:
    op = {**CONV, "kernel_h": 3, "kernel_w": 3, "padding": 1, "pass": pass_}
    rxs = perfmodel.predict(hardware, {**op, "algorithm": "winograd_rxs"}, timing="kernel")
    fused = perfmodel.predict(hardware, {**op, "algorithm": "winograd"}, timing="kernel")
    assert rxs.time_s == fused.time_s and rxs.flops == fused.flops


def test_a_5x10_stride_2_forward_runs_eight_blocks_of_sixteen_gemms() -> None:
    """16 x 32 -> 32 channels, 5x10 stride 2 on 48 x 80 (P x Q = 22 x 36): 8 blocks of F(2x2, 3x3), each 16 GEMMs
    of N·⌈P/2⌉·⌈Q/2⌉ = 16·11·18 tiles x K x C: 2 x 16 x 8 x 3168 x 32 x 32 FLOPs, 32 multiplies per output
    against the direct 50."""
    op = {**CONV, "kernel_w": 10, "stride": 2, "padding": 0, "algorithm": "winograd_rxs"}
    built = make_op(op)
    assert isinstance(built, Conv2d) and (built.out_h, built.out_w) == (22, 36)
    work = Conv2d.work([built])
    assert work.flops_matrix[0] == 2 * 16 * 8 * (16 * 11 * 18) * 32 * 32
    assert (work.gemm_batch[0, 0], work.gemm_m[0, 0], work.gemm_n[0, 0], work.gemm_k[0, 0]) == (128, 3168, 32, 32)
    implicit = make_op({**op, "algorithm": "implicit_gemm"})
    assert isinstance(implicit, Conv2d)
    direct = Conv2d.work([implicit])
    assert work.flops_matrix[0] < 0.7 * direct.flops_matrix[0]


def test_columns_and_ops_give_the_same_work() -> None:
    ops = [{**CONV, "algorithm": "winograd_rxs"}, {**CONV, "kernel_w": 10, "stride": 2, "padding": 0,
                                                    "algorithm": "winograd_rxs"}, CONV]
    built = [op for op in map(make_op, ops) if isinstance(op, Conv2d)]
    by_ops = Conv2d.work(built)
    by_columns = Conv2d.work(from_dicts(Conv2d, ops))
    for name in ("flops_matrix", "flops_vector", "gemm_batch", "gemm_m", "gemm_n", "gemm_k"):
        assert np.array_equal(getattr(by_ops, name), getattr(by_columns, name)), name


@pytest.mark.parametrize("bad", [
    {"stride": 3}, {"stride": 2, "stride_w": 1}, {"dilation": 2}, {"groups": 2},
    {"kernel_h": 3, "kernel_w": 3, "padding": 1, "in_channels": 9},  # stride 1, S <= 3: C even
    {"in_channels": 4},  # 4 blocks x 4 channels < 18
])
def test_where_the_solver_does_not_apply_it_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(OpError, match="winograd_rxs"):
        make_op({**CONV, "algorithm": "winograd_rxs", **bad})


@pytest.mark.parametrize("on", [False, True])
def test_deepbench_maps_miopens_other_winograd_forwards_to_it_when_switched_on(on: bool,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """MIOpen 1.3 reported Winograd for 9 MI25 forwards that are not 3x3 stride 1 (5x5, 5x10 stride 2): switched on
    (``MIOPEN_RXS_WINOGRAD``) they run the RxS solver, 0.7-1.1x their measured
    time (as an implicit GEMM: a median of 1.42x),
    their backwards keep the implicit GEMM, and cuDNN's Winograd names are untouched; off (shipped, the LODO
    data as before) none does."""
    md = load_benchmark("measured_data", "measured_data")
    monkeypatch.setattr(md, "MIOPEN_RXS_WINOGRAD", on)
    rows = list(md.deepbench())
    rxs = [r for r in rows if r.op.get("algorithm") == "winograd_rxs"]
    assert len(rxs) == (9 if on else 0)
    if not on:
        return
    assert all(r.label == "conv2d" and r.hardware == "amd-mi25" for r in rxs)
    assert {(r.op["kernel_h"], r.op["kernel_w"], r.op["stride"]) for r in rxs} == {(5, 5, 1), (5, 5, 2), (5, 10, 2)}
    ratio = np.array([perfmodel.predict("amd-mi25", r.op, timing="kernel").time_s / r.measured_s for r in rxs])
    implicit = np.array([perfmodel.predict("amd-mi25", {**r.op, "algorithm": "implicit_gemm"}, timing="kernel").time_s
                         / r.measured_s for r in rxs])
    assert 0.7 < np.median(ratio) < 1.1 and np.median(implicit) > 1.3
