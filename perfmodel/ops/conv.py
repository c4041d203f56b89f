"""2-D convolution: implicit GEMM (M = N·P·Q, N = K/g, K = C/g·R·S per group), direct when depthwise."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Self

import numpy as np

from perfmodel.dtypes import DType
from perfmodel.ops.base import (
    Op,
    OpError,
    Pass,
    Work,
    check_pass,
    column,
    dtype_codes,
    pass_factors,
    register,
    require_non_negative,
    require_positive,
)


@register
@dataclass(frozen=True)
class Conv2d(Op):
    """y[N, K, P, Q] = conv(x[N, C, H, W], w[K, C/groups, R, S]); ``*_w`` fields default to ``*``."""

    kind = "conv2d"

    batch: int
    in_channels: int
    out_channels: int
    height: int
    width: int
    kernel_h: int
    kernel_w: int
    dtype: DType
    stride: int = 1
    padding: int = 0
    dilation: int = 1
    stride_w: int | None = None
    padding_w: int | None = None
    dilation_w: int | None = None
    groups: int = 1
    compute_dtype: DType | None = None
    layout: Literal["nchw", "nhwc"] = "nchw"
    bias: bool = False
    pass_: Pass = "forward"

    def __post_init__(self) -> None:
        require_positive(self.kind, batch=self.batch, in_channels=self.in_channels,
                         out_channels=self.out_channels, height=self.height, width=self.width,
                         kernel_h=self.kernel_h, kernel_w=self.kernel_w, stride=self.stride,
                         dilation=self.dilation, groups=self.groups)
        require_non_negative(self.kind, padding=self.padding)
        check_pass(self.kind, self.pass_)
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise OpError(self.kind, "groups", f"{self.groups} must divide in_channels "
                          f"({self.in_channels}) and out_channels ({self.out_channels})")
        if self.out_h <= 0 or self.out_w <= 0:
            raise OpError(self.kind, "kernel_h", f"kernel larger than the padded input: output "
                          f"would be {self.out_h}x{self.out_w}")

    @property
    def out_h(self) -> int:
        return (self.height + 2 * self.padding - self.dilation * (self.kernel_h - 1) - 1) // self.stride + 1

    @property
    def out_w(self) -> int:
        stride = self.stride_w or self.stride
        pad = self.padding if self.padding_w is None else self.padding_w
        dil = self.dilation_w or self.dilation
        return (self.width + 2 * pad - dil * (self.kernel_w - 1) - 1) // stride + 1

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.in_channels == self.groups

    def loop_dims(self) -> dict[str, int]:
        return {"n": self.batch, "k": self.out_channels, "p": self.out_h, "q": self.out_w,
                "c": self.in_channels // self.groups, "r": self.kernel_h, "s": self.kernel_w,
                "g": self.groups}

    @classmethod
    def work(cls, ops: Sequence[Self], granularity_bytes: float = 1.0) -> Work:
        nb, c, k, h, w = (column(ops, f) for f in ("batch", "in_channels", "out_channels", "height", "width"))
        r, s, g = column(ops, "kernel_h"), column(ops, "kernel_w"), column(ops, "groups")
        p = np.array([o.out_h for o in ops], dtype=np.float64)
        q = np.array([o.out_w for o in ops], dtype=np.float64)
        dw = np.array([o.depthwise for o in ops])
        elem = np.array([o.dtype.bytes for o in ops])
        has_bias = np.array([o.bias for o in ops], dtype=np.float64)
        fwd, bwd = pass_factors(ops)
        flops = 2.0 * nb * k * p * q * (c / g) * r * s
        x_bytes, w_bytes, y_bytes = nb * c * h * w * elem, k * (c / g) * r * s * elem, nb * k * p * q * elem
        # backward: data-gradient and weight-gradient convolutions, each with the forward's FLOPs.
        matrix = np.where(dw, 0.0, flops * (fwd + 2.0 * bwd))
        vector = np.where(dw, flops * (fwd + 2.0 * bwd), 0.0) + has_bias * nb * k * p * q * fwd
        roles = {
            "weights": (w_bytes + has_bias * k * elem) * (fwd + 2.0 * bwd),
            "activations_in": x_bytes * fwd + bwd * (y_bytes + x_bytes),
            "activations_out": y_bytes * fwd + bwd * x_bytes,
        }
        dtypes = dtype_codes([o.compute_dtype or o.dtype for o in ops])
        m_gemm = nb * p * q
        return Work(
            n=len(ops), flops_matrix=matrix, flops_vector=vector, flops_special=np.zeros(len(ops)),
            bytes_by_role=roles, matrix_dtype=dtypes, vector_dtype=dtypes,
            parallel_items=g * np.ceil(m_gemm / 128) * np.ceil(k / g / 128),
            kernels=fwd + 2.0 * bwd,
            gemm_batch=np.where(dw, 0.0, g * (fwd + 2.0 * bwd)),
            gemm_m=m_gemm, gemm_n=k / g, gemm_k=(c / g) * r * s,
        )
