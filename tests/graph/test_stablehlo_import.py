"""StableHLO import: FLOPs against XLA's own count for JAX lowerings (tests/data/stablehlo, written by
benchmarks/stablehlo_golden.py), weights, unsupported ops listed, bad text named."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from perfmodel.graph.estimate import estimate
from perfmodel.graph.ir import GraphError
from perfmodel.graph.stablehlo_import import import_stablehlo

DATA = Path(__file__).resolve().parents[1] / "data" / "stablehlo"
GOLDEN = json.loads((DATA / "golden.json").read_text())
H100 = "nvidia-h100-sxm5-80gb"
# GEMMs and element-wise ops count as XLA counts them; a convolution's window is counted whole, XLA leaves
# out the taps that fall on padding (SAME 3x3 on 56x56: +1.6 %, on 32x32 with groups: +4.3 %)
TOLERANCE = {"mlp_bf16": 0.001, "attention_fp16": 0.001, "layernorm_linear_fp32": 0.001, "conv_relu_fp32": 0.02,
             "conv_nhwc_grouped_fp32": 0.05}


def flops_of(name: str) -> tuple[float, int]:
    graph = import_stablehlo(DATA / f"{name}.mlir")
    result = estimate(graph, H100, fusion=False)
    return float(result.batch.flops[result.index].sum()), graph.params


@pytest.mark.parametrize("name", sorted(TOLERANCE))
def test_flops_match_xla_cost_analysis(name: str) -> None:
    flops, _ = flops_of(name)
    xla = GOLDEN[name]["xla_flops"]
    assert abs(flops / xla - 1.0) <= TOLERANCE[name], (flops, xla)


def test_weights_are_main_arguments_read_as_gemm_or_kernel_operands() -> None:
    assert flops_of("mlp_bf16")[1] == 1024 * 4096 + 4096 * 1024
    assert flops_of("attention_fp16")[1] == 0  # K and V are batched operands: activations
    assert flops_of("conv_relu_fp32")[1] == 64 * 64 * 9 + 128 * 64 * 9
    assert flops_of("layernorm_linear_fp32")[1] == 768 * 3072  # the scale g is read element-wise


def test_the_convolution_layouts_and_groups_are_read() -> None:
    graph = import_stablehlo(DATA / "conv_nhwc_grouped_fp32.mlir")
    conv = next(n.op for n in graph.nodes if n.source_op == "stablehlo.convolution")
    assert conv is not None
    assert (conv["layout"], conv["groups"], conv["in_channels"], conv["out_channels"]) == ("nhwc", 4, 64, 64)
    assert (conv["height"], conv["width"], conv["kernel_h"], conv["padding"]) == (32, 32, 3, 1)


def test_a_counted_loop_is_unrolled() -> None:
    # jax.lax.fori_loop(0, 4, tanh(h @ w)): XLA's cost analysis counts a while body once, the loop runs it 4 times
    graph = import_stablehlo(DATA / "fori_loop_fp32.mlir")
    (loop,) = graph.meta["loops"]
    assert (loop["loop"], loop["line"], loop["iterations"], loop["trip_count"], loop["body_nodes"]) == (
        "%0", 4, 4, "constant bound", 3) and not graph.unsupported()
    flops, _ = flops_of("fori_loop_fp32")
    assert flops == pytest.approx(4 * GOLDEN["fori_loop_fp32"]["xla_flops"], rel=0.01)


def test_a_loop_without_a_constant_count_is_listed_and_the_rest_still_estimates() -> None:
    """Twelfth pass: the body is costed once by default (the time per iteration), listed with the count's source;
    the user's count for ``%0`` (or ``*``) unrolls it that many times (tests/graph/test_loop_trip_counts.py)."""
    text = (DATA / "fori_loop_fp32.mlir").read_text().replace("compare LT, %iterArg_0, %c_2",
                                                              "compare LT, %iterArg_0, %unknown_bound")
    graph = import_stablehlo(text)
    assert not graph.unsupported()
    (loop,) = graph.meta["loops"]
    assert (loop["loop"], loop["iterations"], loop["trip_count"]) == ("%0", 1, "default")
    assert "per iteration" in loop["note"] and "--trip-count" in loop["note"]
    assert [n.op["kind"] for n in import_stablehlo(text, trip_counts={"%0": 3}).nodes
            if n.op and n.source_op == "stablehlo.dot_general"] == ["matmul"] * 3
    assert estimate(graph, H100).step_time_s > 0


def test_bad_text_names_the_line_and_field() -> None:
    with pytest.raises(GraphError, match=r"no func\.func"):
        import_stablehlo("module {}")
    dynamic = ("func.func public @main(%arg0: tensor<?x64xf32>) -> tensor<?x64xf32> {\n"
               "  %0 = stablehlo.add %arg0, %arg0 : tensor<?x64xf32>\n  return %0 : tensor<?x64xf32>\n}\n")
    with pytest.raises(GraphError, match=r"dynamic dimension '\?'"):
        import_stablehlo(dynamic)
    odd = ("func.func public @main(%arg0: tensor<8xcomplex<f32>>) -> tensor<8xf32> {\n  return %arg0\n}\n")
    with pytest.raises(GraphError, match="element type"):
        import_stablehlo(odd)


