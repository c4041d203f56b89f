"""ln17: PyTorch's layer norm's Welford update between its loads (``norm.LAYER_NORM_WELFORD_BETWEEN_LOADS``, on as
shipped): its fp32 instructions add to the latency-bound stream, not to a bandwidth-bound one; times by hand."""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel.ops import make_op, norm

A100, A40 = "nvidia-a100-sxm4-80gb", "nvidia-a40"


def _layer_norm(rows: int, **extra: object) -> dict[str, object]:
    # Vidur's phi-2 description (benchmarks/measured_data.TORCH_LAYER_NORM): 4 elements a load, 128-thread row block
    return {"kind": "layernorm", "shape": [rows, 2560], "dtype": "fp16", "vector_width": 4, "threads_per_row": 128,
            **extra}


def _delta_s(monkeypatch: pytest.MonkeyPatch, device: str, op: dict[str, object]) -> float:
    monkeypatch.setattr(norm, "LAYER_NORM_WELFORD_BETWEEN_LOADS", False)
    off_s = float(perfmodel.predict_many(device, [op]).time_s[0])
    monkeypatch.setattr(norm, "LAYER_NORM_WELFORD_BETWEEN_LOADS", True)
    on_s = float(perfmodel.predict_many(device, [op]).time_s[0])
    return on_s - off_s


def test_on_as_shipped_and_the_count_from_the_source() -> None:
    assert norm.LAYER_NORM_WELFORD_BETWEEN_LOADS is True
    # Welford: half->float, delta, count + 1, reciprocal refinement x3, new mean, x - mean, M2 = 9; normalize: three
    # conversions, x - mean, x rstd, x gamma + beta, half of a pack = 6.5
    assert norm.WELFORD_FP32_INSTRUCTIONS_PER_ELEMENT == 15.5


def test_a100_stream_in_flight_bound_pays_the_instructions(monkeypatch: pytest.MonkeyPatch) -> None:
    # 15.5 x 1,024 x 2,560 instructions / (19.5 TFLOP/s / 2 a FMA x vector_efficiency 0.85), every SM busy
    # (1,024 rows >= 108 SMs x 2 blocks): 4.903 us, added whole: the A100's stream is bound by its loads in flight
    expected = 15.5 * 1024 * 2560 / (19.5e12 / 2 * 0.85)
    assert _delta_s(monkeypatch, A100, _layer_norm(1024)) == pytest.approx(expected, rel=1e-9)
    # 8 rows: the instructions of 8 of 216 row blocks' worth of SMs (busy 8 / (108 x 2))
    assert _delta_s(monkeypatch, A100, _layer_norm(8)) == pytest.approx(
        15.5 * 8 * 2560 / (19.5e12 / 2 * 0.85 * 8 / 216), rel=1e-9)


def test_a40_bandwidth_bound_stream_hides_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # the A40's [4,096, 2,560] stream is bound by 696 GB/s with loads in flight to spare: 10.2 us of instructions
    # fit beside it
    assert _delta_s(monkeypatch, A40, _layer_norm(4096)) == 0.0


def test_only_pytorchs_kernel_and_only_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    inductor: dict[str, object] = {"kind": "layernorm", "shape": [4096, 4096], "dtype": "fp16"}  # LLMCompass
    assert _delta_s(monkeypatch, A100, inductor) == 0.0
    monkeypatch.setattr(norm, "LAYER_NORM_WELFORD_BETWEEN_LOADS", True)
    backward = make_op(_layer_norm(1024, pass_="backward"))
    assert isinstance(backward, norm.LayerNorm)
    assert norm.LayerNorm.work([backward]).fp32_instructions_between_loads[0] == 0.0
    rms = make_op({"kind": "rmsnorm", "shape": [1024, 2560], "dtype": "fp16", "threads_per_row": 128})
    assert isinstance(rms, norm.RmsNorm)
    assert norm.RmsNorm.work([rms]).fp32_instructions_between_loads[0] == 0.0
