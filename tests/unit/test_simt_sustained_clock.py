"""A SIMT GEMM's sustained clock (docs/model.md section 2, conv20): with ``machine.SIMT_SUSTAINED_CLOCK`` on, dense
matrix work that falls back to the vector engine runs at that engine's measured clock under GEMM load (the T4's Citadel
Fig. 4.5 clock, 1,155 MHz, measured on repeated fp32 sgemm); streaming vector work and the other devices keep their
peaks. Shipped on in the fourteenth pass's merge (one vendor out conv2d 0.5 points worse, five other cells better:
docs/accuracy.md, conv20 and the merged figures); off, the T4's CUDA cores run at their boost peak, as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from machine_switch import set_switch, switched

import perfmodel
import perfmodel.machine as machine
from perfmodel.dtypes import DType
from perfmodel.hardware import Hardware
from perfmodel.ops.base import DTYPE_INDEX
from perfmodel.specs import load_hardware

GEMM = {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "fp32"}  # compute-bound on the CUDA cores
CONV = {"kind": "conv2d", "batch": 16, "in_channels": 256, "out_channels": 256, "height": 28, "width": 28,
        "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp32"}
STREAM = {"kind": "elementwise", "shape": [1 << 26], "dtype": "fp32"}


def _switch(on: bool) -> None:
    set_switch("SIMT_SUSTAINED_CLOCK", on)


@pytest.fixture
def switched_on() -> Iterator[None]:
    """The model with ``SIMT_SUSTAINED_CLOCK`` on (tables and memos rebuilt both ways; shipped on)."""
    with switched("SIMT_SUSTAINED_CLOCK", True):
        yield


def _times(hw: str, *ops: dict[str, object]) -> list[float]:
    return [float(perfmodel.predict(hw, op).time_s) for op in ops]


def test_t4_cuda_cores_carry_the_sgemm_clock_with_its_source() -> None:
    engine = next(e for e in load_hardware("nvidia-t4").engines if e.name == "cuda_core")
    assert engine.sustained_clock_hz == {DType.FP32: pytest.approx(1.155e9)}
    assert "Fig" in engine.sources["sustained_clock_hz"] and "sgemm" in engine.sources["sustained_clock_hz"]


@pytest.fixture
def switched_off() -> Iterator[None]:
    """The model with ``SIMT_SUSTAINED_CLOCK`` off (as before the fourteenth pass)."""
    with switched("SIMT_SUSTAINED_CLOCK", False):
        yield


def test_shipped_on() -> None:
    assert machine.SIMT_SUSTAINED_CLOCK is True


def test_off_the_t4_cuda_cores_keep_their_boost_peak(switched_off: None) -> None:
    t4 = machine.tables(load_hardware("nvidia-t4"))
    assert t4.matrix_paths[DTYPE_INDEX[DType.FP32]].peak_flops_per_s == pytest.approx(8.1e12)


def test_t4_simt_matrix_peak_is_the_sustained_share_and_streams_keep_the_boost(switched_on: None) -> None:
    t4 = machine.tables(load_hardware("nvidia-t4"))
    assert t4.matrix_paths[DTYPE_INDEX[DType.FP32]].peak_flops_per_s == pytest.approx(8.1e12 * 1.155 / 1.59)
    assert t4.vector_paths[DTYPE_INDEX[DType.FP32]].peak_flops_per_s == pytest.approx(8.1e12)


def test_switch_on_is_the_clock_ratio_slower_on_simt_matrix_work_only(switched_on: None) -> None:
    _switch(False)
    off_gemm, off_conv, off_stream = _times("nvidia-t4", GEMM, CONV, STREAM)
    v100_off = _times("nvidia-v100-sxm2-32gb", GEMM, CONV)
    _switch(True)
    on_gemm, on_conv, on_stream = _times("nvidia-t4", GEMM, CONV, STREAM)
    assert on_gemm / off_gemm == pytest.approx(1.59 / 1.155, rel=0.03)  # compute-bound: the clock ratio
    assert 1.2 < on_conv / off_conv <= 1.59 / 1.155 + 1e-9  # a convolution's matrix work on the CUDA cores
    assert on_stream == pytest.approx(off_stream, rel=1e-12)  # streaming vector work: unchanged
    assert _times("nvidia-v100-sxm2-32gb", GEMM, CONV) == pytest.approx(v100_off, rel=1e-12)  # holds its clock


def test_tensor_core_work_is_untouched_by_the_switch(switched_on: None) -> None:
    half = {**GEMM, "dtype": "fp16"}
    _switch(False)
    off = _times("nvidia-t4", half)
    _switch(True)
    assert _times("nvidia-t4", half) == pytest.approx(off, rel=1e-12)


def test_a_spec_without_the_clock_keeps_its_simt_peak(switched_on: None) -> None:
    data = load_hardware("nvidia-t4").model_dump(mode="json")
    data["id"] = "nvidia-t4-cuda-cores-at-boost"
    next(e for e in data["engines"] if e["name"] == "cuda_core")["sustained_clock_hz"] = None
    boost = Hardware.model_validate(data)
    ratio = perfmodel.predict("nvidia-t4", GEMM).time_s / perfmodel.predict(boost, GEMM).time_s
    assert ratio == pytest.approx(1.59 / 1.155, rel=0.03)
