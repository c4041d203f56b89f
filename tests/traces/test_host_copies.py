"""Host copies: pinned ones run at the host link, pageable ones at the host's staging copy into the driver's
pinned buffer (the slower of the two); real AlexNet pageable input copies (Kineto, A100) against the model."""

from __future__ import annotations

import pytest
from trace_builders import DATA

from perfmodel.collectives import PAGEABLE_STAGING_BYTES_PER_S, host_link_bytes_per_s
from perfmodel.roofline import predict
from perfmodel.specs import load_hardware
from perfmodel.traces import match_runs, parse_trace

ALEXNET = DATA / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
SIZE_BYTES = 64 * 2**20


def _copy_s(hardware: str, pageable: bool) -> float:
    op = {"kind": "hostcopy", "bytes": SIZE_BYTES, "direction": "h2d", "pageable": pageable}
    return predict(hardware, op).time_s


def test_a_pageable_copy_runs_at_the_staging_rate_where_it_is_below_the_link() -> None:
    hw = load_hardware("nvidia-a100-sxm4-40gb")
    assert host_link_bytes_per_s(hw) > PAGEABLE_STAGING_BYTES_PER_S
    pinned, pageable = _copy_s("nvidia-a100-sxm4-40gb", False), _copy_s("nvidia-a100-sxm4-40gb", True)
    assert pageable == pytest.approx(SIZE_BYTES / PAGEABLE_STAGING_BYTES_PER_S, rel=0.05)
    assert pageable > 3.0 * pinned


def test_real_pageable_input_copies_are_predicted_near_their_measured_time() -> None:
    """AlexNet's inputs were copied from pageable memory at 4.3-11 GB/s (the link carries 25 GB/s pinned)."""
    result = match_runs(parse_trace(ALEXNET))
    big = [r for r in result.runs if r.op["kind"] == "hostcopy" and r.op["pageable"] and r.op["bytes"] > 1e6]
    assert len(big) >= 3
    for run in big:
        ratio = predict("nvidia-a100-sxm4-40gb", run.op).time_s / run.measured_time_s
        assert 0.5 < ratio < 2.0, (run.op["bytes"], ratio)


def test_a_memcpy_without_its_byte_count_is_sized_by_the_copy_op_that_launched_it() -> None:
    """ROCm's Kineto records no bytes on its memcpy events; aten::copy_(self, src) has the source's shape."""
    result = match_runs(parse_trace(DATA / "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    copies = [r for r in result.runs if r.op["kind"] == "hostcopy"]
    assert copies and all(r.op["bytes"] == 5 * 128 * 4 and r.confidence == "medium" for r in copies)
    assert "the source tensor of its aten::copy_" in copies[0].notes[0]
    assert "size not recorded" not in result.time_by_category()
