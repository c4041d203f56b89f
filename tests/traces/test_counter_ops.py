"""Measured-work ops from a kernel's own counters (Nsight Compute, rocprof), where nothing else knows its work."""

from __future__ import annotations

import pytest
from trace_builders import DATA

from perfmodel.ops import make_op
from perfmodel.traces import match_runs, parse_trace
from perfmodel.traces.counter_ops import COUNTERS, counter_op
from perfmodel.traces.records import KernelRecord

RELU = DATA / "activation__relu__nsight_result_first500.csv"
ATTENTION = DATA / "attention__actual_parameter_analysis__data__5-9__bert_flashattn_nsight.csv"


def _kernel(**counters: float) -> KernelRecord:
    return KernelRecord("kernel 0", "kernel", 10e-6, "ncu_raw_csv", counters=counters)


def test_dram_bytes_and_flops_become_a_streaming_op_at_the_dtype_that_counted_most() -> None:
    found = counter_op(_kernel(dram_bytes=8e6, flops_fp32=3e6, flops_fp16=1e6))
    assert found is not None
    op, notes, source, confidence = found
    assert op == {"kind": "elementwise", "shape": [1_000_000], "dtype": "fp32", "inputs": 1, "outputs": 1,
                  "flops_per_element": 4.0}
    assert (source, confidence) == (COUNTERS, "medium")
    assert "8e+06 DRAM bytes" in notes[0]
    make_op(op)  # a valid op


def test_without_flops_the_bytes_are_untyped_and_without_dram_traffic_the_l1_bytes_size_it() -> None:
    found = counter_op(_kernel(dram_bytes=0.0, l1_bytes=4096.0))
    assert found is not None
    assert found[0]["shape"] == [2048] and found[0]["dtype"] == "int8" and found[0]["flops_per_element"] == 0.0
    assert "cache-resident" in found[1][0]


def test_tensor_instructions_lower_the_confidence_and_no_bytes_give_no_op() -> None:
    found = counter_op(_kernel(dram_bytes=1e5, tensor_inst=64.0))
    assert found is not None and found[3] == "low" and "tensor-core" in found[1][-1]
    assert counter_op(_kernel(sm_throughput_pct=40.0)) is None


@pytest.mark.parametrize("path", [RELU, ATTENTION])
def test_real_ncu_files_without_kernel_names_or_shapes_are_matched_by_their_counters(path: object) -> None:
    result = match_runs(parse_trace(path))  # type: ignore[arg-type]
    assert result.unmodelled == []
    assert result.time_by_source() == {COUNTERS: pytest.approx(result.total_kernel_time_s)}
    assert all(run.op["kind"] == "elementwise" for run in result.runs)
