"""FLOP counts agree with ``torch.utils.flop_counter.FlopCounterMode`` (forward and backward)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import (  # noqa: E402
    FlopCounterMode,
    sdpa_backward_flop_count,
    sdpa_flop_count,
)

from perfmodel import make_op  # noqa: E402

torch.manual_seed(0)


def count(fn: Callable[[], Any]) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def count_backward(fn: Callable[[], Any]) -> int:
    """FLOPs of the backward only: the forward runs outside the counter."""
    out = fn()
    grad = torch.randn_like(out)
    return count(lambda: out.backward(grad))


def leaf(*shape: int) -> Any:
    return torch.randn(*shape, requires_grad=True)


# --- matmul ------------------------------------------------------------------------------------

MM_SHAPES = [(1, 1, 1), (7, 5, 3), (64, 32, 16), (3, 129, 40)]


@pytest.mark.parametrize(("m", "n", "k"), MM_SHAPES)
def test_mm(m: int, n: int, k: int) -> None:
    a, b = torch.randn(m, k), torch.randn(k, n)
    op = make_op({"kind": "matmul", "m": m, "n": n, "k": k, "dtype": "fp32"})
    assert op.flops == count(lambda: torch.mm(a, b))


@pytest.mark.parametrize(("batch", "m", "n", "k"), [(2, 7, 5, 3), (4, 16, 8, 32), (3, 1, 64, 9)])
def test_bmm(batch: int, m: int, n: int, k: int) -> None:
    a, b = torch.randn(batch, m, k), torch.randn(batch, k, n)
    op = make_op({"kind": "matmul", "batch": batch, "m": m, "n": n, "k": k, "dtype": "fp32"})
    assert op.flops == count(lambda: torch.bmm(a, b))


@pytest.mark.parametrize(("m", "n", "k"), MM_SHAPES)
def test_addmm(m: int, n: int, k: int) -> None:
    a, b, bias = torch.randn(m, k), torch.randn(k, n), torch.randn(n)
    op = make_op({"kind": "matmul", "m": m, "n": n, "k": k, "dtype": "fp32", "bias": True})
    assert op.flops_by_engine()["matrix"] == count(lambda: torch.addmm(bias, a, b))
    assert op.flops_by_engine()["vector"] == m * n  # the bias add torch does not count


def test_linear_shared_weight() -> None:
    """F.linear on a 3-D input: one weight for the whole batch."""
    x, w = torch.randn(4, 10, 32), torch.randn(24, 32)
    op = make_op({"kind": "matmul", "batch": 4, "m": 10, "n": 24, "k": 32, "dtype": "fp32",
                  "b_batched": False})
    assert op.flops == count(lambda: F.linear(x, w))


@pytest.mark.parametrize(("m", "n", "k"), MM_SHAPES)
def test_mm_backward(m: int, n: int, k: int) -> None:
    a, b = leaf(m, k), leaf(k, n)
    op = make_op({"kind": "matmul", "m": m, "n": n, "k": k, "dtype": "fp32", "pass": "backward"})
    assert op.flops_by_engine()["matrix"] == count_backward(lambda: torch.mm(a, b))
    both = make_op({"kind": "matmul", "m": m, "n": n, "k": k, "dtype": "fp32", "pass": "forward_backward"})

    def step() -> None:
        torch.mm(a, b).sum().backward()

    # mm forward + its two backward GEMMs (sum's backward is not a FLOP for the counter)
    assert both.flops_by_engine()["matrix"] == count(step)


def test_bmm_backward() -> None:
    a, b = leaf(3, 8, 16), leaf(3, 16, 4)
    op = make_op({"kind": "matmul", "batch": 3, "m": 8, "n": 4, "k": 16, "dtype": "fp32",
                  "pass": "backward"})
    assert op.flops == count_backward(lambda: torch.bmm(a, b))


def test_addmm_backward() -> None:
    a, b, bias = leaf(12, 20), leaf(20, 6), leaf(6)
    op = make_op({"kind": "matmul", "m": 12, "n": 6, "k": 20, "dtype": "fp32", "bias": True,
                  "pass": "backward"})
    assert op.flops_by_engine()["matrix"] == count_backward(lambda: torch.addmm(bias, a, b))


# --- conv2d ------------------------------------------------------------------------------------------

CONVS = [
    pytest.param(dict(batch=2, in_channels=3, out_channels=8, height=16, width=16, kernel=3), id="plain"),
    pytest.param(dict(batch=2, in_channels=4, out_channels=6, height=15, width=17, kernel=3, stride=2),
                 id="strided"),
    pytest.param(dict(batch=1, in_channels=4, out_channels=8, height=9, width=9, kernel=5, padding=2),
                 id="padded"),
    pytest.param(dict(batch=2, in_channels=4, out_channels=4, height=20, width=20, kernel=3, dilation=2,
                      padding=1), id="dilated"),
    pytest.param(dict(batch=2, in_channels=8, out_channels=12, height=10, width=10, kernel=3, groups=4,
                      padding=1), id="grouped"),
    pytest.param(dict(batch=3, in_channels=16, out_channels=32, height=7, width=7, kernel=1), id="pointwise"),
    pytest.param(dict(batch=1, in_channels=2, out_channels=4, height=12, width=10, kernel=(3, 5),
                      stride=(2, 1), padding=(1, 2)), id="rectangular"),
]


def _conv(case: dict[str, Any], bias: bool = False, pass_: str = "forward") -> tuple[Any, Any]:
    """(our op, torch arguments) for one case."""
    kernel = case["kernel"] if isinstance(case["kernel"], tuple) else (case["kernel"],) * 2
    stride = case.get("stride", 1)
    stride = stride if isinstance(stride, tuple) else (stride, stride)
    padding = case.get("padding", 0)
    padding = padding if isinstance(padding, tuple) else (padding, padding)
    dilation = case.get("dilation", 1)
    groups = case.get("groups", 1)
    op = make_op({
        "kind": "conv2d", "batch": case["batch"], "in_channels": case["in_channels"],
        "out_channels": case["out_channels"], "height": case["height"], "width": case["width"],
        "kernel_h": kernel[0], "kernel_w": kernel[1], "stride": stride[0], "stride_w": stride[1],
        "padding": padding[0], "padding_w": padding[1], "dilation": dilation, "groups": groups,
        "dtype": "fp32", "bias": bias, "pass": pass_,
    })
    shapes = {
        "x": (case["batch"], case["in_channels"], case["height"], case["width"]),
        "w": (case["out_channels"], case["in_channels"] // groups, *kernel),
        "b": (case["out_channels"],) if bias else None,
        "kw": {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups},
    }
    return op, shapes


@pytest.mark.parametrize("case", CONVS)
def test_conv2d(case: dict[str, Any]) -> None:
    op, s = _conv(case)
    x, w = torch.randn(*s["x"]), torch.randn(*s["w"])
    out = F.conv2d(x, w, **s["kw"])
    assert (op.out_h, op.out_w) == tuple(out.shape[2:])
    assert op.flops_by_engine()["matrix"] == count(lambda: F.conv2d(x, w, **s["kw"]))
    assert op.flops == op.flops_by_engine()["matrix"]


@pytest.mark.parametrize("case", CONVS[:3])
def test_conv2d_bias(case: dict[str, Any]) -> None:
    op, s = _conv(case, bias=True)
    x, w, b = torch.randn(*s["x"]), torch.randn(*s["w"]), torch.randn(*s["b"])
    assert op.flops_by_engine()["matrix"] == count(lambda: F.conv2d(x, w, b, **s["kw"]))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize(("channels", "multiplier", "stride"), [(8, 1, 1), (6, 2, 2), (16, 1, 2)])
def test_depthwise_conv2d(channels: int, multiplier: int, stride: int, bias: bool) -> None:
    """Depthwise runs on the vector engine: compare total FLOPs minus the bias add."""
    case = dict(batch=2, in_channels=channels, out_channels=channels * multiplier, height=11, width=13,
                kernel=3, stride=stride, padding=1, groups=channels)
    op, s = _conv(case, bias=bias)
    assert op.flops_by_engine()["matrix"] == 0
    x, w = torch.randn(*s["x"]), torch.randn(*s["w"])
    b = torch.randn(*s["b"]) if bias else None
    bias_flops = case["batch"] * case["out_channels"] * op.out_h * op.out_w if bias else 0
    assert op.flops - bias_flops == count(lambda: F.conv2d(x, w, b, **s["kw"]))


def _conv_backward_counts(s: dict[str, Any]) -> tuple[int, int]:
    """torch's counts of the data gradient alone and of the weight gradient alone."""
    x, w = leaf(*s["x"]), torch.randn(*s["w"])
    grad_input = count_backward(lambda: F.conv2d(x, w, **s["kw"]))
    x, w = torch.randn(*s["x"]), leaf(*s["w"])
    grad_weight = count_backward(lambda: F.conv2d(x, w, **s["kw"]))
    return grad_input, grad_weight


