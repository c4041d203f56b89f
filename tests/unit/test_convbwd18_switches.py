"""convbwd18's two conv2d_bwd switches, both shipped off (docs/accuracy.md, fifteenth pass): a fused Winograd
backward's weight gradient as cuDNN's non-fused Winograd one (``conv.FUSED_WGRAD_NONFUSED``), and an FFT forward's
backward run as the same FFT in DeepBench's rows (``measured_data.FFT_BACKWARD``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from benchmark_module import load_benchmark

import perfmodel
from perfmodel.ops import conv, make_op
from perfmodel.search import call_memo, work_memo

load_benchmark("lodo", "lodo_benchmark")
data = sys.modules["measured_data"]

P100 = "nvidia-p100-sxm2-16gb"
WINOGRAD = {"kind": "conv2d", "batch": 16, "in_channels": 256, "out_channels": 256, "height": 28, "width": 28,
            "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp32", "algorithm": "winograd", "pass": "backward"}


def _set(on: bool) -> None:
    conv.FUSED_WGRAD_NONFUSED = on
    call_memo.clear()
    work_memo.clear()


@pytest.fixture
def restore() -> Iterator[None]:
    shipped = conv.FUSED_WGRAD_NONFUSED
    try:
        yield
    finally:
        _set(shipped)


def _time(op: dict[str, object]) -> float:
    return float(perfmodel.predict(P100, op).time_s)


def test_both_off_as_shipped() -> None:
    assert conv.FUSED_WGRAD_NONFUSED is False
    assert data.FFT_BACKWARD is False


def test_nonfused_weight_gradient_runs_36_gemms_of_4x4_tiles(restore: None) -> None:
    _set(True)
    work = conv.Conv2d.work([make_op(WINOGRAD)])  # type: ignore[list-item]
    tiles = 16 * 7 * 7  # N x ceil(28/4)^2 output tiles of F(4x4, 3x3)
    assert (work.gemm_batch[0, 2], work.gemm_m[0, 2], work.gemm_n[0, 2], work.gemm_k[0, 2]) == (36, 256, 256, tiles)
    assert work.serial_bytes[0] > 0  # its transforms stream through DRAM


def test_only_a_fused_winograd_backward_moves(restore: None) -> None:
    off = {name: _time(op) for name, op in _ops().items()}
    _set(True)
    on = {name: _time(op) for name, op in _ops().items()}
    assert on["fused backward"] < 0.75 * off["fused backward"]  # the implicit-GEMM weight gradient was most of it
    for name in ("fused forward", "non-fused backward", "implicit backward"):
        assert on[name] == off[name]


def _ops() -> dict[str, dict[str, object]]:
    return {"fused backward": WINOGRAD, "fused forward": {**WINOGRAD, "pass": "forward"},
            "non-fused backward": {**WINOGRAD, "algorithm": "winograd_nonfused"},
            "implicit backward": {**WINOGRAD, "algorithm": "implicit_gemm"}}


def test_an_fft_forwards_backward_runs_the_fft_when_switched_on() -> None:
    def backward_algorithms() -> set[str]:
        forwards = {(r.hardware, tuple(sorted((k, str(v)) for k, v in r.op.items() if k != "algorithm")))
                    for r in data.deepbench() if r.label == "conv2d" and str(r.op.get("algorithm", "")).startswith("fft")}
        return {str(r.op.get("algorithm", "implicit_gemm")) for r in data.deepbench() if r.label == "conv2d_bwd" and (
            r.hardware, tuple(sorted((k, str(v)) for k, v in r.op.items() if k not in ("algorithm", "pass")))) in forwards}

    assert backward_algorithms() == {"implicit_gemm"}
    data.FFT_BACKWARD = True
    try:
        assert backward_algorithms() == {"fft", "fft_tiling"}
    finally:
        data.FFT_BACKWARD = False
