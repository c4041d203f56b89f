"""MIOpen's GEMM convolutions (``algorithm='im2col_gemm'``): one image at a time, im2col then a BLAS GEMM.

MIOpen's GEMM path loops over the batch (``for i < in_n``) and, per image, unfolds x into a workspace
(``Im2ColGPU``: C/g·R·S rows of P·Q columns) and runs one GEMM on it (``CallGemm``; ROCm/MIOpen
``src/ocl/convolutionocl.cpp``, ``BackwardWeightsGemm``; the forward's ``GemmFwdRest`` solver in
``src/solver/gemm.cpp`` the same). So an N-image forward is N GEMMs of P·Q x K/g x C/g·R·S issued back to
back, each paying its own wave quantisation and launch (``Work.gemm_serial``), not one GEMM of N·P·Q rows.
A 1x1, stride-1, unpadded convolution needs no unfolding (the GEMM reads x as it is).

Backward per image: the data gradient is W^T·dy (P·Q x C/g·R·S x K/g) scattered back by col2im, the weight
gradient im2col(x) then dy·col^T (K/g x C/g·R·S x P·Q), accumulated into dw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.ops.base import FloatArray

IM2COL = "im2col_gemm"


@dataclass(frozen=True)
class Im2colTerms:
    """Per op: 1 where it runs the per-image GEMM path, the GEMMs issued back to back per pass (the batch N),
    and the workspace bytes its im2col / col2im kernels move (written and read back, all passes)."""

    on: np.ndarray[Any, np.dtype[np.bool_]]
    serial: FloatArray
    col_bytes: FloatArray


def im2col_error(op: Any) -> str | None:
    """Why ``op`` (a Conv2d) cannot run the per-image GEMM path, or None."""
    if op.algorithm != IM2COL:
        return None
    if op.depth > 1 or op.kernel_d > 1:
        return "im2col_gemm is a 2-D convolution"
    if op.depthwise:
        return "im2col_gemm needs a non-depthwise convolution"
    return None


def unfolds(op: Any) -> bool:
    """True where the GEMM cannot read x as it is (a filter wider than 1, a stride or a padding)."""
    return bool(op.kernel_h * op.kernel_w > 1 or op.stride > 1 or op.along_w("stride") > 1
                or op.padding > 0 or op.along_w("padding") > 0)


def im2col_terms(ops: Sequence[Any], nb: FloatArray, c: FloatArray, rs: FloatArray, pq: FloatArray,
                 elem: FloatArray, passes: FloatArray) -> Im2colTerms:
    """The per-image path's serial GEMM count and workspace bytes (B): the column matrix C·R·S x P·Q per image,
    written by im2col and read by the GEMM (or written by the data gradient's GEMM and read by col2im)."""
    on = np.array([o.algorithm == IM2COL for o in ops], dtype=bool)
    unfold = np.array([o.algorithm == IM2COL and unfolds(o) for o in ops], dtype=bool)
    col_bytes = np.where(unfold, 2.0 * nb * c * rs * pq * elem * passes, 0.0)
    return Im2colTerms(on=on, serial=np.where(on, nb, 0.0), col_bytes=col_bytes)
