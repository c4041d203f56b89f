"""Precision advice: per-op gains of fp8/int8/int4 (weight-only and full) with the quantize ops they add."""

from __future__ import annotations

import pytest

from perfmodel.advice.precision import SCHEMES, precision_advice, variant
from perfmodel.graph.ir import Graph, Node
from perfmodel.roofline import predict_many

H100 = "nvidia-h100-sxm5-80gb"
A100 = "nvidia-a100-sxm4-80gb"


def layer_graph(rows: int) -> Graph:
    """Two projections of one layer (``rows`` tokens, 4096 -> 4096, bf16), a conv, and an op without weights."""
    g = Graph("layer")
    proj = {"kind": "matmul", "m": rows, "n": 4096, "k": 4096, "dtype": "bf16", "b_batched": False}
    for name in ("q", "o"):
        g.add(Node(name, dict(proj), layer="layers.0", params=4096 * 4096, weight_bytes=2.0 * 4096 * 4096))
    g.add(Node("act", {"kind": "elementwise", "shape": [rows, 4096], "dtype": "bf16"}, layer="layers.0"))
    conv = {"kind": "conv2d", "batch": 8, "in_channels": 256, "out_channels": 256, "height": 56, "width": 56,
            "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "bf16"}
    g.add(Node("conv", conv, layer="stem", params=256 * 256 * 9, weight_bytes=2.0 * 256 * 256 * 9))
    return g


def test_memory_bound_gemv_gains_from_weight_only_in_proportion_to_the_bytes() -> None:
    report = precision_advice(layer_graph(rows=1), H100)
    q = next(r for r in report.ops if r["node"] == "q")
    assert {r["node"] for r in report.ops} == {"q", "o", "conv"}  # 'act' holds no weights
    int8, int4 = q["schemes"]["int8 weight-only"], q["schemes"]["int4 weight-only"]
    assert int8["quantize_time_s"] == 0.0 and int8["gain_s"] > 0
    assert int4["time_s"] < int8["time_s"] < q["base_time_s"]
    # weights dominate a 1-token GEMV: halving them cannot more than halve the time, and must help
    assert 1.0 < q["base_time_s"] / int8["time_s"] <= 2.0 + 1e-9
    assert q["best"] in ("int4 weight-only", "int4 full")


def test_full_quantization_counts_its_quantize_op() -> None:
    report = precision_advice(layer_graph(rows=8192), H100)
    q = next(r for r in report.ops if r["node"] == "q")
    full = q["schemes"]["fp8 full"]
    quantized, quantize, _ = variant(layer_graph(8192).nodes[0].op or {}, "fp8 full")
    assert quantized is not None and (quantized["dtype"], quantized["out_dtype"]) == ("fp8_e4m3", "bf16")
    assert quantize == {"kind": "quantize", "shape": [8192, 4096], "from_dtype": "bf16", "to_dtype": "fp8_e4m3",
                        "granularity": "channel"}
    alone = predict_many(H100, [quantize], space="full").time_s[0]
    assert full["quantize_time_s"] == pytest.approx(alone)
    assert full["time_s"] == pytest.approx(full["gemm_time_s"] + alone)
    assert full["gain_s"] > 0  # compute-bound: the fp8 matrix path is twice bf16's on H100
    assert q["schemes"]["fp8 weight-only"]["gain_s"] < full["gain_s"]


def test_schemes_the_device_lacks_say_where_they_run_and_convs_have_no_weight_only() -> None:
    report = precision_advice(layer_graph(rows=8192), A100)
    q = next(r for r in report.ops if r["node"] == "q")
    assert any("fp8" in n for n in q["schemes"]["fp8 full"]["notes"])  # A100 has no fp8 tensor path
    conv = next(r for r in report.ops if r["node"] == "conv")
    assert conv["schemes"]["int8 weight-only"]["applies"] is False
    assert "matmul" in conv["schemes"]["int8 weight-only"]["reason"]
    assert conv["schemes"]["int8 full"]["applies"] is True


def test_layers_and_totals_add_the_op_gains() -> None:
    report = precision_advice(layer_graph(rows=64), H100)
    layer = next(x for x in report.layers if x["layer"] == "layers.0")
    assert layer["ops"] == 2
    for scheme in SCHEMES:
        ops = [r["schemes"][scheme] for r in report.ops if r["schemes"][scheme]["applies"]]
        assert report.totals[scheme]["gain_s"] == pytest.approx(sum(v["gain_s"] for v in ops))
        assert report.totals[scheme]["graph_time_s"] == pytest.approx(report.graph_time_s
                                                                      - report.totals[scheme]["gain_s"])
