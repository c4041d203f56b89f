"""TorchInductor's Triton kernels get their op from the record Inductor wraps each launch in."""

from __future__ import annotations

from trace_builders import DATA, KinetoTrace

from perfmodel.traces import match_runs, parse_trace


def _trace(name: str, dims: list[list[int]], types: list[str], concrete: list[str]) -> bytes:
    t = KinetoTrace()
    t.op("Torch-Compiled Region: 0/0", 0, 100)
    t.op(name, 5, 50, dims, types, concrete)
    t.kernel(name, 10, 60, 20, extra={"grid": [4, 1, 1], "block": [128, 1, 1]})
    return t.to_bytes()


def test_a_pointwise_kernel_is_elementwise_over_xnumel_with_its_fused_ops() -> None:
    data = _trace("triton_poi_fused_add_mul_tanh_3", [[64, 32], [64, 32], [32], [64, 32], []],
                  ["c10::BFloat16"] * 4 + ["Scalar"], ["", "", "", "", "2048"])
    (run,) = match_runs(parse_trace(data)).runs
    assert run.op == {"kind": "elementwise", "shape": [2048], "dtype": "bf16", "inputs": 3, "outputs": 1,
                      "flops_per_element": 2.0, "transcendentals_per_element": 1.0}
    assert (run.source, run.confidence) == ("framework shapes", "medium")


def test_a_reduction_reduces_xnumel_rows_of_rnumel_and_a_template_stays_unmodelled() -> None:
    data = _trace("triton_red_fused_sum_0", [[128, 4096], [128], [], []], ["float", "float", "Scalar", "Scalar"],
                  ["", "", "128", "4096"])
    (run,) = match_runs(parse_trace(data)).runs
    assert run.op == {"kind": "reduce", "shape": [128, 4096], "axes": [1], "dtype": "fp32", "op": "sum"}
    template = _trace("triton_tem_fused_mm_0", [[64, 64], [64, 64], [64, 64]], ["float"] * 3, ["", "", ""])
    result = match_runs(parse_trace(template))
    assert result.runs == [] and "template (GEMM)" in result.unmodelled[0].reason


def test_a_reduction_without_its_sizes_says_what_is_missing() -> None:
    data = _trace("triton_per_fused_softmax_1", [[8, 512], [8, 512], [], []], ["float"] * 2 + ["Scalar"] * 2,
                  ["", "", "", ""])
    (missing,) = match_runs(parse_trace(data)).unmodelled
    assert "xnumel and rnumel are not recorded" in missing.reason


def test_the_real_inductor_example_is_matched() -> None:
    result = match_runs(parse_trace(DATA / "triton_example__triton_example.json.gz"))
    (run,) = result.runs
    assert run.op_name == "triton_poi_fused_add_cos_sin_0"
    assert run.op["shape"] == [100] and run.op["transcendentals_per_element"] == 2.0
    assert result.unmodelled == []