@pytest.mark.parametrize("case", CONVS)
def test_conv2d_backward(case: dict[str, Any]) -> None:
    """Backward = data gradient + weight gradient, each with the forward's FLOPs.

    torch's ``conv_backward_flop`` counts the weight gradient as conv(xᵀ, dyᵀ) over all C·K
    channel pairs, ignoring ``groups``; for grouped convs its figure is ``groups`` times the
    true one, so that term is divided by ``groups`` here.
    """
    op, s = _conv(case, pass_="backward")
    forward, _ = _conv(case)
    grad_input, grad_weight = _conv_backward_counts(s)
    groups = case.get("groups", 1)
    assert grad_input == forward.flops
    assert grad_weight == groups * forward.flops
    assert op.flops_by_engine()["matrix"] == grad_input + grad_weight // groups
    if groups == 1:
        x, w = leaf(*s["x"]), leaf(*s["w"])
        assert op.flops_by_engine()["matrix"] == count_backward(lambda: F.conv2d(x, w, **s["kw"]))


def test_depthwise_conv2d_backward() -> None:
    case = dict(batch=2, in_channels=8, out_channels=8, height=9, width=9, kernel=3, padding=1, groups=8)
    op, s = _conv(case, pass_="backward")
    grad_input, grad_weight = _conv_backward_counts(s)
    assert op.flops_by_engine()["matrix"] == 0
    assert op.flops == grad_input + grad_weight // 8


