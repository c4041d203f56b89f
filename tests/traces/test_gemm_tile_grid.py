"""GEMM kernels without framework shapes: sized by their name's tile and their grid, K assumed (``gemm_ops``)."""

from __future__ import annotations

import pytest
from trace_builders import DATA, KinetoTrace

from perfmodel.ops import make_op
from perfmodel.traces import match_runs, parse_trace
from perfmodel.traces.gemm_ops import TILE_GRID, tile_grid_op
from perfmodel.traces.records import KernelRecord, OpCall

B200_LOG = DATA / "superbench__cublaslt_gemm_b200__ncu_default_set.log"
CUTLASS_FP8 = ("cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32_f16_f16_64x256x128_1x1x1_0_tnn_align4_1sm_bias_"
               "f16_relu_aux_scalemax")


def _kernel(name: str, grid: tuple[int, int, int], caller: str | None = None) -> KernelRecord:
    ops = (OpCall(1, caller, 0.0, 1e-3),) if caller else ()
    return KernelRecord(name, "kernel", 1e-4, "pytorch_kineto", grid=grid, block=(128, 1, 1), ops=ops)


def test_sgemm_tile_and_grid_bound_m_and_n_and_k_is_assumed() -> None:
    found = tile_grid_op(_kernel("ampere_sgemm_128x64_nn", (8, 16, 5), "aten::mm"))
    assert found is not None
    op, notes, source, confidence = found
    assert (op["m"], op["n"], op["k"], op["batch"], op["dtype"]) == (1024, 1024, 1024, 1, "fp32")
    assert source == TILE_GRID and confidence == "low"
    assert any("K is not in the file: assumed" in n for n in notes)
    assert any("split in 5 slices" in n for n in notes)
    make_op(op)


def test_grid_z_is_the_batch_of_a_batched_op() -> None:
    found = tile_grid_op(_kernel("volta_h884gemm_64x64_ldg8_nn", (4, 4, 12), "aten::bmm"))
    assert found is not None
    assert (found[0]["batch"], found[0]["m"], found[0]["dtype"]) == (12, 256, "fp16")


def test_cutlass3_names_give_the_input_and_output_types() -> None:
    found = tile_grid_op(_kernel(CUTLASS_FP8, (9, 32, 1)))
    assert found is not None
    op = found[0]
    assert (op["dtype"], op["out_dtype"], op["m"], op["n"]) == ("fp8_e4m3", "fp16", 576, 8192)
    make_op(op)


def test_a_cutlass_tf32_name_reads_as_fp32_data_on_tensor_cores() -> None:
    """``cutlass_80_tensorop_s1688gemm_<tile>`` names no input type: fp32 data, TF32 math (``math_dtype``); a
    16-bit input named after ``gemm_`` is that type (and gets no TF32)."""
    found = tile_grid_op(_kernel("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>("
                                 "cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1::Params)", (512, 2, 4)))
    assert found is not None
    op = found[0]
    assert (op["dtype"], op["compute_dtype"], op["m"], op["n"]) == ("fp32", "tf32", 256 * 512, 64 * 2)
    half = tile_grid_op(_kernel("cutlass_80_tensorop_s1688gemm_f16_64x64_32x4_nt_align8", (4, 4, 1)))
    assert half is not None and half[0]["dtype"] == "fp16" and "compute_dtype" not in half[0]
    make_op(op)


@pytest.mark.parametrize("name", ["void at::native::vectorized_elementwise_kernel<4, float>(int)",
                                  "some_gemm_without_a_tile", "ampere_sgemm_nn"])
def test_no_tile_or_no_gemm_gives_nothing(name: str) -> None:
    assert tile_grid_op(_kernel(name, (8, 8, 1))) is None


def test_a_hostile_grid_is_refused() -> None:
    assert tile_grid_op(_kernel("ampere_sgemm_128x64_nn", (1 << 30, 1, 1))) is None


def test_an_unshaped_matmul_trace_is_matched_by_tile_and_grid() -> None:
    t = KinetoTrace()
    t.op("aten::mm", 0, 200)  # record_shapes off: no Input Dims
    t.kernel("ampere_sgemm_128x64_nn", 5, 10, 120, extra={"grid": [8, 16, 5], "block": [128, 1, 1]})
    result = match_runs(parse_trace(t.to_bytes()))
    (run,) = result.runs
    assert run.source == TILE_GRID and run.op["m"] == 1024 and result.unmodelled == []


def test_the_real_b200_ncu_log_is_matched_with_k_assumed() -> None:
    result = match_runs(parse_trace(B200_LOG))
    (run,) = result.runs
    assert run.source == TILE_GRID and run.confidence == "low"
    assert run.op["dtype"] == "fp8_e4m3" and result.matched_time_s == pytest.approx(result.total_kernel_time_s)
