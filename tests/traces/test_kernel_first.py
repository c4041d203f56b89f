"""The kernel-first matcher: each source of work (fwd/bwd link, memcpy/memset, grid/block, collective metadata,
other devices' events), the reason categories, and real traces where the shapes come from those sources."""

from __future__ import annotations

import json

import pytest
from trace_builders import DATA, KinetoTrace

from perfmodel.specs import load_hardware
from perfmodel.traces import match_runs, parse_trace
from perfmodel.traces.aten_args import Unbuildable
from perfmodel.traces.aten_nn import infer_stride_padding
from perfmodel.traces.kernel_names import gemm_tile, math_dtype, offload_region
from perfmodel.traces.kineto import head_metadata
from perfmodel.traces.matching import SOURCES, reason_category
from perfmodel.traces.report import format_trace_report, trace_report

RESNET = DATA / "kineto_resnet50_num_workers_0__worker0.1623143566756.pt.trace.json.gz"
SAMPLED_RANK = DATA / "timeline_analysis__sampled_rank-0.json.gz"
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")


@pytest.mark.parametrize(("size", "out", "kernel", "expected"), [
    (224, 112, 7, (2, 3)), (56, 28, 1, (2, 0)), (56, 56, 3, (1, 1)), (56, 28, 3, (2, 1)), (7, 7, 1, (1, 0)),
    (32, 30, 3, (1, 0)),
])
def test_stride_and_padding_follow_from_input_and_output_sizes(size: int, out: int, kernel: int,
                                                                 expected: tuple[int, int]) -> None:
    assert infer_stride_padding(size, out, kernel) == expected


def test_an_output_larger_than_any_padding_allows_is_unbuildable() -> None:
    with pytest.raises(Unbuildable, match="no stride"):
        infer_stride_padding(10, 20, 3)


def _old_conv_trace() -> KinetoTrace:
    """PyTorch 1.9: the forward conv records shapes but no scalars; its backward node (same sequence number, on
    the autograd thread) records the output gradient's shape; the backward op records all three tensors."""
    t = KinetoTrace()
    seq = {"Sequence number": 7, "Fwd thread id": 0}
    t.op("aten::cudnn_convolution", 0, 50, [[32, 64, 56, 56], [128, 64, 3, 3], [], [], []],
         ["float", "float", "GenericList", "GenericList", "GenericList"], extra=seq)
    t.kernel("void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false>(int)", 10, 60, 100)
    t.op("aten::cudnn_batch_norm", 60, 20, [[32, 128, 28, 28], [128], [128], [128], [128], [], [], []],
         ["float"] * 5 + ["Bool", "Double", "Double"], extra={"Sequence number": 8, "Fwd thread id": 0})
    t.kernel("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(float)", 65, 170, 30)
    t.op("CudnnBatchNormBackward", 300, 40, [[32, 128, 28, 28]], ["float"], tid=2,
         extra={"Sequence number": 8, "Fwd thread id": 1})
    t.op("aten::cudnn_batch_norm_backward", 305, 30, [[32, 128, 28, 28], [32, 128, 28, 28], [128]],
         ["float", "float", "float"], tid=2)
    t.kernel("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>(float)", 310, 350, 40, tid=2)
    t.op("CudnnConvolutionBackward", 400, 90, [[32, 128, 28, 28]], ["float"], tid=2,
         extra={"Sequence number": 7, "Fwd thread id": 1})
    t.op("aten::cudnn_convolution_backward", 405, 80, [[32, 64, 56, 56], [32, 128, 28, 28], [128, 64, 3, 3]],
         ["float", "float", "float"], tid=2)
    t.kernel("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int)", 410, 500, 150, tid=2)
    t.kernel("void cudnn::cnn::wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int)", 420, 650, 120,
             tid=2)
    return t