def test_a_custom_call_falls_back_with_its_reason() -> None:
    text = ("func.func public @main(%arg0: tensor<64x64xf32>) -> tensor<64x64xf32> {\n"
            "  %0 = stablehlo.custom_call @Sharding(%arg0) {backend_config = \"\"} : (tensor<64x64xf32>) -> "
            "tensor<64x64xf32>\n"
            "  %1 = stablehlo.dot_general %0, %arg0, contracting_dims = [1] x [0] : (tensor<64x64xf32>, "
            "tensor<64x64xf32>) -> tensor<64x64xf32>\n  return %1 : tensor<64x64xf32>\n}\n")
    graph = import_stablehlo(text)
    assert [n.source_op for n in graph.nodes] == ["stablehlo.custom_call", "stablehlo.dot_general"]
    assert graph.nodes[0].op is None and "custom_call is not modelled" in (graph.nodes[0].unsupported or "")
    assert graph.nodes[1].op == {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "fp32", "batch": 1}


def test_a_fresh_jax_lowering_matches_xla() -> None:
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    lowered = jax.jit(lambda a, b: jnp.einsum("bmk,bkn->bmn", a, b)).lower(
        jnp.ones((4, 128, 256), jnp.bfloat16), jnp.ones((4, 256, 64), jnp.bfloat16))
    graph = import_stablehlo(lowered.as_text())
    result = estimate(graph, H100, fusion=False)
    xla = (lowered.cost_analysis() or {})["flops"]
    assert float(result.batch.flops[result.index].sum()) == xla == 2 * 4 * 128 * 256 * 64


def test_a_transposed_convolution_is_a_gemm_col2im_and_write() -> None:
    """jax.lax.conv_transpose (stride 2, SAME, NHWC, 3x3, 16 -> 8 channels on 2x32x32) lowers to a convolution
    with lhs_dilate = [2, 2] (was: listed as unmodelled). As the libraries run it: GEMM x[2·32·32, 16] x
    w[16, 8·9] (2·2048·16·72 FLOPs, every tap), col2im and the output write; XLA's count leaves out the taps on
    the dilation holes at the border (4,620,800): +2.1 %."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    lowered = jax.jit(lambda x, w: jax.lax.conv_transpose(
        x, w, strides=(2, 2), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))).lower(
        jnp.ones((2, 32, 32, 16), jnp.float32), jnp.ones((3, 3, 16, 8), jnp.float32))
    graph = import_stablehlo(lowered.as_text())
    convs = [n for n in graph.nodes if n.source_op == "stablehlo.convolution"]
    assert [n.op["kind"] for n in convs if n.op] == ["matmul", "elementwise", "elementwise"]
    assert not [n for n in graph.nodes if n.unsupported]
    assert convs[0].op is not None and (convs[0].op["m"], convs[0].op["k"], convs[0].op["n"]) == (2048, 16, 72)
    assert convs[2].op is not None and convs[2].op["shape"] == [2, 64, 64, 8]
    result = estimate(graph, H100, fusion=False)
    gemm = float(result.batch.flops[result.index][graph.nodes.index(convs[0])])
    assert gemm == 2 * 2048 * 16 * 72
    xla = (lowered.cost_analysis() or {})["flops"]
    assert gemm / xla - 1.0 == pytest.approx(0.021, abs=0.002)


def test_truncated_text_is_an_error_or_an_estimate_never_a_crash() -> None:
    """Every 13th prefix of the MLP lowering (and the one that cut a constant before its type, which raised an
    IndexError before): a GraphError / ValueError naming the problem, or a graph that estimates."""
    text = (DATA / "mlp_bf16.mlir").read_text()
    for end in [616, *range(0, len(text), 13)]:
        with contextlib.suppress(ValueError):  # GraphError and OpError are ValueErrors
            estimate(import_stablehlo(text[:end]), H100, fusion=False, check_memory=False)


def test_a_live_jax_lowering_matches_xlas_count() -> None:
    """jax (a dev dependency, CPU wheel) lowers a GEMM + bias here and now, not from the stored files: the imported
    FLOPs equal XLA's cost analysis (2·64·128·256 for the dot, one per element for the add)."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    lowered = jax.jit(lambda x, w: x @ w + 1.0).lower(jnp.ones((64, 128), jnp.float32),
                                                          jnp.ones((128, 256), jnp.float32))
    graph = import_stablehlo(lowered.as_text())
    result = estimate(graph, H100, fusion=False)
    flops = float(result.batch.flops[result.index].sum())
    cost = lowered.cost_analysis()
    xla = (cost[0] if isinstance(cost, list) else cost)["flops"]
    assert flops == xla == 2 * 64 * 128 * 256 + 64 * 256
    assert graph.params == 128 * 256  # main's second argument, read as the GEMM's B
