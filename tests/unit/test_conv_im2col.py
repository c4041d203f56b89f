"""MIOpen's per-image GEMM convolution (``algorithm='im2col_gemm'``): GEMM shape, serial count, im2col bytes."""

from __future__ import annotations

from typing import Any

import pytest

import perfmodel
from perfmodel import OpError, make_op
from perfmodel.ops.conv import Conv2d

CONV: dict[str, Any] = {"kind": "conv2d", "batch": 16, "in_channels": 512, "out_channels": 2048, "height": 7,
                        "width": 7, "kernel_h": 1, "kernel_w": 1, "dtype": "fp32"}


def _work(op: dict[str, Any]) -> Any:
    built = make_op(op)
    assert isinstance(built, Conv2d)
    return Conv2d.work([built])


def test_forward_is_one_gemm_per_image_issued_batch_times() -> None:
    work = _work({**CONV, "algorithm": "im2col_gemm"})
    assert work.gemm_m[0, 0] == 7 * 7  # one image's P·Q rows, not N·P·Q
    assert (work.gemm_n[0, 0], work.gemm_k[0, 0]) == (2048, 512)
    assert work.gemm_serial[0, 0] == 16
    implicit = _work(CONV)
    assert implicit.gemm_m[0, 0] == 16 * 7 * 7 and implicit.gemm_serial[0, 0] == 0


def test_only_an_unfolded_filter_moves_columns() -> None:
    assert _work({**CONV, "algorithm": "im2col_gemm"}).serial_bytes[0] == 0.0  # 1x1 stride 1: x as it is
    three = {**CONV, "kernel_h": 3, "kernel_w": 3, "padding": 1, "algorithm": "im2col_gemm"}
    # the column matrix C·R·S x P·Q per image, written by im2col and read by the GEMM
    assert _work(three).serial_bytes[0] == pytest.approx(2 * 16 * 512 * 9 * 49 * 4)


def test_serial_small_gemms_cost_more_than_one_batched_gemm() -> None:
    """16 back-to-back 49-row GEMMs each fill a wave alone and pay a launch: slower than one 784-row GEMM."""
    per_image = perfmodel.predict("amd-mi25", {**CONV, "algorithm": "im2col_gemm"})
    one = perfmodel.predict("amd-mi25", {**CONV, "batch": 1, "algorithm": "im2col_gemm"})
    assert per_image.time_s > 10 * (one.time_s - one.overhead_s)
    assert per_image.overhead_s == pytest.approx(16 * one.overhead_s)


def test_depthwise_cannot_run_it() -> None:
    with pytest.raises(OpError):
        make_op({**CONV, "in_channels": 64, "out_channels": 64, "groups": 64, "kernel_h": 3, "kernel_w": 3,
                 "algorithm": "im2col_gemm"})