def test_a_forward_conv_takes_its_output_shape_from_its_backward_node() -> None:
    result = match_runs(parse_trace(_old_conv_trace().to_bytes()))
    runs = {r.op_name: r for r in result.runs}
    forward = runs["aten::cudnn_convolution"]
    assert forward.op == {"kind": "conv2d", "batch": 32, "in_channels": 64, "height": 56, "width": 56,
                          "out_channels": 128, "kernel_h": 3, "kernel_w": 3, "dtype": "fp32", "bias": False,
                          "stride": 2, "padding": 1, "groups": 1}
    assert forward.source == "fwd/bwd link" and forward.confidence == "medium"
    assert any("inferred from the input and output shapes" in n for n in forward.notes)
    backward = runs["aten::cudnn_convolution_backward"]
    assert backward.source == "framework shapes"
    assert {k: backward.op[k] for k in ("stride", "padding", "pass")} == {"stride": 2, "padding": 1,
                                                                          "pass": "backward"}
    assert backward.kernel_count == 2 and backward.measured_time_s == pytest.approx(270e-6)
    norm = runs["aten::cudnn_batch_norm"]
    assert norm.op == {"kind": "batchnorm", "shape": [32 * 28 * 28, 128], "dtype": "fp32", "training": True}
    assert runs["aten::cudnn_batch_norm_backward"].op["pass"] == "backward"
    assert result.unmodelled == [] and result.matched_time_s == pytest.approx(result.total_kernel_time_s)


def test_without_the_backward_node_the_backward_op_of_the_same_shapes_gives_the_output() -> None:
    trace = _old_conv_trace()
    trace.events = [e for e in trace.events if e["name"] != "CudnnConvolutionBackward"]
    forward = next(r for r in match_runs(parse_trace(trace.to_bytes())).runs
                   if r.op_name == "aten::cudnn_convolution")
    assert (forward.op["stride"], forward.op["padding"]) == (2, 1)
    assert forward.source == "fwd/bwd link" and forward.confidence == "medium"
    assert any("same input and weight shapes" in n for n in forward.notes)


def test_without_any_backward_the_stride_stays_unknown() -> None:
    trace = _old_conv_trace()
    trace.events = [e for e in trace.events if "onvolutionBackward" not in e["name"]
                    and "convolution_backward" not in e["name"]]
    result = match_runs(parse_trace(trace.to_bytes()))
    (missed,) = [u for u in result.unmodelled if "implicit_convolve" in u.name]
    assert "stride not recorded" in missed.reason and missed.category == "shapes not recorded"


def test_backward_ops_that_disagree_on_the_output_give_no_link() -> None:
    trace = _old_conv_trace()
    trace.events = [e for e in trace.events if e["name"] != "CudnnConvolutionBackward"]
    trace.op("aten::cudnn_convolution_backward", 700, 80, [[32, 64, 56, 56], [32, 128, 56, 56], [128, 64, 3, 3]],
             ["float", "float", "float"], tid=2)  # another layer of these shapes, stride 1
    trace.kernel("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int)", 710, 800, 150, tid=2)
    result = match_runs(parse_trace(trace.to_bytes()))
    assert "aten::cudnn_convolution" not in {r.op_name for r in result.runs}
    assert any("stride not recorded" in u.reason for u in result.unmodelled)


def test_pytorch_1_8_input_dims_without_types_are_typed_from_the_kernel_names() -> None:
    """PyTorch 1.8's profiler writes ``Input dims`` (lower-case d) and ``Input type: []``: the shapes are read,
    the dtype comes from a kernel of the call that names it (cuDNN's offsets kernel, named for none, runs first)."""
    t = KinetoTrace()
    t.op("aten::cudnn_batch_norm", 0, 20, None, None,
         extra={"Input dims": [[32, 128, 28, 28], [128], [128], [128], [128], [], [], []], "Input type": []})
    t.kernel("cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)", 2, 100, 2)
    t.kernel("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(float)", 5, 110, 30)
    t.op("aten::cudnn_batch_norm_backward", 300, 30, None, None,
         extra={"Input dims": [[32, 128, 28, 28], [32, 128, 28, 28], [128]], "Input type": []})
    t.kernel("volta_hgemm_unknown_kernel", 305, 350, 40)  # fp16 by its name: the call takes the first named type
    result = match_runs(parse_trace(t.to_bytes()))
    runs = {r.op_name: r for r in result.runs}
    forward = runs["aten::cudnn_batch_norm"]
    assert forward.op["shape"] == [32 * 28 * 28, 128] and forward.op["dtype"] == "fp32"
    assert forward.kernel_count == 2 and forward.confidence == "medium"
    assert any("Input type not recorded: fp32" in n for n in forward.notes)
    assert runs["aten::cudnn_batch_norm_backward"].op["dtype"] == "fp16"
    assert result.unmodelled == []


