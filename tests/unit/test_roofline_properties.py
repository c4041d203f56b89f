"""Properties every prediction must have, for any op on any device (Hypothesis)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel.machine import tables
from perfmodel.ops import make_op
from perfmodel.ops.base import DTYPES

DEVICES = ["nvidia-a100-sxm4-80gb", "nvidia-h100-sxm5-80gb", "nvidia-t4", "amd-mi300x", "google-tpu-v5p",
           "aws-trainium2", "intel-gaudi3", "generic-npu", "intel-xeon-platinum-8480", "amd-mi25"]
DIMS = st.sampled_from([1, 3, 16, 17, 64, 100, 128, 255, 512, 1024, 4096, 12288])
FLOAT_DTYPES = st.sampled_from(["fp32", "fp16", "bf16", "fp8_e4m3", "tf32"])


@st.composite
def ops(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["matmul", "conv2d", "attention", "rmsnorm", "softmax", "elementwise",
                                 "embedding", "quantize", "allreduce", "transpose", "layernorm"]))
    dtype = draw(FLOAT_DTYPES)
    if kind == "matmul":
        return {"kind": kind, "m": draw(DIMS), "n": draw(DIMS), "k": draw(DIMS), "dtype": dtype,
                "batch": draw(st.sampled_from([1, 2, 8])),
                "pass": draw(st.sampled_from(["forward", "backward", "forward_backward"]))}
    if kind == "conv2d":
        return {"kind": kind, "batch": draw(st.sampled_from([1, 8])), "in_channels": draw(st.sampled_from([3, 64])),
                "out_channels": draw(st.sampled_from([32, 128])), "height": 28, "width": 28,
                "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": dtype}
    if kind == "attention":
        return {"kind": kind, "batch": draw(st.sampled_from([1, 4])), "heads": 8, "kv_heads": 2,
                "seq_q": draw(DIMS), "seq_kv": draw(DIMS), "head_dim": 64, "dtype": dtype,
                "causal": draw(st.booleans())}
    if kind == "embedding":
        return {"kind": kind, "num_embeddings": 32000, "embedding_dim": draw(DIMS), "num_indices": draw(DIMS),
                "dtype": dtype}
    if kind == "quantize":
        return {"kind": kind, "shape": [draw(DIMS), 128], "from_dtype": "bf16", "to_dtype": "int8",
                "granularity": draw(st.sampled_from(["tensor", "channel", "group"]))}
    if kind == "allreduce":
        return {"kind": kind, "bytes": float(draw(DIMS)) * 1024, "devices": draw(st.sampled_from([2, 8, 16, 64]))}
    if kind == "transpose":
        return {"kind": kind, "shape": [draw(DIMS), draw(DIMS)], "perm": [1, 0], "dtype": dtype}
    if kind == "elementwise":
        return {"kind": kind, "shape": [draw(DIMS), draw(DIMS)], "inputs": draw(st.sampled_from([1, 2, 3])),
                "dtype": dtype, "transcendentals_per_element": draw(st.sampled_from([0, 1]))}
    return {"kind": kind, "shape": [draw(DIMS), draw(DIMS)], "dtype": dtype}


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(op=ops(), device=st.sampled_from(DEVICES))
def test_time_is_at_least_every_roof(op: dict[str, Any], device: str) -> None:
    """No prediction beats a roof: work / peak of its path, compulsory bytes / DRAM bandwidth."""
    hw = perfmodel.load_hardware(device)
    t = tables(hw)
    built = make_op(op)
    cost = perfmodel.predict(hw, built)
    work = type(built).work([built], float(hw.dram.access_granularity_bytes or 1))
    matrix_peak = t.matrix_peak[work.matrix_dtype[0]]
    vector_peak = t.vector_peak[work.vector_dtype[0]]
    slack = 1 + 1e-9
    assert cost.time_s * slack >= work.flops_matrix[0] / matrix_peak
    assert cost.time_s * slack >= work.flops_vector[0] / vector_peak
    if op["kind"] != "allreduce":
        assert cost.time_s * slack >= work.dram_bytes[0] / t.bandwidth_bytes_per_s(t.dram)
    assert cost.time_s >= cost.overhead_s
    assert np.isfinite(cost.time_s)
    assert cost.time_s > 0 or op["kind"] == "reshape"


FASTER = [
    {"levels.dram.bandwidth_bytes_per_s": "x1.5"},
    {"engines.*.peak_flops_per_s": "x1.5"},
    {"clock_hz": "x1.2"},
    {"levels.onchip.bandwidth_bytes_per_s": "x2"},
    {"levels.sram.capacity_bytes": "x2"},
]


@SETTINGS
@given(op=ops(), device=st.sampled_from(DEVICES), change=st.sampled_from(FASTER))
def test_more_bandwidth_or_peak_is_never_slower(op: dict[str, Any], device: str, change: dict[str, str]) -> None:
    base = perfmodel.load_hardware(device)
    if "clock_hz" in change and base.clock_hz is None:
        return
    if any(lv.bandwidth_bytes_per_s is None for lv in base.levels[1:]) and "onchip" in next(iter(change)):
        change = {"levels.dram.bandwidth_bytes_per_s": "x1.0"}
    try:
        faster = perfmodel.derive_variant(base, f"{device}-faster", change)
    except perfmodel.SpecError as exc:  # the spec leaves that number null: nothing to scale
        assert "cannot scale" in exc.reason
        return
    before = perfmodel.predict(base, op).time_s
    after = perfmodel.predict(faster, op).time_s
    assert after <= before * (1 + 1e-9), (change, before, after)


@SETTINGS
@given(batch=st.lists(ops(), min_size=1, max_size=12), device=st.sampled_from(DEVICES))
def test_predict_many_equals_predict(batch: list[dict[str, Any]], device: str) -> None:
    """Batched and single predictions are the same numbers, in the same order (same space)."""
    many = perfmodel.predict_many(device, batch, space="full")
    for i, op in enumerate(batch):
        single = perfmodel.predict(device, op)
        assert many[i].time_s == pytest.approx(single.time_s, rel=1e-12)
        assert many[i].bound == single.bound
        assert many[i].op_kind == op["kind"]


@pytest.mark.parametrize("device", DEVICES)
def test_every_dtype_has_a_path(device: str) -> None:
    """Every dtype runs somewhere with a positive peak (fallbacks say so in the notes)."""
    t = tables(perfmodel.load_hardware(device))
    assert all(p.peak_flops_per_s > 0 for p in t.matrix_paths)
    assert all(p.peak_flops_per_s > 0 for p in t.vector_paths)
    assert len(t.matrix_paths) == len(DTYPES)


def test_time_grows_with_work() -> None:
    """Doubling every dimension of a large GEMM costs 7-9x the time (8x the FLOPs)."""
    small = perfmodel.predict("nvidia-h100-sxm5-80gb", {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096,
                                                         "dtype": "bf16"})
    large = perfmodel.predict("nvidia-h100-sxm5-80gb", {"kind": "matmul", "m": 8192, "n": 8192, "k": 8192,
                                                         "dtype": "bf16"})
    assert 7.0 < large.time_s / small.time_s < 9.0
