"""Ops: built from dicts with precise errors; FLOPs and bytes checked by hand and by property."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import Op, OpError, make_op
from perfmodel.ops import op_kinds

EXAMPLES: dict[str, dict[str, Any]] = {
    "matmul": {"kind": "matmul", "m": 128, "n": 256, "k": 64, "dtype": "bf16", "batch": 2,
               "bias": True, "weight_dtype": "int4", "group_size": 32, "pass": "forward_backward"},
    "conv2d": {"kind": "conv2d", "batch": 2, "in_channels": 8, "out_channels": 16, "height": 14,
               "width": 12, "kernel_h": 3, "kernel_w": 3, "stride": 2, "padding": 1, "groups": 2,
               "dtype": "fp16", "layout": "nhwc"},
    "attention": {"kind": "attention", "batch": 1, "heads": 8, "kv_heads": 2, "seq_q": 64,
                  "seq_kv": 128, "head_dim": 64, "head_dim_v": 32, "causal": True, "dtype": "bf16",
                  "implementation": "materialized"},
    "elementwise": {"kind": "elementwise", "shape": [4, 1024], "dtype": "fp32", "inputs": 2,
                    "outputs": 1, "flops_per_element": 3.0, "transcendentals_per_element": 1.0,
                    "vector_width": 1},
    "reduce": {"kind": "reduce", "shape": [8, 16, 32], "axes": [-1, 1], "dtype": "fp32", "op": "max"},
    "transpose": {"kind": "transpose", "shape": [2, 3, 4], "perm": [2, 0, 1], "dtype": "fp16"},
    "reshape": {"kind": "reshape", "shape": [2, 12], "new_shape": [4, 6], "dtype": "fp16",
                "contiguous": False},
    "gather": {"kind": "gather", "table_shape": [1000, 64], "num_indices": 17, "dtype": "fp32",
               "index_dtype": "int32"},
    "embedding": {"kind": "embedding", "table_shape": [50000, 24], "num_indices": 10, "dtype": "fp16"},
    "embedding_bag": {"kind": "embedding_bag", "num_indices": 300, "embedding_dim": 64, "num_bags": 20,
                      "dtype": "fp16", "weighted": True},
    "scatter": {"kind": "scatter", "table_shape": [100, 8], "num_indices": 5, "dtype": "fp32",
                "reduce": "add"},
    "layernorm": {"kind": "layernorm", "shape": [16, 768], "dtype": "bf16", "pass": "backward"},
    "rmsnorm": {"kind": "rmsnorm", "shape": [16, 4096], "dtype": "bf16"},
    "batchnorm": {"kind": "batchnorm", "shape": [32, 7, 7, 64], "dtype": "fp32", "training": True},
    "softmax": {"kind": "softmax", "shape": [8, 128, 128], "dtype": "fp16"},
    "quantize": {"kind": "quantize", "shape": [64, 256], "from_dtype": "bf16", "to_dtype": "int8",
                 "granularity": "group", "group_size": 64},
    "dequantize": {"kind": "dequantize", "shape": [64, 256], "from_dtype": "int4", "to_dtype": "fp16",
                   "granularity": "channel", "scale_dtype": "fp16"},
    "allreduce": {"kind": "allreduce", "bytes": 1e6, "devices": 8, "algorithm": "ring"},
    "allgather": {"kind": "allgather", "bytes": 2e6, "devices": 4, "devices_per_node": 4},
    "reducescatter": {"kind": "reducescatter", "bytes": 4e6, "devices": 16, "dtype": "fp32"},
    "alltoall": {"kind": "alltoall", "bytes": 1e5, "devices": 2, "algorithm": "tree"},
    "sendrecv": {"kind": "sendrecv", "bytes": 3e6, "devices_per_node": 1},
    "hostcopy": {"kind": "hostcopy", "bytes": 3e6, "direction": "d2h", "pageable": True},
}


def test_examples_cover_every_kind() -> None:
    assert sorted(EXAMPLES) == op_kinds()


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_build_and_round_trip(kind: str) -> None:
    op = make_op(EXAMPLES[kind])
    assert isinstance(op, Op)
    assert op.kind == kind
    data = op.to_dict()
    assert data["kind"] == kind
    for key, value in EXAMPLES[kind].items():
        if key in data:
            assert data[key] == value or make_op({**EXAMPLES[kind], key: data[key]}) == op
    again = make_op(json.loads(json.dumps(data)))  # JSON-safe and lossless
    assert again == op
    assert again.to_dict() == data
    assert make_op(op) is op


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_flops_and_bytes_are_finite_and_consistent(kind: str) -> None:
    op = make_op(EXAMPLES[kind])
    by_engine = op.flops_by_engine()
    assert set(by_engine) == {"matrix", "vector", "special"}
    assert all(v >= 0 for v in by_engine.values())
    assert op.flops == pytest.approx(sum(by_engine.values()))
    roles = op.bytes_by_role()
    assert all(v > 0 for v in roles.values())
    assert op.bytes == pytest.approx(sum(roles.values()))
    assert op.bytes > 0
    assert all(v > 0 for v in op.loop_dims().values())


# --- errors -------------------------------------------------------------------------------------

MM = {"kind": "matmul", "m": 8, "n": 8, "k": 8, "dtype": "bf16"}
CONV = {"kind": "conv2d", "batch": 1, "in_channels": 4, "out_channels": 8, "height": 8, "width": 8,
        "kernel_h": 3, "kernel_w": 3, "dtype": "fp32"}
ATTN = {"kind": "attention", "batch": 1, "heads": 8, "seq_q": 16, "seq_kv": 16, "head_dim": 64,
        "dtype": "bf16"}


def _without(data: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != key}


@pytest.mark.parametrize(
    ("data", "kind", "field", "reason"),
    [
        pytest.param(_without(MM, "k"), "matmul", "k", "missing", id="missing-field"),
        pytest.param({**MM, "tile": 4}, "matmul", "tile", "unknown field", id="unknown-field"),
        pytest.param({**MM, "m": "abc"}, "matmul", "m", "integer", id="wrong-type-str"),
        pytest.param({**MM, "m": 1.5}, "matmul", "m", "integer", id="wrong-type-float"),
        pytest.param({**MM, "m": True}, "matmul", "m", "integer", id="wrong-type-bool"),
        pytest.param({**MM, "bias": "maybe"}, "matmul", "bias", "true/false", id="wrong-type-bool-field"),
        pytest.param({**MM, "pass": "sideways"}, "matmul", "pass", "forward", id="bad-pass"),
        pytest.param({**MM, "m": 0}, "matmul", "m", "> 0", id="zero-dim"),
        pytest.param({**MM, "k": -4}, "matmul", "k", "> 0", id="negative-dim"),
        pytest.param({**MM, "dtype": "fp7"}, "matmul", "dtype", "unknown dtype", id="unknown-dtype"),
        pytest.param({**MM, "weight_dtype": "int3"}, "matmul", "weight_dtype", "unknown dtype",
                     id="unknown-weight-dtype"),
        pytest.param({"kind": "conv3d"}, "conv3d", "kind", "unknown op kind", id="unknown-kind"),
        pytest.param({"m": 1}, "?", "kind", "missing", id="no-kind"),
        pytest.param({"kind": "reshape", "shape": [2, 3], "new_shape": [5], "dtype": "fp32"},
                     "reshape", "new_shape", "elements", id="impossible-reshape"),
        pytest.param({**CONV, "kernel_h": 11}, "conv2d", "kernel_h", "larger", id="kernel-too-tall"),
        pytest.param({**CONV, "kernel_h": 11, "padding": 1}, "conv2d", "kernel_h", "larger",
                     id="kernel-too-tall-padded"),
        pytest.param({**CONV, "kernel_w": 11}, "conv2d", "kernel_w", "larger", id="kernel-too-wide"),
        pytest.param({**CONV, "groups": 3}, "conv2d", "groups", "divide", id="groups-not-dividing"),
        pytest.param({**CONV, "stride": 0}, "conv2d", "stride", "> 0", id="zero-stride"),
        pytest.param({**CONV, "padding": -1}, "conv2d", "padding", ">= 0", id="negative-padding"),
        pytest.param({**CONV, "stride_w": 0}, "conv2d", "stride_w", "> 0", id="zero-stride-w"),
        pytest.param({**CONV, "dilation_w": 0}, "conv2d", "dilation_w", "> 0", id="zero-dilation-w"),
        pytest.param({**CONV, "padding_w": -1}, "conv2d", "padding_w", ">= 0", id="negative-padding-w"),
        pytest.param({**CONV, "kernel_h": 7, "kernel_w": 7, "padding": 3, "algorithm": "winograd_nonfused"},
                     "conv2d", "algorithm", "3x3 or 5x5", id="nonfused-winograd-7x7"),
        pytest.param({**CONV, "stride": 2, "algorithm": "winograd_nonfused"}, "conv2d", "algorithm", "stride 1",
                     id="nonfused-winograd-strided"),
        pytest.param({**CONV, "stride": 2, "algorithm": "fft"}, "conv2d", "algorithm", "stride 1", id="fft-strided"),
        pytest.param({**CONV, "height": 300, "width": 300, "algorithm": "fft"}, "conv2d", "algorithm", "256",
                     id="fft-map-too-large"),
        pytest.param({**CONV, "height": 64, "width": 64, "kernel_h": 33, "kernel_w": 33, "algorithm": "fft_tiling"},
                     "conv2d", "algorithm", "smaller than its 32", id="fft-tiling-filter-too-large"),
        pytest.param({**ATTN, "kv_heads": 3}, "attention", "kv_heads", "divide", id="kv-heads-not-dividing"),
        pytest.param({**ATTN, "kv_heads": 0}, "attention", "kv_heads", "", id="zero-kv-heads"),
        pytest.param({**ATTN, "heads": 0}, "attention", "heads", "> 0", id="zero-heads"),
        pytest.param({**ATTN, "implementation": "magic"}, "attention", "implementation", "flash",
                     id="bad-implementation"),
        pytest.param({"kind": "transpose", "shape": [2, 3], "perm": [0, 0], "dtype": "fp32"},
                     "transpose", "perm", "permutation", id="perm-repeats"),
        pytest.param({"kind": "transpose", "shape": [2, 3], "perm": [0, 1, 2], "dtype": "fp32"},
                     "transpose", "perm", "permutation", id="perm-too-long"),
        pytest.param({"kind": "elementwise", "shape": [2, 0], "dtype": "fp32"}, "elementwise", "shape",
                     "> 0", id="zero-shape-dim"),
        pytest.param({"kind": "elementwise", "shape": 5, "dtype": "fp32"}, "elementwise", "shape",
                     "list", id="shape-not-a-list"),
        pytest.param({"kind": "reduce", "shape": [2, 3], "axes": [2], "dtype": "fp32"}, "reduce", "axes",
                     "out of range", id="axis-out-of-range"),
        pytest.param({"kind": "quantize", "shape": [4, 8], "from_dtype": "bf16", "to_dtype": "int8",
                      "granularity": "block"}, "quantize", "granularity", "expected one of",
                     id="bad-granularity"),
        pytest.param({"kind": "allreduce", "bytes": 0, "devices": 8}, "allreduce", "bytes", "> 0",
                     id="zero-bytes"),
    ],
)
def test_op_errors(data: dict[str, Any], kind: str, field: str, reason: str) -> None:
    with pytest.raises(OpError) as info:
        make_op(data)
    err = info.value
    assert (err.kind, err.field) == (kind, field), str(err)
    assert reason in err.reason
    assert field in str(err)


def test_op_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="field 'dtype'"):
        make_op({**MM, "dtype": "fp7"})


def test_dtype_aliases_and_string_numbers() -> None:
    op = make_op({**MM, "dtype": "bfloat16", "m": "8", "bias": "true"})
    assert op == make_op({**MM, "bias": True})


# --- bytes and FLOPs by hand ------------------------------------------------------------------------

def test_matmul_bf16_bytes_by_role() -> None:
    """m=128 n=256 k=64 bf16 (2 B):
    weights B[k,n]        = 64*256*2  = 32768
    activations_in A[m,k] = 128*64*2  = 16384
    activations_out C[m,n]= 128*256*2 = 65536
    matrix FLOPs          = 2*128*256*64 = 4194304
    """
    op = make_op({"kind": "matmul", "m": 128, "n": 256, "k": 64, "dtype": "bf16"})
    assert op.bytes_by_role() == {"weights": 64 * 256 * 2, "activations_in": 128 * 64 * 2,
                                  "activations_out": 128 * 256 * 2}
    assert op.flops_by_engine() == {"matrix": 2 * 128 * 256 * 64, "vector": 0.0, "special": 0.0}


def test_matmul_int4_weight_only_bytes() -> None:
    """m=16 n=256 k=512, bf16 activations, int4 weights in groups of 128 along k:
    weights = k*n/2          = 512*256/2     = 65536  (two int4 per byte)
    scales  = ceil(k/128)*n*2 = 4*256*2      = 2048   (one bf16 scale per group and column)
    activations_in  = 16*512*2 = 16384; activations_out = 16*256*2 = 8192
    """
    op = make_op({"kind": "matmul", "m": 16, "n": 256, "k": 512, "dtype": "bf16",
                  "weight_dtype": "int4", "group_size": 128})
    roles = op.bytes_by_role()
    assert roles["weights"] == 512 * 256 / 2
    assert roles["scales"] == 4 * 256 * 2
    assert roles["activations_in"] == 16 * 512 * 2
    assert roles["activations_out"] == 16 * 256 * 2
    assert op.flops_by_engine()["matrix"] == 2 * 16 * 256 * 512
    assert op.flops_by_engine()["vector"] > 0  # dequantization


def test_matmul_shared_weights_across_batch() -> None:
    """batch=4, b_batched=False: B (k*n*2 = 8*8*2 = 128 B) is read once, A and C four times."""
    shared = make_op({**MM, "batch": 4, "b_batched": False}).bytes_by_role()
    per_batch = make_op({**MM, "batch": 4}).bytes_by_role()
    assert shared["weights"] == 8 * 8 * 2
    assert per_batch["weights"] == 4 * 8 * 8 * 2
    assert shared["activations_in"] == per_batch["activations_in"] == 4 * 8 * 8 * 2


def test_reshape_view_moves_nothing_copy_moves_twice() -> None:
    """contiguous: a view, 0 bytes, 0 kernels; copy: 24 fp16 elements read and written = 2*24*2."""
    view = make_op({"kind": "reshape", "shape": [2, 12], "new_shape": [4, 6], "dtype": "fp16"})
    assert view.bytes == 0
    assert view.bytes_by_role() == {}
    assert view.flops == 0
    copy = make_op({"kind": "reshape", "shape": [2, 12], "new_shape": [4, 6], "dtype": "fp16",
                    "contiguous": False})
    assert copy.bytes_by_role() == {"activations_in": 48.0, "activations_out": 48.0}


def test_embedding_rows_round_to_granularity() -> None:
    """dim 24 fp16 = 48 B per row -> 64 B at 32-byte sectors; 10 rows:
    weights = 10*64 = 640 (rounded), activations_out = 10*48 = 480, indices int64 = 10*8 = 80.
    """
    op = make_op({"kind": "embedding", "num_embeddings": 50000, "embedding_dim": 24,
                  "num_indices": 10, "dtype": "fp16"})
    assert op.bytes_by_role(32) == {"weights": 640.0, "activations_out": 480.0, "indices": 80.0}
    assert op.bytes_by_role() == {"weights": 480.0, "activations_out": 480.0, "indices": 80.0}
    aligned = make_op({"kind": "embedding", "num_embeddings": 50000, "embedding_dim": 32,
                       "num_indices": 10, "dtype": "fp16"})
    assert aligned.bytes_by_role(32)["weights"] == 10 * 64


def test_scatter_add_is_read_modify_write() -> None:
    """5 rows of 8 fp32 (32 B): plain writes 5*32 = 160; add reads and writes 2*160 = 320."""
    base = {"kind": "scatter", "table_shape": [100, 8], "num_indices": 5, "dtype": "fp32"}
    assert make_op(base).bytes_by_role()["activations_out"] == 160
    added = make_op({**base, "reduce": "add"})
    assert added.bytes_by_role()["activations_out"] == 320
    assert added.flops_by_engine()["vector"] == 5 * 8


@pytest.mark.parametrize(
    ("granularity", "extra", "scales"),
    [
        ("tensor", {}, 1),
        ("channel", {}, 4),
        ("group", {"group_size": 128}, 4 * 3),  # ceil(300/128) = 3 groups per row
        ("group", {"group_size": 300}, 4),
        ("group", {"group_size": 100}, 4 * 3),
    ],
)
def test_quantize_scale_count(granularity: str, extra: dict[str, Any], scales: int) -> None:
    """shape [4, 300] bf16 -> int8: in 1200*2 = 2400 B, out 1200 B, scales fp32 4 B each."""
    op = make_op({"kind": "quantize", "shape": [4, 300], "from_dtype": "bf16", "to_dtype": "int8",
                  "granularity": granularity, **extra})
    assert op.scales == scales
    roles = op.bytes_by_role()
    assert roles["scales"] == 4 * scales
    assert roles["activations_in"] == 2400
    assert roles["activations_out"] == 1200
    assert op.flops_by_engine()["vector"] == 4 * 1200


def test_attention_gqa_kv_bytes() -> None:
    """b=2, 32 query heads, 8 KV heads, skv=128, d=64 bf16:
    K+V = 2*8*128*(64+64)*2 = 524288 B; with 32 KV heads (MHA) 4x that; Q is the same.
    """
    base = {"kind": "attention", "batch": 2, "heads": 32, "seq_q": 1, "seq_kv": 128,
            "head_dim": 64, "dtype": "bf16"}
    gqa = make_op({**base, "kv_heads": 8}).bytes_by_role()
    mha = make_op(base).bytes_by_role()
    assert gqa["kv_cache"] == 2 * 8 * 128 * 128 * 2
    assert mha["kv_cache"] == gqa["kv_cache"] * 32 / 8
    assert gqa["activations_in"] == mha["activations_in"] == 2 * 32 * 1 * 64 * 2
    assert make_op({**base, "kv_heads": 8}).flops == make_op(base).flops


@given(s=st.integers(1, 4096))
def test_causal_mask_fraction_square(s: int) -> None:
    """sq = skv = s keeps the lower triangle with the diagonal: s(s+1)/2 of s² pairs."""
    op = make_op({**ATTN, "seq_q": s, "seq_kv": s, "causal": True})
    assert op.mask_fraction == pytest.approx((s + 1) / (2 * s))
    full = make_op({**ATTN, "seq_q": s, "seq_kv": s})
    assert full.mask_fraction == 1.0
    assert op.flops_by_engine()["matrix"] == pytest.approx(full.flops_by_engine()["matrix"] * (s + 1) / (2 * s))
    assert op.nominal_matrix_flops == full.nominal_matrix_flops == full.flops_by_engine()["matrix"]


def test_causal_decode_sees_every_key() -> None:
    """One query aligned to the last key sees all skv keys: fraction 1."""
    op = make_op({**ATTN, "seq_q": 1, "seq_kv": 1000, "causal": True})
    assert op.mask_fraction == 1.0


def test_attention_flops_by_hand() -> None:
    """b=1 h=8 sq=skv=16 d=64 fwd: matrix 2*8*16*16*(64+64) = 524288; exp per score 8*16*16 = 2048."""
    op = make_op(ATTN)
    assert op.flops_by_engine()["matrix"] == 2 * 8 * 16 * 16 * 128
    assert op.flops_by_engine()["special"] == 8 * 16 * 16


def test_conv_flops_by_hand() -> None:
    """N=1 C=4 K=8 8x8 3x3 no pad: P=Q=6; FLOPs 2*1*8*6*6*4*3*3 = 20736;
    x 1*4*8*8*4 = 1024 B, w 8*4*3*3*4 = 1152 B, y 1*8*6*6*4 = 1152 B (fp32)."""
    op = make_op(CONV)
    assert op.flops_by_engine() == {"matrix": 20736.0, "vector": 0.0, "special": 0.0}
    assert op.bytes_by_role() == {"weights": 1152.0, "activations_in": 1024.0, "activations_out": 1152.0}


def test_elementwise_by_hand() -> None:
    """[4,1024] fp32, 2 in 1 out, 3 FLOPs + 1 exp per element: read 2*4096*4, write 4096*4."""
    op = make_op(EXAMPLES["elementwise"])
    assert op.bytes_by_role() == {"activations_in": 32768.0, "activations_out": 16384.0}
    assert op.flops_by_engine() == {"matrix": 0.0, "vector": 3 * 4096.0, "special": 4096.0}


# --- properties ---------------------------------------------------------------------------------------

dims = st.integers(1, 4096)
dtypes = st.sampled_from(["fp32", "fp16", "bf16", "int8", "fp8_e4m3"])


@given(m=dims, n=dims, k=dims, batch=st.integers(1, 16), dtype=dtypes)
def test_doubling_m_doubles_matmul_flops(m: int, n: int, k: int, batch: int, dtype: str) -> None:
    base = {"kind": "matmul", "m": m, "n": n, "k": k, "batch": batch, "dtype": dtype}
    one = make_op(base)
    two = make_op({**base, "m": 2 * m})
    assert two.flops_by_engine()["matrix"] == pytest.approx(2 * one.flops_by_engine()["matrix"])
    assert one.flops_by_engine()["matrix"] == pytest.approx(2.0 * batch * m * n * k)
    assert two.bytes_by_role()["activations_in"] == pytest.approx(2 * one.bytes_by_role()["activations_in"])
    assert two.bytes_by_role()["weights"] == one.bytes_by_role()["weights"]


@given(m=dims, n=dims, k=dims, bias=st.booleans(), dtype=dtypes)
def test_backward_matmul_has_twice_the_forward_matrix_flops(m: int, n: int, k: int, bias: bool,
                                                           dtype: str) -> None:
    base = {"kind": "matmul", "m": m, "n": n, "k": k, "dtype": dtype, "bias": bias}
    fwd = make_op(base).flops_by_engine()["matrix"]
    bwd = make_op({**base, "pass": "backward"}).flops_by_engine()["matrix"]
    both = make_op({**base, "pass": "forward_backward"}).flops_by_engine()["matrix"]
    assert bwd == pytest.approx(2 * fwd)
    assert both == pytest.approx(fwd + bwd)


@st.composite
def convs(draw: st.DrawFn) -> dict[str, Any]:
    groups = draw(st.sampled_from([1, 2, 4]))
    kernel = draw(st.integers(1, 5))
    padding = draw(st.integers(0, 2))
    dilation = draw(st.integers(1, 2))
    span = dilation * (kernel - 1) + 1
    return {
        "kind": "conv2d", "batch": draw(st.integers(1, 8)),
        "in_channels": groups * draw(st.integers(1, 16)),
        "out_channels": groups * draw(st.integers(1, 16)),
        "height": draw(st.integers(max(1, span - 2 * padding), 64)),
        "width": draw(st.integers(max(1, span - 2 * padding), 64)),
        "kernel_h": kernel, "kernel_w": kernel, "stride": draw(st.integers(1, 3)),
        "padding": padding, "dilation": dilation, "groups": groups,
        "bias": draw(st.booleans()), "dtype": draw(dtypes),
    }


@given(spec=convs())
def test_doubling_batch_doubles_conv_flops_and_activations(spec: dict[str, Any]) -> None:
    one = make_op(spec)
    two = make_op({**spec, "batch": 2 * spec["batch"]})
    assert two.flops == pytest.approx(2 * one.flops)
    for role in ("activations_in", "activations_out"):
        assert two.bytes_by_role()[role] == pytest.approx(2 * one.bytes_by_role()[role])
    assert two.bytes_by_role()["weights"] == one.bytes_by_role()["weights"]


@given(spec=convs())
def test_conv_flops_formula(spec: dict[str, Any]) -> None:
    op = make_op(spec)
    p, q = op.out_h, op.out_w
    expected = 2.0 * spec["batch"] * spec["out_channels"] * p * q * (spec["in_channels"] // spec["groups"]) \
        * spec["kernel_h"] * spec["kernel_w"]
    bias = spec["batch"] * spec["out_channels"] * p * q if spec["bias"] else 0
    assert op.flops == pytest.approx(expected + bias)


@given(shape=st.lists(st.integers(1, 64), min_size=1, max_size=4), inputs=st.integers(0, 4),
       outputs=st.integers(1, 3), dtype=dtypes, factor=st.integers(1, 8))
def test_elementwise_bytes_linear_in_elements(shape: list[int], inputs: int, outputs: int, dtype: str,
                                              factor: int) -> None:
    base = {"kind": "elementwise", "shape": shape, "dtype": dtype, "inputs": inputs, "outputs": outputs}
    one = make_op(base)
    scaled = make_op({**base, "shape": [*shape[:-1], shape[-1] * factor]})
    elements = 1
    for d in shape:
        elements *= d
    elem_bytes = make_op(base).dtype.bytes
    assert one.bytes == pytest.approx(elements * elem_bytes * (inputs + outputs))
    assert scaled.bytes == pytest.approx(factor * one.bytes)
    assert scaled.flops == pytest.approx(factor * one.flops)


@settings(max_examples=50)
@given(rows=st.integers(1, 512), cols=st.integers(1, 4096),
       kind=st.sampled_from(["layernorm", "rmsnorm", "softmax", "batchnorm"]))
def test_row_ops_activation_bytes_linear_in_rows(rows: int, cols: int, kind: str) -> None:
    one = make_op({"kind": kind, "shape": [rows, cols], "dtype": "bf16"})
    two = make_op({"kind": kind, "shape": [2 * rows, cols], "dtype": "bf16"})
    for role in ("activations_in", "activations_out"):
        assert two.bytes_by_role()[role] == pytest.approx(2 * one.bytes_by_role()[role])
    assert two.flops == pytest.approx(2 * one.flops)