def test_a_call_no_kernel_name_types_stays_unmatched() -> None:
    t = KinetoTrace()
    t.op("aten::cudnn_batch_norm", 0, 20, None, None,
         extra={"Input dims": [[32, 128, 28, 28], [128], [128], [128], [128], [], [], []], "Input type": []})
    t.kernel("cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)", 2, 100, 2)
    (missed,) = match_runs(parse_trace(t.to_bytes())).unmodelled  # a cuDNN helper: not sized by its launch
    assert "no Input type" in missed.reason and missed.category == "shapes not recorded"


def test_copies_fills_and_host_transfers_use_their_recorded_bytes() -> None:
    t = KinetoTrace()
    t.kernel("Memcpy DtoD (Device -> Device)", 0, 10, 5, cat="gpu_memcpy", extra={"bytes": 1 << 20})
    t.kernel("Memset (Device)", 1, 20, 2, cat="gpu_memset", extra={"bytes": 4096})
    t.kernel("Memcpy HtoD (Pinned -> Device)", 2, 30, 50, cat="gpu_memcpy", extra={"bytes": 1 << 20})
    t.kernel("Memcpy DtoH (Device -> Pageable)", 4, 85, 60, cat="gpu_memcpy", extra={"bytes": 1 << 20})
    t.kernel("Memcpy DtoD (Device -> Device)", 3, 90, 1, cat="gpu_memcpy")
    t.kernel("Memcpy PtoP (Device -> Device)", 5, 95, 3, cat="gpu_memcpy", extra={"bytes": 1 << 20})
    result = match_runs(parse_trace(t.to_bytes()))
    copy, fill, h2d, d2h = result.runs
    assert copy.op == {"kind": "reshape", "shape": [1 << 20], "new_shape": [1 << 20], "dtype": "int8",
                       "contiguous": False}
    assert fill.op["kind"] == "elementwise" and fill.op["inputs"] == 0 and fill.op["shape"] == [4096]
    assert h2d.op == {"kind": "hostcopy", "bytes": 1 << 20, "direction": "h2d", "pageable": False}
    assert d2h.op == {"kind": "hostcopy", "bytes": 1 << 20, "direction": "d2h", "pageable": True}
    assert (h2d.confidence, d2h.confidence) == ("high", "medium")
    assert {copy.source, fill.source, h2d.source, d2h.source} == {"memcpy/memset"}
    categories = {u.name: u.category for u in result.unmodelled}
    assert categories == {"Memcpy PtoP (Device -> Device)": "host transfer",
                          "Memcpy DtoD (Device -> Device)": "size not recorded"}


def test_a_host_copy_takes_its_bytes_over_the_devices_host_link() -> None:
    """PCIe 3.0 x16 (V100) vs NVLink-C2C (GH200): the same 64 MiB copy, bytes / link bandwidth + overhead."""
    from perfmodel.roofline import predict

    op = {"kind": "hostcopy", "bytes": 64 << 20, "direction": "h2d"}
    v100, gh200 = load_hardware("nvidia-v100-sxm2-32gb"), load_hardware("nvidia-gh200-96gb")
    slow, fast = predict(v100, op), predict(gh200, op)
    assert slow.bound == fast.bound == "interconnect"
    assert v100.interconnect is not None and v100.interconnect.host_link_bandwidth_bytes_per_s == 15.75e9
    assert (64 << 20) / 15.75e9 < slow.time_s < (64 << 20) / 15.75e9 * 1.5
    assert slow.time_s / fast.time_s > 20  # 450 GB/s vs 15.75 GB/s per direction


