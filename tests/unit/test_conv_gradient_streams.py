"""A convolution backward's own shares: its gradient kernels' library share of matrix peak
(``conv_backward_matrix_efficiency``) and the weight gradient's sustained DRAM share (``conv_wgrad_dram_efficiency``),
which with the data gradient's stream bounds a backward from below (docs/model.md section 5). Both are shipped unset
(the code path off: docs/accuracy.md, convbwd16); unset, a backward is predicted as before."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import perfmodel
from perfmodel.efficiency import IDEAL, defaults_for
from perfmodel.specs import load_hardware

T4 = "nvidia-t4"
V100 = "nvidia-v100-sxm2-32gb"
# DeepBench's 1x1 64 -> 64 on 8 x 112^2 (ResNet's first bottleneck), fp16 NHWC as conv_bench.cu runs it on a T4
THIN: dict[str, Any] = {"kind": "conv2d", "batch": 8, "in_channels": 64, "out_channels": 64, "height": 112,
                        "width": 112, "kernel_h": 1, "kernel_w": 1, "dtype": "fp16", "layout": "nhwc"}
# a compute-bound 3x3: V100 fp16 NHWC 256 -> 256 on 64 maps of 56 x 56
DEEP: dict[str, Any] = {"kind": "conv2d", "batch": 64, "in_channels": 256, "out_channels": 256, "height": 56,
                        "width": 56, "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp16", "layout": "nhwc"}


def test_backward_lasts_at_least_its_two_gradient_streams() -> None:
    """T4, THIN backward: the data gradient streams dy, W in and dx out (12,845,056 + 8,192 + 12,845,056 B) at
    ``dram_efficiency``, the weight gradient x, dy in and dW out (12,845,056 x 2 + 8,192 B) at the weight gradient's
    0.25 of the 320 GB/s (shipped since conv19): 92.3 + 321.2 = 413.5 us, which is the body (kernel time less its two
    launch floors); without the share (None) the backward is the fused GEMM model's 145.7 us."""
    shipped = defaults_for(load_hardware(T4))
    assert shipped.conv_wgrad_dram_efficiency == 0.25 and shipped.conv_backward_matrix_efficiency is None
    op = {**THIN, "pass": "backward"}
    cost = perfmodel.predict(T4, op, defaults=shipped)
    image = 8 * 64 * 112 * 112 * 2.0
    weights = 64 * 64 * 2.0
    floor = (2 * image + weights) / (320e9 * shipped.dram_efficiency) + (2 * image + weights) / (320e9 * 0.25)
    assert floor == pytest.approx(413.5e-6, abs=0.1e-6)
    assert cost.time_s - cost.overhead_s == pytest.approx(floor, rel=1e-12)
    off = perfmodel.predict(T4, op, defaults=dataclasses.replace(shipped, conv_wgrad_dram_efficiency=None))
    assert off.time_s == pytest.approx(145.7e-6, abs=0.1e-6)


def test_forward_ignores_the_backward_shares() -> None:
    """Neither backward share moves a forward convolution, to the bit."""
    shipped = defaults_for(load_hardware(V100))
    other = dataclasses.replace(shipped, conv_backward_matrix_efficiency=0.45, conv_wgrad_dram_efficiency=0.2)
    assert perfmodel.predict(V100, {**THIN, "pass": "backward"}, defaults=other).time_s != perfmodel.predict(
        V100, {**THIN, "pass": "backward"}, defaults=shipped).time_s
    for conv in (THIN, DEEP):
        assert perfmodel.predict(V100, conv, defaults=other).time_s == perfmodel.predict(
            V100, conv, defaults=shipped).time_s


def test_gradient_kernels_run_at_their_own_library_share() -> None:
    """DEEP backward under ``IDEAL`` with the forward's share at 0.5: the gradient share None falls back to it (the
    same time to the bit as 0.5 given); 0.5 for the gradients with the forward's at 1 is that time too (only the
    gradients' share counts in a backward); and a forward_backward at gradient share 1 is faster than at 0.5."""
    half = dataclasses.replace(IDEAL, conv_matrix_efficiency=0.5)
    op = {**DEEP, "pass": "backward"}
    unset = perfmodel.predict(V100, op, defaults=half).time_s
    assert perfmodel.predict(V100, op, defaults=dataclasses.replace(
        half, conv_backward_matrix_efficiency=0.5)).time_s == unset
    own = dataclasses.replace(IDEAL, conv_matrix_efficiency=1.0, conv_backward_matrix_efficiency=0.5)
    assert perfmodel.predict(V100, op, defaults=own).time_s == pytest.approx(unset, rel=1e-12)
    both = {**DEEP, "pass": "forward_backward"}
    fast = dataclasses.replace(half, conv_backward_matrix_efficiency=1.0)
    assert perfmodel.predict(V100, both, defaults=fast).time_s < perfmodel.predict(V100, both, defaults=half).time_s
