"""FBGEMM pooled embedding lookups of the HTA sampled ranks (real Kineto files, PyTorch 2.0, no Concrete Inputs):
the forward lookup's op from its own arguments, its backward node linked to the right forward lookup."""

from __future__ import annotations

from typing import Any

import pytest
from trace_builders import DATA

from perfmodel.traces import match_runs, parse_trace
from perfmodel.traces.aten_args import Args, Unbuildable
from perfmodel.traces.fbgemm_ops import forward
from perfmodel.traces.records import OpCall

RANK0 = "timeline_analysis__sampled_rank-0.json.gz"
LOOKUP = "fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function"


@pytest.fixture(scope="module")
def rank0_ops() -> list[dict[str, Any]]:
    result = match_runs(parse_trace(DATA / RANK0))
    return [run.op for run in result.runs if run.op["kind"] == "embedding_bag"]


def test_forward_lookups_read_from_their_arguments(rank0_ops: list[dict[str, Any]]) -> None:
    forwards = sorted((op for op in rank0_ops if op.get("pass", "forward") == "forward"),
                      key=lambda op: op["num_indices"])
    # two steps x (1 weighted table, 9 unweighted tables); batch 262,144 per table; weights / momentum rows = 160
    assert [(op["num_bags"], op["weighted"], op["embedding_dim"], op["dtype"]) for op in forwards] == [
        (262_144, True, 160, "fp16")] * 2 + [(9 * 262_144, False, 160, "fp16")] * 2
    assert [op["num_indices"] for op in forwards] == [8_855_045, 8_856_548, 30_055_769, 30_111_429]


def test_backward_nodes_link_to_their_own_forward(rank0_ops: list[dict[str, Any]]) -> None:
    """Gradients [262144, 1440] and [262144, 160]: both batches are 262,144, told apart by total_D = tables x 160."""
    backwards = sorted((op for op in rank0_ops if op.get("pass") == "backward"), key=lambda op: op["num_indices"])
    assert [(op["num_indices"], op["num_bags"], op["weighted"]) for op in backwards] == [
        (8_855_045, 262_144, True), (8_856_548, 262_144, True),
        (30_055_769, 2_359_296, False), (30_111_429, 2_359_296, False)]
    # 48,265,501 rows -> 26-bit indices: 4 radix passes; 1,749,929 rows -> 21 bits: 3
    assert [op["sort_passes"] for op in backwards] == [3, 3, 4, 4]
    assert all(op["state_bytes_per_row"] == 4.0 and op["embedding_dim"] == 160 for op in backwards)


def _call(dims: list[list[int]], types: list[str], concrete: list[str] | None = None) -> OpCall:
    return OpCall(0, LOOKUP, 0.0, 1e-3, tuple(tuple(d) for d in dims), tuple(types),
                  tuple(concrete) if concrete else None)


def test_total_d_recorded_sets_the_row_length_and_host_tables_are_refused() -> None:
    dims = [[0], [6400], [0], [0, 0], [2], [2], [3], [], [], [3], [], [500], [41], [], [], [], [0], [], [], [],
            [0], [0], [2], [2]]
    types = ["float", "c10::Half", "c10::Half", "c10::Half", "int", "long", "int", "Scalar", "Scalar", "long",
             "Scalar", "long", "long", *["Scalar"] * 11]
    concrete = [""] * 7 + ["96"] + [""] * 16
    op, _ = forward(Args(_call(dims, types, concrete)))
    assert (op["num_indices"], op["num_bags"], op["embedding_dim"], op["weighted"]) == (500, 40, 48, False)
    with pytest.raises(Unbuildable, match="row length not recorded"):  # no total_D, no row-wise state
        forward(Args(_call(dims, types)))
    with pytest.raises(Unbuildable, match="host memory"):
        forward(Args(_call([d if i != 2 else [128] for i, d in enumerate(dims)], types, concrete)))


def test_communication_quantizers_are_quantize_ops() -> None:
    result = match_runs(parse_trace(DATA / RANK0))
    quant = sorted({(run.op["kind"], tuple(run.op["shape"]), run.op["from_dtype"], run.op["granularity"])
                    for run in result.runs if run.op["kind"] in ("quantize", "dequantize")})
    # hfp8: one byte per float; FP8 row-wise: [rows, 256 + 8] bytes back to [rows, 256] floats
    assert quant == [("dequantize", (1_638_400, 256), "int8", "channel"),
                     ("dequantize", (382_132_224,), "int8", "tensor"),
                     ("quantize", (1_492_704, 256), "fp32", "channel"),
                     ("quantize", (419_430_400,), "fp32", "tensor")]


def test_a_lambdas_parameter_is_the_element_type_not_its_functions_scalars() -> None:
    from perfmodel.traces.kernel_names import cpp_dtype
    name = ("void at::native::vectorized_elementwise_kernel<4, fbgemm_gpu::_float_to_hfp8_gpu(at::Tensor const&, long, "
            "long, double)::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, ...)")
    assert cpp_dtype(name) == "fp32"
    assert cpp_dtype(name.replace("{lambda(float)#1}", "{lambda()#1}")) == "fp64"  # no element type: as before


def test_permuted_pooled_embeddings_and_their_gradient_are_copies() -> None:
    result = match_runs(parse_trace(DATA / RANK0))
    copies = [run.op for run in result.runs if run.op["kind"] == "reshape" and run.op["shape"] == [2048, 186588]]
    # two steps x (forward permute, backward node's permute of the gradient), fp32, read and written once
    assert copies == [{"kind": "reshape", "shape": [2048, 186588], "new_shape": [2048, 186588], "dtype": "fp32",
                       "contiguous": False}] * 4