def test_kernels_recorded_with_zero_duration_make_no_run_to_compare() -> None:
    """Kineto rounds to 1 us: a fill of 0 us measured would be predicted infinitely slower (a calibration
    saw 1e6x on ResNet-50's FillFunctor kernels)."""
    t = KinetoTrace()
    t.kernel("Memset (Device)", 1, 20, 0, cat="gpu_memset", extra={"bytes": 4096})
    t.kernel("Memset (Device)", 2, 30, 2, cat="gpu_memset", extra={"bytes": 4096})
    result = match_runs(parse_trace(t.to_bytes()))
    (run,) = result.runs
    assert run.measured_time_s > 0
    (zero,) = result.unmodelled
    assert zero.category == "below timer resolution" and zero.time_s == 0


def test_an_elementwise_kernel_without_an_op_is_sized_by_grid_and_block() -> None:
    t = KinetoTrace()
    t.kernel(ADD, 0, 10, 20, extra={"grid": [100, 1, 1], "block": [128, 1, 1]})
    t.kernel("ampere_sgemm_128x64_nn", 1, 40, 30)
    result = match_runs(parse_trace(t.to_bytes()))
    run, gemm = result.runs
    assert run.op == {"kind": "elementwise", "shape": [100 * 128 * 4], "dtype": "fp32", "inputs": 2, "outputs": 1,
                      "flops_per_element": 1.0}
    assert (run.source, run.confidence) == ("grid/block", "medium")
    assert (gemm.source, gemm.confidence) == ("GEMM tile x grid", "low")  # K assumed: test_gemm_tile_grid.py


def test_an_op_that_cannot_be_built_falls_back_to_its_kernels_grid() -> None:
    t = KinetoTrace()
    t.op("aten::add", 0, 30, None, None)  # record_shapes=False
    t.kernel(ADD, 5, 10, 20, extra={"grid": [8, 1, 1], "block": [128, 1, 1]})
    (run,) = match_runs(parse_trace(t.to_bytes())).runs
    assert run.source == "grid/block" and run.op["shape"] == [8 * 512]


def test_a_rocprof_copy_kernel_is_sized_by_grid_and_block() -> None:
    result = match_runs(parse_trace(DATA / "vcopy__MI100__timestamps.csv"))
    assert result.unmodelled == []
    assert {(r.op["kind"], r.op["dtype"], r.source) for r in result.runs} == {("reshape", "fp64", "grid/block")}


def _distributed(world_size: int) -> bytes:
    t = KinetoTrace()
    t.op("c10d::allreduce_", 0, 100, [[], [], [], []], ["TensorList", "", "", "Scalar"])
    t.op("record_param_comms", 5, 90, [[], [], []], ["TensorList", "Scalar", "Scalar"])
    t.events.append({"ph": "X", "cat": "user_annotation", "name": "nccl:all_reduce", "pid": 100, "tid": 1,
                     "ts": 10, "dur": 80, "args": {"Input Dims": [[1024]], "Input type": ["float"]}})
    t.kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, ncclWorkElem)", 20, 150, 60)
    head = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": world_size},
            "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}]}
    return json.dumps({**head, "traceEvents": t.events}).encode()


def test_a_collective_annotation_takes_the_group_size_from_distributed_info() -> None:
    parsed = parse_trace(_distributed(4))
    assert (parsed.device_name, parsed.world_size) == ("NVIDIA A100-SXM4-80GB", 4)
    (run,) = match_runs(parsed).runs
    assert run.op == {"kind": "allreduce", "bytes": 4096.0, "devices": 4, "dtype": "fp32"}
    assert run.source == "collective metadata"


def test_a_single_rank_collective_is_unmodelled_with_its_category() -> None:
    result = match_runs(parse_trace(_distributed(1)))
    assert result.runs == []
    assert [u.category for u in result.unmodelled] == ["collective metadata missing"]


