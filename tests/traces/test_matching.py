"""Kernels -> measured runs: ops with shapes, several kernels summed, unmodelled kernels kept."""

from __future__ import annotations

import pytest
from trace_builders import DATA, KinetoTrace, load_events

from perfmodel.ops import make_op
from perfmodel.ops.conv import Conv2d
from perfmodel.traces import MatchResult, match_runs, parse_trace
from perfmodel.traces.matching import MatchedRun


def _accounted(result: MatchResult) -> float:
    return sum(r.measured_time_s for r in result.runs) + sum(u.time_s for u in result.unmodelled)


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.json.gz")))
def test_every_kernel_is_a_run_or_unmodelled(name: str) -> None:
    parsed = parse_trace(DATA / name)
    result = match_runs(parsed)
    assert result.total_kernel_time_s == pytest.approx(parsed.total_kernel_time_s)
    assert _accounted(result) == pytest.approx(parsed.total_kernel_time_s)
    assert sum(r.kernel_count for r in result.runs) + sum(u.count for u in result.unmodelled) == len(parsed.kernels)
    assert 0.0 <= result.unmodelled_time_share <= 1.0
    for run in result.runs:
        make_op(run.op)


def test_alexnet_convs_and_gemms_are_found_but_have_no_shapes() -> None:
    """The alexnet trace was recorded without record_shapes: the ops are found, the shapes are not; only the
    elementwise kernels (sized by grid x block), the on-device fills and the host copies become runs."""
    result = match_runs(parse_trace(DATA / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"))
    assert {r.source for r in result.runs} == {"grid/block", "memcpy/memset", "GEMM tile x grid", "launch geometry"}
    assert {r.op["kind"] for r in result.runs} == {"elementwise", "hostcopy", "matmul"}
    pageable = [r for r in result.runs if r.op["kind"] == "hostcopy" and r.op["pageable"]]
    # the pageable host-to-device input copies are most of its device time
    assert sum(r.measured_time_s for r in pageable) > 0.8 * result.total_kernel_time_s
    assert "host transfer" not in result.time_by_category()
    reasons = {u.reason for u in result.unmodelled}
    assert "aten::conv2d: no Input Dims (profile with record_shapes=True)" in reasons
    assert "aten::linear: no Input Dims (profile with record_shapes=True)" in reasons
    conv = [u for u in result.unmodelled if u.reason.startswith("aten::conv2d")]
    assert "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1" in {u.name for u in conv}
    # the linear layers' GEMMs: sized by tile x grid, K assumed (gemm_ops), one run per launch
    gemm = [r for r in result.runs if r.kernel_names == ("ampere_sgemm_32x32_sliced1x4_tn",)]
    assert len(gemm) == 6 and {(r.source, r.confidence) for r in gemm} == {("GEMM tile x grid", "low")}


def test_rocm_trace_gemms_get_their_shapes() -> None:
    result = match_runs(parse_trace(DATA / "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    ops = {r.op_name: r.op for r in result.runs}
    assert ops["aten::linear"] == {"kind": "matmul", "m": 5, "k": 128, "n": 128, "dtype": "fp32",
                                   "transpose_b": True, "bias": True}
    assert ops["aten::mm"] == {"kind": "matmul", "m": 128, "k": 5, "n": 128, "dtype": "fp32"}
    assert ops["aten::sum"] == {"kind": "reduce", "shape": [5, 128], "axes": [0], "dtype": "fp32", "op": "sum"}
    assert result.unmodelled_time_share == 0.0  # every kernel has its op (mse_loss and its backward included)


def _transformer_block() -> KinetoTrace:
    t = KinetoTrace()
    t.op("aten::embedding", 0, 10, [[50000, 512], [4, 128]], ["c10::BFloat16", "long int"])
    t.kernel("void at::native::indexSelectLargeIndex<c10::BFloat16>", 2, 1000, 3.0)
    t.op("aten::layer_norm", 20, 10, [[4, 128, 512], [], [512], [512], [], []],
         ["c10::BFloat16", "", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"])
    t.op("aten::native_layer_norm", 21, 8, [[4, 128, 512], [], [512], [512], []],
         ["c10::BFloat16", "", "c10::BFloat16", "c10::BFloat16", "Scalar"])
    t.kernel("void at::native::vectorized_layer_norm_kernel<c10::BFloat16>", 22, 1010, 4.0)
    t.op("aten::linear", 40, 20, [[4, 128, 512], [1536, 512], [1536]], ["c10::BFloat16"] * 3)
    t.op("aten::addmm", 41, 18, [[1536], [512, 512], [512, 1536], [], []], ["c10::BFloat16"] * 3 + ["Scalar"] * 2)
    t.kernel("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32", 42, 1020, 10.0)
    t.kernel("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>", 43, 1031, 2.0)
    t.op("aten::scaled_dot_product_attention", 70, 20, [[4, 8, 128, 64], [4, 2, 128, 64], [4, 2, 128, 64], [], [],
                                                       [], [], []],
         ["c10::BFloat16"] * 3 + ["", "Scalar", "Scalar", "", "Scalar"], ["", "", "", "", "0.", "True", "", "True"])
    t.op("aten::_scaled_dot_product_flash_attention", 71, 18, [[4, 8, 128, 64], [4, 2, 128, 64], [4, 2, 128, 64]],
         ["c10::BFloat16"] * 3)
    t.kernel("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>", 72, 1040, 20.0)
    t.op("aten::conv2d", 100, 30, [[8, 3, 224, 224], [64, 3, 7, 7], [64], [], [], [], []],
         ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
         ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "1"])
    t.kernel("sm80_xmma_fprop_implicit_gemm_tf32f32", 101, 1070, 30.0)
    t.kernel("void at::native::elementwise_kernel<128, 2, CUDAFunctor_add<float>>", 102, 1101, 5.0)
    t.kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 140, 1200, 50.0)
    t.op("aten::copy_", 150, 5, [[1024], [1024], []], ["float", "float", "Scalar"])
    t.kernel("Memcpy HtoD (Pageable -> Device)", 151, 1300, 7.0, cat="gpu_memcpy")
    return t


def test_synthetic_block_gives_the_ops_with_their_shapes() -> None:
    result = match_runs(parse_trace(_transformer_block().to_bytes()))
    runs = {r.op_name: r for r in result.runs}
    assert runs["aten::embedding"].op == {"kind": "embedding", "table_shape": [50000, 512], "num_indices": 512,
                                          "dtype": "bf16", "index_dtype": "int64"}
    assert runs["aten::layer_norm"].op == {"kind": "layernorm", "shape": [4, 128, 512], "dtype": "bf16"}
    linear = runs["aten::linear"]
    assert linear.op == {"kind": "matmul", "m": 512, "k": 512, "n": 1536, "dtype": "bf16", "transpose_b": True,
                         "bias": True}
    assert linear.kernel_count == 2 and linear.measured_time_s == pytest.approx(12e-6)
    attention = runs["aten::scaled_dot_product_attention"]
    assert attention.op == {"kind": "attention", "batch": 4, "heads": 8, "kv_heads": 2, "seq_q": 128,
                            "seq_kv": 128, "head_dim": 64, "head_dim_v": 64, "dtype": "bf16", "causal": True,
                            "pass": "forward"}
    conv = runs["aten::conv2d"]
    assert conv.op == {"kind": "conv2d", "batch": 8, "in_channels": 3, "height": 224, "width": 224,
                       "out_channels": 64, "kernel_h": 7, "kernel_w": 7, "dtype": "fp32", "stride": 2,
                       "padding": 3, "dilation": 1, "groups": 1, "bias": True, "compute_dtype": "tf32"}
    assert conv.kernel_count == 2 and conv.measured_time_s == pytest.approx(35e-6)
    reasons = {u.name: u.reason for u in result.unmodelled}
    assert reasons["ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"].startswith(
        "collective kernel")
    # the memcpy records no bytes: its copy op's source tensor (1024 floats) sizes it
    assert "Memcpy HtoD (Pageable -> Device)" not in reasons
    assert runs["aten::copy_"].op == {"kind": "hostcopy", "bytes": 4096, "direction": "h2d", "pageable": True}
    assert result.total_kernel_time_s == pytest.approx(131e-6)
    assert result.matched_time_s == pytest.approx(81e-6)
    assert result.unmodelled_time_share == pytest.approx(50 / 131)


def test_sdpa_without_concrete_inputs_notes_the_assumption() -> None:
    t = KinetoTrace()
    t.op("aten::_scaled_dot_product_efficient_attention", 0, 10, [[1, 4, 16, 32]] * 3, ["c10::Half"] * 3)
    t.kernel("fmha_cutlassF_f16_aligned_64x64_rf_sm80", 1, 100, 2.0)
    (run,) = match_runs(parse_trace(t.to_bytes())).runs
    assert run.op["causal"] is False and run.op["dtype"] == "fp16"
    assert run.notes == ("is_causal not recorded: assumed False",)


def test_conv_without_concrete_inputs_is_unmodelled_with_the_reason() -> None:
    t = KinetoTrace()
    t.op("aten::cudnn_convolution", 0, 10, [[1, 3, 32, 32], [8, 3, 3, 3], [], [], [], []], ["float"] * 2 + [""] * 4)
    t.kernel("implicit_convolve_sgemm", 1, 100, 2.0)
    result = match_runs(parse_trace(t.to_bytes()))
    assert result.runs == []
    (left,) = result.unmodelled
    assert left.reason.startswith("aten::cudnn_convolution: stride not recorded")
    assert left.time_s == pytest.approx(2e-6) and left.count == 1


def test_cpu_only_records_become_runs() -> None:
    t = KinetoTrace()
    t.op("aten::mm", 0, 50, [[64, 32], [32, 16]], ["double", "double"])
    t.op("aten::gelu", 60, 10, [[64, 16], []], ["float", ""])
    result = match_runs(parse_trace(t.to_bytes()))
    assert [r.op for r in result.runs] == [
        {"kind": "matmul", "m": 64, "k": 32, "n": 16, "dtype": "fp64"},
        {"kind": "elementwise", "shape": [64, 16], "dtype": "fp32", "inputs": 1, "outputs": 1,
         "flops_per_element": 8.0, "transcendentals_per_element": 1.0}]
    assert [r.measured_time_s for r in result.runs] == pytest.approx([50e-6, 10e-6])
    assert result.unmodelled_time_share == 0.0


def _conv_trace(kernels: list[str], kernel: int = 3, stride: int = 1) -> KinetoTrace:
    t = KinetoTrace()
    t.op("aten::conv2d", 0, 100, [[8, 64, 56, 56], [64, 64, kernel, kernel], [], [], [], [], []],
         ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
         ["", "", "", f"[{stride}, {stride}]", "[1, 1]", "[1, 1]", "1"])
    for i, name in enumerate(kernels):
        t.kernel(name, 1 + i, 200 + 20 * i, 10.0)
    return t


def _conv_runs(kernels: list[str], stride: int = 1) -> list[MatchedRun]:
    return match_runs(parse_trace(_conv_trace(kernels, stride=stride).to_bytes())).runs


def test_winograd_kernels_give_the_conv_its_algorithm() -> None:
    """cuDNN's non-fused Winograd (four kernels, as nvprof lists them) and its fused one are named by their kernels."""
    nonfused = ["void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(WinogradDataParams)",
                "void cudnn::winograd_nonfused::winogradForwardFilter4x4<float, float>(WinogradFilterParams)",
                "volta_sgemm_128x64_nn",
                "void cudnn::winograd_nonfused::winogradForwardOutput4x4<float, float>(WinogradOutputParams)"]
    (run,) = _conv_runs(nonfused)
    assert run.op["algorithm"] == "winograd_nonfused" and run.kernel_count == 4
    assert run.notes == ("algorithm winograd_nonfused, from its kernel names",)
    (fused,) = _conv_runs(["volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1"])
    assert fused.op["algorithm"] == "winograd"
    (plain,) = _conv_runs(["sm80_xmma_fprop_implicit_gemm_f32f32"])
    assert "algorithm" not in plain.op and plain.notes == ()


def test_winograd_kernels_on_a_shape_winograd_cannot_run_keep_implicit_gemm() -> None:
    (run,) = _conv_runs(["maxwell_scudnn_winograd_128x128_ldg1_ldg4_tile148n_nt"], stride=2)
    assert "algorithm" not in run.op
    (note,) = run.notes
    assert note.startswith("winograd kernels, but modelled as implicit GEMM (winograd needs a 3x3 kernel")


def test_fft_kernels_give_the_conv_its_fft_algorithm() -> None:
    """cuDNN's FFT convolutions as their kernels are named: 32x32 transforms on a 58x58 padded map are FFT_TILING,
    64x64 ones the whole-map FFT; on a stride-2 conv neither can run, so it stays implicit GEMM with a note."""
    tiled = ["void fft2d_r2c_32x32<float, false, 1u, false>(float2*, float const*, int, int, int, int, int)",
             "void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*, int, int, int, int, int)",
             "volta_cgemm_32x32_tn",
             "void fft2d_c2r_32x32<float, false, false, 1, false, false>(float*, float2 const*)"]
    (run,) = _conv_runs(tiled)
    assert run.op["algorithm"] == "fft_tiling" and run.kernel_count == 4
    whole = [name.replace("32x32", "64x64") for name in tiled]
    (run,) = _conv_runs(whole)
    assert run.op["algorithm"] == "fft" and run.notes == ("algorithm fft, from its kernel names",)
    (strided,) = _conv_runs(whole, stride=2)
    assert "algorithm" not in strided.op
    assert strided.notes[0].startswith("fft kernels, but modelled as implicit GEMM (fft needs stride 1")


# aten::convolution_backward's arguments exactly as PyTorch 2.13 records them (record_shapes=True)
_BWD_TYPES = ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar",
              "ScalarList", "Scalar", "ScalarList"]


def _conv_backward_trace(mask: str | None) -> KinetoTrace:
    t = KinetoTrace()
    concrete = ["", "", "", "[32]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", mask or ""]
    t.op("autograd::engine::evaluate_function: ConvolutionBackward0", 0, 200)
    t.op("ConvolutionBackward0", 1, 198)
    t.op("aten::convolution_backward", 2, 196,
         [[8, 32, 28, 28], [8, 16, 56, 56], [32, 16, 3, 3], [], [], [], [], [], [], [], []], _BWD_TYPES, concrete)
    t.kernel("sm80_xmma_dgrad_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nchw", 3, 300, 40.0)
    t.kernel("sm80_xmma_wgrad_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nhwc", 4, 341, 50.0)
    t.kernel("void cudnn::ops::conv2d_grouped_direct_kernel_bias_grad", 5, 392, 5.0)
    return t


def test_conv_backward_is_one_backward_run_of_its_gradient_kernels() -> None:
    """Both gradients (output_mask [True, True, True]): one backward conv2d run, the three kernels summed."""
    (run,) = match_runs(parse_trace(_conv_backward_trace("[True, True, True]").to_bytes())).runs
    assert run.op_name == "aten::convolution_backward"
    assert run.op == {"kind": "conv2d", "batch": 8, "in_channels": 16, "height": 56, "width": 56,
                      "out_channels": 32, "kernel_h": 3, "kernel_w": 3, "dtype": "fp32", "stride": 2,
                      "padding": 1, "dilation": 1, "groups": 1, "bias": True, "pass": "backward"}
    assert run.kernel_count == 3 and run.measured_time_s == pytest.approx(95e-6)
    conv = make_op(run.op)
    assert isinstance(conv, Conv2d) and conv.out_h == 28  # the recorded grad_output's 28 x 28


def test_conv_backward_of_a_first_layer_is_unmodelled_with_the_reason() -> None:
    """No input gradient (the first layer, output_mask [False, True, True]): not the model's two gradients."""
    result = match_runs(parse_trace(_conv_backward_trace("[False, True, True]").to_bytes()))
    assert result.runs == []
    reasons = {u.reason for u in result.unmodelled}
    assert reasons == {"aten::convolution_backward: only the weight gradient computed (output_mask [False, True, "
                       "True]): perfmodel's conv2d backward is both gradients"}


@pytest.mark.parametrize("mask", [None, "[True, True", "<b>x</b>", "[True]"])
def test_conv_backward_without_its_mask_notes_the_assumption(mask: str | None) -> None:
    (run,) = match_runs(parse_trace(_conv_backward_trace(mask).to_bytes())).runs
    assert run.op["pass"] == "backward" and run.op["bias"] is False
    assert run.notes == ("output_mask not recorded: both gradients assumed, no bias gradient",)


def test_tf32_kernels_give_fp32_gemms_and_convs_tf32_math() -> None:
    """PyTorch runs fp32 convolutions (and matmuls with allow_tf32) on TF32 tensor cores on Ampere: the kernel
    names say so (the A100 AlexNet trace: sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_...)."""
    t = _conv_trace(["sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16"])
    t.op("aten::mm", 500, 20, [[64, 32], [32, 16]], ["float", "float"])
    t.kernel("ampere_tf32_s1688gemm_tf32_128x128_16x3_nn", 501, 600, 5.0)
    t.op("aten::mm", 700, 20, [[64, 32], [32, 16]], ["float", "float"])
    t.kernel("ampere_sgemm_32x32_sliced1x4_nn", 701, 800, 5.0)
    conv, tf32_mm, fp32_mm = match_runs(parse_trace(t.to_bytes())).runs
    assert conv.op["compute_dtype"] == "tf32" and tf32_mm.op["compute_dtype"] == "tf32"
    assert "compute_dtype" not in fp32_mm.op and fp32_mm.notes == ()
    assert tf32_mm.notes == ("tf32 math, from its kernel names",)


def test_channels_last_convolutions_are_nhwc() -> None:
    """Input Strides as PyTorch 2.13 records a channels_last conv2d: [6400, 1, 320, 16] for [4, 16, 20, 20]."""
    t = KinetoTrace()
    t.op("aten::conv2d", 0, 100, [[4, 16, 20, 20], [32, 16, 3, 3], [32], [], [], [], []],
         ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
         ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"],
         extra={"Input Strides": [[6400, 1, 320, 16], [144, 1, 48, 16], [1], [], [], [], []]})
    t.kernel("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nhwc", 1, 200, 10.0)
    t.op("aten::conv2d", 300, 100, [[4, 16, 20, 20], [32, 16, 3, 3], [32], [], [], [], []],
         ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
         ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"],
         extra={"Input Strides": [[6400, 400, 20, 1], [144, 9, 3, 1], [1], [], [], [], []]})
    t.kernel("sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nchw", 301, 400, 10.0)
    channels_last, contiguous = match_runs(parse_trace(t.to_bytes())).runs
    assert channels_last.op["layout"] == "nhwc" and "layout" not in contiguous.op


def test_cpu_training_step_attributes_single_op_autograd_nodes() -> None:
    """A real CPU-only training step (PyTorch 2.13): the second conv's ConvolutionBackward0 node holds one
    aten::convolution_backward and becomes its backward run; the first layer's computes no input gradient and
    stays unmodelled with that reason; every record is accounted for."""
    parsed = parse_trace(DATA / "host_cpu_conv_train.pt.trace.json.gz")
    result = match_runs(parsed)
    backward = [r for r in result.runs if r.op_name == "aten::convolution_backward"]
    assert [r.op for r in backward] == [{
        "kind": "conv2d", "batch": 2, "in_channels": 16, "height": 32, "width": 32, "out_channels": 32,
        "kernel_h": 3, "kernel_w": 3, "dtype": "fp32", "stride": 2, "padding": 1, "dilation": 1, "groups": 1,
        "bias": False, "pass": "backward"}]
    (first_layer,) = [u for u in result.unmodelled if "convolution_backward" in u.reason]
    assert first_layer.name == "autograd::engine::evaluate_function: ConvolutionBackward0"
    assert "only the weight gradient computed" in first_layer.reason
    assert sum(r.measured_time_s for r in result.runs) + sum(u.time_s for u in result.unmodelled) == pytest.approx(
        parsed.total_kernel_time_s)


def test_cpu_autograd_nodes_of_several_ops_are_split_into_them() -> None:
    """A real CPU-only training step (PyTorch 2.13, Linear layers): each MmBackward0 node holds two aten::mm (the
    input and weight gradients) and views; they become two GEMM runs timed as the profiler recorded them, the
    node's own time outside them an unmodelled record, and no time is lost or counted twice."""
    name = "host_cpu_linear_train.pt.trace.json.gz"
    events = [e for e in load_events(DATA / name) if e.get("cat") == "cpu_op"]
    nodes = [e for e in events if e["name"] == "MmBackward0"]
    inside = [e for e in events if e["name"] == "aten::mm" and any(
        n["ts"] <= e["ts"] and e["ts"] + e["dur"] <= n["ts"] + n["dur"] for n in nodes)]
    assert len(nodes) == 2 and len(inside) == 4
    parsed = parse_trace(DATA / name)
    result = match_runs(parsed)
    mm_runs = {round(r.measured_time_s * 1e9): r.op for r in result.runs if r.op_name == "aten::mm"}
    for e in inside:
        assert mm_runs[round(e["dur"] * 1e3)]["kind"] == "matmul"
    assert {(r.op["m"], r.op["n"], r.op["k"]) for r in result.runs if r.op_name == "aten::mm"} >= {
        (128, 512, 64), (64, 512, 128)}
    (own,) = [u for u in result.unmodelled if u.name == "MmBackward0 [self]"]
    assert own.count == 2 and "outside its child ops" in own.reason
    assert sum(r.measured_time_s for r in result.runs) + sum(u.time_s for u in result.unmodelled) == pytest.approx(
        parsed.total_kernel_time_s)