# --- attention ---------------------------------------------------------------------------------

ATTENTION = [
    pytest.param(dict(batch=2, heads=4, seq_q=16, seq_kv=32, head_dim=8), id="cross"),
    pytest.param(dict(batch=1, heads=2, seq_q=24, seq_kv=24, head_dim=16), id="self"),
    pytest.param(dict(batch=1, heads=3, seq_q=1, seq_kv=40, head_dim=8), id="decode"),
    pytest.param(dict(batch=2, heads=2, seq_q=8, seq_kv=12, head_dim=16, head_dim_v=8), id="dv"),
]


def _qkv(case: dict[str, Any], kv_heads: int | None = None, grad: bool = False) -> tuple[Any, Any, Any]:
    make = leaf if grad else torch.randn
    b, h, sq, skv, d = (case[k] for k in ("batch", "heads", "seq_q", "seq_kv", "head_dim"))
    dv = case.get("head_dim_v", d)
    hk = kv_heads or h
    return make(b, h, sq, d), make(b, hk, skv, d), make(b, hk, skv, dv)


def _attention(case: dict[str, Any], **extra: Any) -> Any:
    return make_op({"kind": "attention", "dtype": "fp32", **case, **extra})


def _sdpa(q: Any, k: Any, v: Any, **kw: Any) -> Any:
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, **kw)


@pytest.mark.parametrize("case", ATTENTION)
def test_attention_forward(case: dict[str, Any]) -> None:
    q, k, v = _qkv(case)
    op = _attention(case)
    reference = sdpa_flop_count(q.shape, k.shape, v.shape)
    assert op.flops_by_engine()["matrix"] == reference
    assert op.flops_by_engine()["matrix"] == count(lambda: _sdpa(q, k, v))


@pytest.mark.parametrize("case", ATTENTION)
def test_attention_causal_nominal(case: dict[str, Any]) -> None:
    """torch ignores the mask: its count equals our nominal (unmasked) FLOPs."""
    q, k, v = _qkv(case)
    op = _attention(case, causal=True)
    assert op.nominal_matrix_flops == count(lambda: _sdpa(q, k, v, is_causal=True))
    assert op.flops_by_engine()["matrix"] == pytest.approx(op.nominal_matrix_flops * op.mask_fraction)


def test_attention_gqa() -> None:
    case = dict(batch=2, heads=8, seq_q=16, seq_kv=16, head_dim=8)
    q, k, v = _qkv(case, kv_heads=2)
    op = _attention(case, kv_heads=2)
    assert op.flops_by_engine()["matrix"] == sdpa_flop_count(q.shape, k.shape, v.shape)
    assert op.flops_by_engine()["matrix"] == count(lambda: _sdpa(q, k, v, enable_gqa=True))


@pytest.mark.parametrize("case", ATTENTION)
def test_attention_backward(case: dict[str, Any]) -> None:
    """Flash backward recomputes S: torch's own formula counts 2·b·h·sq·skv·(3d + 2dv)."""
    q, k, v = _qkv(case)
    b, h, sq, _ = q.shape
    grad_out = (b, h, sq, v.shape[-1])
    op = make_op({"kind": "attention", "dtype": "fp32", **case, "pass": "backward"})
    reference = sdpa_backward_flop_count(grad_out, q.shape, k.shape, v.shape)
    assert op.flops_by_engine()["matrix"] == reference
    assert op.nominal_matrix_flops == reference
    both = make_op({"kind": "attention", "dtype": "fp32", **case, "pass": "forward_backward"})
    assert both.flops_by_engine()["matrix"] == reference + sdpa_flop_count(q.shape, k.shape, v.shape)


@pytest.mark.parametrize("case", ATTENTION)
def test_attention_backward_math_path(case: dict[str, Any]) -> None:
    """The math path's autograd backward has no recompute: 4 GEMMs, 2·b·h·sq·skv·(2d + 2dv);
    our backward adds exactly the recomputed QKᵀ, 2·b·h·sq·skv·d."""
    q, k, v = _qkv(case, grad=True)
    op = make_op({"kind": "attention", "dtype": "fp32", **case, "pass": "backward"})
    b, h, sq, d = q.shape
    recompute = 2 * b * h * sq * k.shape[2] * d
    assert op.flops_by_engine()["matrix"] - recompute == count_backward(lambda: _sdpa(q, k, v))