def test_head_metadata_reads_only_before_the_events() -> None:
    assert head_metadata(b'{"traceEvents": [{"name": "x", "args": {"world_size": 8}}]}') == (None, None)


def test_another_accelerators_events_are_device_time_with_their_kind() -> None:
    t = KinetoTrace()
    t.op("aten::add", 0, 30, [[64, 64], [64, 64], []], ["float", "float", "Scalar"])
    t.events.append({"ph": "X", "cat": "mtia_runtime", "name": "runFunction", "pid": 100, "tid": 1, "ts": 5,
                     "dur": 3, "args": {"correlation": 99}})
    t.events.append({"ph": "X", "cat": "mtia_ccp_events", "name": "add-dtype_Float", "pid": 9, "tid": 801,
                     "ts": 12, "dur": 7, "args": {"correlation": 99}})
    parsed = parse_trace(t.to_bytes())
    (record,) = parsed.kernels
    assert (record.category, record.device_kind, record.op_name) == ("device", "mtia", "aten::add")
    assert parsed.has_device_time and not parsed.warnings
    assert match_runs(parsed).runs[0].op["kind"] == "elementwise"


def test_a_cpu_only_profile_says_first_that_it_has_no_device_timing() -> None:
    parsed = parse_trace(DATA / "host_cpu_conv_train.pt.trace.json.gz")
    assert not parsed.has_device_time
    assert parsed.warnings[0].startswith("no device timing in this file")
    report = trace_report(load_hardware("intel-xeon-platinum-8480"), parsed, match_runs(parsed))
    text = format_trace_report(report)
    assert text.startswith("NO DEVICE TIMING") and "not kernel time" in text.splitlines()[0]


def test_real_resnet50_without_concrete_inputs_is_matched_by_shapes_and_links() -> None:
    """PyTorch 1.9, V100: convolutions, batch norm and their backwards; strides from the backward nodes."""
    parsed = parse_trace(RESNET)
    assert parsed.device_name == "Tesla V100-DGXS-32GB"
    result = match_runs(parsed)
    assert result.matched_time_s > 0.95 * result.total_kernel_time_s
    by_source = result.time_by_source()
    assert by_source["fwd/bwd link"] > 0.2 * result.total_kernel_time_s
    assert set(by_source) <= set(SOURCES)
    first = next(r for r in result.runs if r.op.get("kind") == "conv2d" and r.op["kernel_h"] == 7)
    assert (first.op["stride"], first.op["padding"], first.op["height"]) == (2, 3, 224)
    report = trace_report(load_hardware("nvidia-v100-sxm2-32gb"), parsed, result).to_json()
    shares = report["matched_share_by_source"]
    assert sum(shares.values()) + sum(report["unmodelled_share_by_category"].values()) == pytest.approx(1.0)


def test_real_sampled_rank_collectives_become_runs() -> None:
    parsed = parse_trace(SAMPLED_RANK)
    assert parsed.world_size == 128
    result = match_runs(parsed)
    nccl = [r for r in result.runs if r.source == "collective metadata"]
    assert {r.op["kind"] for r in nccl} == {"allreduce", "alltoall", "allgather"}
    assert {r.op["devices"] for r in nccl if r.op_name.startswith("nccl:")} == {128}
    assert sum(r.measured_time_s for r in nccl) > 0.5 * result.total_kernel_time_s
    assert all(any("SendRecv" in n for n in r.kernel_names) for r in nccl if r.op["kind"] == "alltoall")




@pytest.mark.parametrize(("name", "math"), [
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4>(Params)", "tf32"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw", "tf32"),
    ("ampere_sgemm_128x64_nn", None), ("cutlass_80_tensorop_s16816gemm_bf16_128x64_32x3_tn_align8", None),
    ("cutlass_80_tensorop_s1688gemm_f16_64x64_32x4_nt_align8", None),
    ("sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x64", "fp8"),
])
def test_library_kernel_names_say_their_math(name: str, math: str | None) -> None:
    assert math_dtype(name) == math


