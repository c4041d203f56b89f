"""Foreach ops (``aten::_foreach_*``, the optimizers' multi-tensor steps): one elementwise op over their tensor
lists, from the lists' recorded shapes, typed from the kernel's name (``Input type`` says ``TensorList``)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from trace_builders import DATA, KinetoTrace

from perfmodel.traces import match_runs, parse_trace

AMD = DATA / "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
KERNEL = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::"
          "TensorListMetadata<{depth}>, at::native::(anonymous namespace)::{functor}<float, {depth}, 2, 0>, "
          "std::plus<float>, float>(at::native::(anonymous namespace)::TensorListMetadata<{depth}>)")


def test_the_real_rocm_trace_reads_the_tensor_lists_shapes() -> None:
    """MI250, PyTorch on ROCm 6.2: the optimizer's ``_foreach_add_`` over the model's weight and bias, against
    the Input Dims the json module reads from the file."""
    with gzip.open(AMD, "rt") as handle:
        events: list[dict[str, Any]] = json.load(handle)["traceEvents"]
    (recorded,) = [e["args"]["Input Dims"] for e in events if e.get("name") == "aten::_foreach_add_"]
    elements = sum(_numel(s) for s in recorded[0])
    parsed = parse_trace(AMD)
    (call,) = {c.call_id: c for k in parsed.kernels for c in k.ops if c.name == "aten::_foreach_add_"}.values()
    assert call.input_lists is not None and call.input_lists[0] == tuple(tuple(s) for s in recorded[0])
    assert call.input_dims is not None and call.input_dims[0] is None  # no single shape for a list
    (run,) = [r for r in match_runs(parsed).runs if r.op_name == "aten::_foreach_add_"]
    assert run.op == {"kind": "elementwise", "shape": [elements], "dtype": "fp32", "inputs": 2, "outputs": 1,
                      "flops_per_element": 1.0, "transcendentals_per_element": 0.0}
    assert (run.source, run.confidence) == ("framework shapes", "medium")
    assert any("element type not recorded: fp32 assumed" in n for n in run.notes)


def _numel(shape: list[int]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


@pytest.mark.parametrize(("name", "dims", "types", "inputs", "flops"), [
    ("aten::_foreach_mul_", [[[64, 32], [32]], []], ["TensorList", "Scalar"], 1, 1.0),
    ("aten::_foreach_addcmul_", [[[64, 32], [32]], [[64, 32], [32]], [[64, 32], [32]], []],
     ["TensorList", "TensorList", "TensorList", "Scalar"], 3, 3.0),
    ("aten::_foreach_zero_", [[[64, 32], [32]]], ["TensorList"], 0, 0.0),
])
def test_a_foreach_call_reads_each_list(name: str, dims: list[Any], types: list[str], inputs: int,
                                        flops: float) -> None:
    t = KinetoTrace()
    external = t.op(name, 0, 20, dims, types)
    t.kernel(KERNEL.format(depth=len(dims), functor="BinaryOpScalarFunctor"), 5, 10, 4, external=external)
    (run,) = match_runs(parse_trace(t.to_bytes())).runs
    assert (run.op["shape"], run.op["inputs"], run.op["flops_per_element"]) == ([64 * 32 + 32], inputs, flops)


def test_a_foreach_call_whose_kernel_names_no_type_stays_unmatched() -> None:
    t = KinetoTrace()
    external = t.op("aten::_foreach_add_", 0, 20, [[[8], [8]], [[8], [8]], []], ["TensorList", "TensorList", "Scalar"])
    t.kernel("some_foreach_kernel", 5, 10, 4, external=external, extra={"grid": None, "block": None})
    result = match_runs(parse_trace(t.to_bytes()))
    assert result.runs == [] and "no Input type" in result.unmodelled[0].reason


def test_a_foreach_call_not_typed_falls_to_its_launch_only() -> None:
    """With its launch recorded the kernel is sized by it alone (fp32 assumed, confidence low), never typed from
    the call's lists."""
    t = KinetoTrace()
    external = t.op("aten::_foreach_add_", 0, 20, [[[8], [8]], [[8], [8]], []], ["TensorList", "TensorList", "Scalar"])
    t.kernel("some_foreach_kernel", 5, 10, 4, external=external)
    (run,) = match_runs(parse_trace(t.to_bytes())).runs
    assert (run.source, run.confidence, run.op["shape"], run.op["dtype"]) == ("launch geometry", "low", [512], "fp32")
    assert any("fp32 assumed" in note for note in run.notes)
