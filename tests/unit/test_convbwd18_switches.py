"""convbwd18's two conv2d_bwd switches (docs/accuracy.md, fifteenth pass): a fused Winograd backward's weight gradient
as cuDNN's non-fused Winograd one (``conv.FUSED_WGRAD_NONFUSED``, off), and a cuDNN FFT forward's backward run as the
same FFT in DeepBench's rows (``measured_data.FFT_BACKWARD``, on)."""

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
WINOGRAD = {
    "kind": "conv2d",
    "batch": 16,
    "in_channels": 256,
    "out_channels": 256,
    "height": 28,
    "width": 28,
    "kernel_h": 3,
    "kernel_w": 3,
    "padding": 1,
    "dtype": "fp32",
    "algorithm": "winograd",
    "pass": "backward",
}


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


def test_shipped_values() -> None:
    assert conv.FUSED_WGRAD_NONFUSED is False
    assert data.FFT_BACKWARD is True


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
    return {
        "fused backward": WINOGRAD,
        "fused forward": {**WINOGRAD, "pass": "forward"},
        "non-fused backward": {**WINOGRAD, "algorithm": "winograd_nonfused"},
        "implicit backward": {**WINOGRAD, "algorithm": "implicit_gemm"},
    }


def test_a_cudnn_fft_forwards_backward_runs_the_fft() -> None:
    def backward_algorithms(vendor: str) -> set[str]:
        def shape(op: dict[str, object]) -> tuple[tuple[str, str], ...]:
            return tuple(sorted((k, str(v)) for k, v in op.items() if k not in ("algorithm", "pass")))

        rows = [r for r in data.deepbench() if r.hardware.startswith(vendor)]
        forwards = {
            (r.hardware, shape(r.op))
            for r in rows
            if r.label == "conv2d" and str(r.op.get("algorithm", "")).startswith("fft")
        }
        return {
            str(r.op.get("algorithm", "implicit_gemm"))
            for r in rows
            if r.label == "conv2d_bwd" and (r.hardware, shape(r.op)) in forwards
        }

    try:
        assert backward_algorithms("nvidia") == {"fft", "fft_tiling"}
        assert backward_algorithms("amd") == {"implicit_gemm"}  # MIOpen's weight gradient has no FFT
        data.FFT_BACKWARD = False
        assert backward_algorithms("nvidia") == {"implicit_gemm"}
    finally:
        data.FFT_BACKWARD = True


def test_v100_fft_tiling_backward_near_deepbench() -> None:
    """DeepBench V100 fp32 5x5 192 -> 32 on 16 x 28 x 28 (FFT_TILING forward): its backward took 386 µs; as the FFT
    it is predicted near that, as an implicit GEMM ~5x over (32 output channels on a 128-row weight-gradient tile)."""
    op = {
        "kind": "conv2d",
        "batch": 16,
        "in_channels": 192,
        "out_channels": 32,
        "height": 28,
        "width": 28,
        "kernel_h": 5,
        "kernel_w": 5,
        "padding": 2,
        "dtype": "fp32",
        "pass": "backward",
    }
    measured_s = 386e-6
    fft = float(perfmodel.predict("nvidia-v100-sxm2-32gb", {**op, "algorithm": "fft_tiling"}).time_s)
    implicit = float(perfmodel.predict("nvidia-v100-sxm2-32gb", op).time_s)
    assert 0.7 < fft / measured_s < 1.3
    assert implicit / measured_s > 3.0