def test_an_fp32_gemm_on_a_cutlass_tf32_kernel_is_predicted_on_tensor_cores() -> None:
    t = KinetoTrace()
    t.op("aten::mm", 0, 30, [[4096, 1024], [1024, 4096]], ["float", "float"])
    t.kernel("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4>(Params)", 5, 10, 400)
    (run,) = match_runs(parse_trace(t.to_bytes())).runs
    assert run.op["compute_dtype"] == "tf32" and "tf32 math, from its kernel names" in run.notes


def test_a_fused_optimizer_kernel_is_sized_by_its_chunks() -> None:
    """apex/PyTorch multi_tensor_apply: one 65,536-element chunk per block; Adam reads 4 lists, writes 3."""
    t = KinetoTrace()
    t.kernel("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float>(int, "
             "int volatile*, TensorListMetadata<4>, AdamFunctor<float>, float)", 0, 10, 400,
             extra={"grid": [320, 1, 1], "block": [512, 1, 1]})
    (run,) = match_runs(parse_trace(t.to_bytes())).runs
    assert run.op == {"kind": "elementwise", "shape": [320 * 65536], "dtype": "fp32", "inputs": 4, "outputs": 3,
                      "flops_per_element": 8.0}
    assert (run.source, run.confidence) == ("grid/block", "low")


@pytest.mark.parametrize(("name", "inputs", "outputs"), [
    ("void addition_kernel<float>(float*, float const*, float const*, int, int)", 2, 1),
    ("multiply_kernel(float*, float const*, float const*, int, int)", 2, 1),
])
def test_a_plain_hip_kernel_named_for_its_op_reads_its_const_pointers(name: str, inputs: int, outputs: int) -> None:
    t = KinetoTrace()
    t.kernel(name, 0, 10, 10, extra={"grid": [16384, 1, 1], "block": [64, 1, 1]})
    (run,) = match_runs(parse_trace(t.to_bytes())).runs
    assert run.op == {"kind": "elementwise", "shape": [16384 * 64], "dtype": "fp32", "inputs": inputs,
                      "outputs": outputs, "flops_per_element": 1.0}


def test_a_plain_kernel_of_another_purpose_is_sized_by_its_launch_only() -> None:
    """Not a streaming op by name: no grid/block op; its launch alone gives a low-confidence one, the type of the
    array it reads (float const*), its int* bins written."""
    t = KinetoTrace()
    t.kernel("histogram_kernel(int*, float const*, int)", 0, 10, 10)
    (run,) = match_runs(parse_trace(t.to_bytes())).runs
    assert (run.source, run.confidence) == ("launch geometry", "low")
    assert run.op == {"kind": "elementwise", "shape": [512], "dtype": "fp32", "inputs": 1, "outputs": 1,
                      "flops_per_element": 0.0}
    t = KinetoTrace()
    t.kernel("histogram_kernel(int*, float const*, int)", 0, 10, 10, extra={"grid": None, "block": None})
    result = match_runs(parse_trace(t.to_bytes()))
    assert result.runs == [] and result.unmodelled[0].category == "grid not recorded"


@pytest.mark.parametrize(("name", "region"), [
    ("__omp_offloading_32_2f3c6__QMnorm_modPnorm_l26", ("norm_mod::norm", 26)),  # flang: module norm_mod
    ("__omp_offloading_10302_2d86c1c_main_l19", ("main", 19)),  # clang, C
    ("__omp_offloading_fd00_5a2f3c__Z4initPdi_l10", ("_Z4initPdi", 10)),  # clang, C++ (kept mangled)
    ("__omp_offloading_32_2f3c6__QPsmooth_l3", ("smooth", 3)),  # flang, a procedure outside modules
    ("nvkernel_main_F1L88_2", ("main", 88)),  # NVHPC
    ("vecCopy(double*, double*, double*, int, int)", None), ("omp_offloading_kernel", None),
])
def test_an_offload_region_names_its_function_and_source_line(name: str, region: tuple[str, int] | None) -> None:
    assert offload_region(name) == region


