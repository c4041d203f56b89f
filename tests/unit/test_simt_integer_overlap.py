"""A convolution library's SIMT implicit GEMM where the engine issues integer work beside its FMAs (docs/model.md
section 5, conv20): ``ComputeEngine.concurrent_integer_issue`` (Volta, Turing: separate INT32 pipe), switched by
``machine.SIMT_INTEGER_OVERLAP``; such a convolution runs at the GEMM's share (``matrix_efficiency``) instead of the
library's (``conv_matrix_efficiency``); tensor-core convolutions, GEMMs and parts without the pipe are unchanged."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from machine_switch import set_switch, switched

import perfmodel
from perfmodel.efficiency import defaults_for
from perfmodel.specs import load_hardware

CONV = {"kind": "conv2d", "batch": 32, "in_channels": 256, "out_channels": 256, "height": 28, "width": 28,
        "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp32"}  # compute-bound on the CUDA cores
GEMM = {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "fp32"}


def _switch(on: bool) -> None:
    set_switch("SIMT_INTEGER_OVERLAP", on)


@pytest.fixture
def restore() -> Iterator[None]:
    with switched("SIMT_INTEGER_OVERLAP"):
        yield


def _both(hw: str, op: dict[str, object]) -> tuple[float, float]:
    """(off, on) predicted seconds."""
    _switch(False)
    off = float(perfmodel.predict(hw, op).time_s)
    _switch(True)
    return off, float(perfmodel.predict(hw, op).time_s)


def test_volta_and_turing_cuda_cores_issue_integer_work_beside_their_fmas() -> None:
    for hw in ("nvidia-v100-sxm2-32gb", "nvidia-t4"):
        engine = next(e for e in load_hardware(hw).engines if e.name == "cuda_core")
        assert engine.concurrent_integer_issue is True and "INT32" in engine.sources["concurrent_integer_issue"]
    for hw in ("nvidia-p100-sxm2-16gb", "amd-mi25"):
        assert not any(e.concurrent_integer_issue for e in load_hardware(hw).engines)


def test_a_simt_convolution_runs_at_the_gemm_share_there(restore: None) -> None:
    d = defaults_for(load_hardware("nvidia-v100-sxm2-32gb"))
    assert d.conv_matrix_efficiency is not None
    off, on = _both("nvidia-v100-sxm2-32gb", CONV)
    assert off / on == pytest.approx(d.matrix_efficiency / d.conv_matrix_efficiency, rel=0.02)


@pytest.mark.parametrize(("hw", "op"), [
    ("nvidia-p100-sxm2-16gb", CONV),  # Pascal: integer work in the FP32 issue slots
    ("amd-mi25", CONV),  # GCN: the VALU does both
    ("nvidia-v100-sxm2-32gb", {**CONV, "dtype": "fp16"}),  # tensor cores: the library's share
    ("nvidia-v100-sxm2-32gb", GEMM),  # a BLAS GEMM: its share already
])
def test_everything_else_is_unchanged(restore: None, hw: str, op: dict[str, object]) -> None:
    off, on = _both(hw, op)
    assert on == pytest.approx(off, rel=1e-12)