def test_an_offload_region_is_a_lower_bound_from_its_launch() -> None:
    """A target region named for a GEMM is not a library GEMM: no tile, no family guess. Its launch (the runtime's
    team count, capped and strided over) is a lower bound of its loop: a streaming op, confidence low, that says
    so; without a launch it stays unmatched with where it is in the source."""
    from perfmodel.traces.matching import OFFLOAD_CATEGORY

    t = KinetoTrace()
    t.kernel("__omp_offloading_fd00_2a_matmul_l30", 0, 10, 10, extra={"grid": [912, 1, 1], "block": [256, 1, 1]})
    (run,) = match_runs(parse_trace(t.to_bytes())).runs
    assert (run.source, run.confidence, run.op["kind"], run.op["shape"]) == ("launch geometry", "low",
                                                                              "elementwise", [233472])
    assert "offload region matmul (line 30)" in run.notes[0] and "lower bound" in run.notes[0]
    t = KinetoTrace()
    t.kernel("__omp_offloading_fd00_2a_matmul_l30", 0, 10, 10, extra={"grid": None, "block": None})
    result = match_runs(parse_trace(t.to_bytes()))
    (left,) = result.unmodelled
    assert result.runs == [] and left.category == OFFLOAD_CATEGORY
    assert "matmul at source line 30" in left.reason and "gemm" not in left.reason


def test_stored_runs_carry_their_match_source_and_confidence() -> None:
    from perfmodel.traces.ingest import runs_and_kernels

    parsed = parse_trace(_old_conv_trace().to_bytes())
    runs, _ = runs_and_kernels(load_hardware("nvidia-v100-sxm2-32gb"), parsed, match_runs(parsed), "t", "f.json")
    tags = {(r.tags["op_name"], r.tags["match_source"], r.tags["confidence"]) for r in runs}
    assert ("aten::cudnn_convolution", "fwd/bwd link", "medium") in tags
    assert ("aten::cudnn_convolution_backward", "framework shapes", "high") in tags


def test_a_hostile_head_gives_no_metadata() -> None:
    """A head repeating the keys with no closing brace (the pattern is bounded, so this stays linear)."""
    assert head_metadata(b'{"deviceProperties": [{' * 3000 + b'"distributedInfo": {' * 3000) == (None, None)


@pytest.mark.parametrize(("name", "tile"), [
    ("ampere_sgemm_128x64_nn", (128, 64)), ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>",
                                            (256, 64)),
    ("cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_f32_f16_f16_64x256x128_1x1x1_0_tnn_align4_1sm", (64, 256)),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16", (128, 128)),
    ("void at::native::vectorized_elementwise_kernel<4, float>", None),
])
def test_a_gemm_kernel_names_its_block_tile(name: str, tile: tuple[int, int] | None) -> None:
    assert gemm_tile(name) == tile


def test_an_unshaped_gemm_kernel_naming_no_data_type_says_what_its_tile_and_grid_bound() -> None:
    """A GEMM kernel with a tile but no data type in its name (a typed one is sized: test_gemm_tile_grid.py)."""
    t = KinetoTrace()
    t.kernel("cutlass_tensorop_gemm_128x64_nn_kernel", 0, 10, 20)
    (unmodelled,) = match_runs(parse_trace(t.to_bytes())).unmodelled
    assert "tile 128x64 x grid (4, 1, 1): M·N <= 32,768; K is not in the file" in unmodelled.reason
    assert unmodelled.category == "shapes not recorded"


def test_a_device_activity_named_for_its_dtype_is_not_a_dtype_problem() -> None:
    """MTIA names its activities '<op>-dtype_Float': an unmodelled op, not an unknown dtype."""
    assert reason_category("mtia activity 'log2-dtype_Double': op aten::log2 is not modelled") == "op not modelled"
    assert reason_category("aten::cat: dtype 'TensorList' has no perfmodel equivalent") == "dtype not modelled"


def test_a_vector_norm_is_a_sum_over_its_dims() -> None:
    t = KinetoTrace()
    t.op("aten::linalg_vector_norm", 0, 30, [[64, 135], [], [], [], []], ["float", "Scalar", "", "Scalar", ""],
         ["", "2", "[-1]", "False", ""])
    t.kernel("void at::native::reduce_kernel<512, 1>", 5, 10, 20)
    (run,) = match_runs(parse_trace(t.to_bytes())).runs
    assert run.op == {"kind": "reduce", "shape": [64, 135], "axes": [1], "dtype": "fp32", "op": "sum"}


def test_a_kernel_repeated_without_its_op_takes_the_op_of_its_matched_launch() -> None:
    """Another iteration's launch of the same GEMM (name, grid, block) with no shapes: the matched one's op."""
    t = KinetoTrace()
    t.op("aten::mm", 0, 30, [[256, 512], [512, 128]], ["float", "float"])
    grid = {"grid": [2, 2, 1], "block": [128, 1, 1]}
    t.kernel("ampere_sgemm_128x64_nn", 5, 10, 20, extra=grid)
    t.op("aten::mm", 100, 30, None, None)  # record_shapes off for this call
    t.kernel("ampere_sgemm_128x64_nn", 105, 110, 22, extra=grid)
    t.kernel("ampere_sgemm_128x64_nn", 140, 150, 9, extra={"grid": [4, 2, 1], "block": [128, 1, 1]})
    result = match_runs(parse_trace(t.to_bytes()))
    shaped, repeated, other_grid = result.runs
    assert repeated.op == shaped.op and (repeated.source, repeated.confidence) == ("repeated kernel", "low")
    assert "assumed repeated" in repeated.notes[-1] and repeated.measured_time_s == pytest.approx(22e-6)
    # another grid: another problem, sized by its tile and grid with K assumed (the last source)
    assert other_grid.source == "GEMM tile x grid" and other_grid.op["m"] == 512
    assert result.kernel_sources[1] == "repeated kernel"


def test_a_conv_call_running_several_algorithms_is_flagged_as_autotuning() -> None:
    """cuDNN benchmark mode's first call runs every candidate algorithm: the run's time is the sum of the trials."""
    t = _old_conv_trace()
    for offset, name in enumerate(("void explicit_convolve_sgemm<float, int, 1024, 5, 5, 3, 3, 3, 0, false>(int)",
                                   "void fft2d_r2c_32x32<float, false, 1u, true>(float2*)",
                                   "volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1")):
        t.kernel(name, 20 + offset, 170 + 10 * offset, 5)
    forward = next(r for r in match_runs(parse_trace(t.to_bytes())).runs if r.op_name == "aten::cudnn_convolution")
    assert forward.confidence == "low" and "algorithm" not in forward.op
    assert any("4 convolution algorithms in one call" in n and "benchmark mode" in n for n in forward.notes)
    plain = next(r for r in match_runs(parse_trace(_old_conv_trace().to_bytes())).runs
                 if r.op_name == "aten::cudnn_convolution_backward")
    assert not any("benchmark mode" in n for n in plain.notes)  # dgrad + wgrad engines: one family, no trials


@pytest.mark.parametrize(("dtype", "matched"), [("float", True), ("Scalar", False)])
def test_a_fill_of_a_zero_dim_tensor_writes_one_element(dtype: str, matched: bool) -> None:
    """``torch.ones_like(loss)``: ``fill_`` of a 0-dim tensor (dims ``[]``, a tensor dtype) is one element; ``[]``
    typed ``Scalar`` is no tensor at all and stays unbuildable."""
    t = KinetoTrace()
    external = t.op("aten::fill_", 0, 20, [[], []], [dtype, "Scalar"], ["", "1."])
    t.kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
             "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
             5, 10, 3, external=external)
    runs = match_runs(parse_trace(t.to_bytes())).runs
    assert [r.op["shape"] for r in runs if r.source == "framework shapes"] == ([[1]] if matched else [])
