"""MIOpen's binary RxS Winograd (``algorithm='winograd_rxs'``): any filter as 3x3 blocks of F(2x2, 3x3).

MIOpen's ``ConvBinWinogradRxS`` solver (gfx803 / gfx900, forward and backward data; ROCm/MIOpen
``src/solver/conv_bin_winoRxS.cpp`` @ 218dda8, the MIOpen 1.x era; the same rule in today's
``src/solver/conv/conv_bin_winoRxS.cpp``) runs one assembly kernel, ``conv_3x3_wheel_alpha_v9_0_15`` (a
``_stride_2_dec`` build decimates a stride-2 forward), on a filter padded with zeros to whole 3x3 blocks:

- stride 1: the filter width S is padded to 3 when S <= 3, else to a multiple of 6; the height R to a multiple of 3;
- stride 2: S to a multiple of 6; R to a multiple of 3 when R % 6 == 1, else to a multiple of 6.

A stride-2 convolution decimated into its four phases is four stride-1 convolutions with filters of half the padded
size (multiples of 3 again), each over the full P x Q output. Either way the kernel runs padded_R·padded_S / 9
F(2x2, 3x3) problems on the P x Q output, each the 16 GEMMs of a 3x3 Winograd (Lavin & Gray, CVPR 2016): a 5x5
filter is 4 blocks (16 multiplies per output against 25 direct), DeepSpeech's 5x10 stride 2 is 8 (32 against 50).
A 3x3 stride-1 filter is one block: ``winograd`` exactly.

Applicability as the solver checks it: stride 1 or 2, the same along both axes, no dilation, one group, a 2-D
convolution, C even where stride is 1 and S <= 3, and blocks·C >= 18.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.ops.base import FloatArray

RXS = "winograd_rxs"
RXS_BLOCK = 3  # the kernel's filter block side (F(2x2, 3x3))
RXS_MIN_BLOCK_CHANNELS = 18  # padded blocks x C must reach this (the solver's shader constraint)


def _ceil_to(v: FloatArray, m: float) -> FloatArray:
    out: FloatArray = np.ceil(v / m) * m
    return out


def rxs_blocks(kernel_h: FloatArray, kernel_w: FloatArray, stride: FloatArray) -> FloatArray:
    """The 3x3 F(2x2, 3x3) blocks MIOpen's RxS Winograd runs for an R x S filter (``kernel_h`` x ``kernel_w``) at
    stride 1 or 2: padded_R·padded_S / 9, padded as ``ConvBinWinogradRxS::IsApplicable`` pads them."""
    r, s = np.asarray(kernel_h, dtype=np.float64), np.asarray(kernel_w, dtype=np.float64)
    one = np.asarray(stride, dtype=np.float64) == 1
    block, twice = float(RXS_BLOCK), 2.0 * RXS_BLOCK
    padded_s = np.where(one & (s <= block), block, _ceil_to(s, twice))
    padded_r = np.where(one | (np.fmod(r, twice) == 1), _ceil_to(r, block), _ceil_to(r, twice))
    out: FloatArray = padded_r * padded_s / (block * block)
    return out


def rxs_error(op: Any) -> str | None:
    """Why ``op`` (a Conv2d) cannot run MIOpen's RxS Winograd, or None."""
    if op.algorithm != RXS:
        return None
    if op.kernel_d > 1 or op.depth > 1:
        return "winograd_rxs is 2-D only"
    if op.stride not in (1, 2) or op.along_w("stride") != op.stride:
        return "winograd_rxs needs the same stride, 1 or 2, along both axes"
    if op.dilation != 1 or op.along_w("dilation") != 1 or op.groups != 1:
        return "winograd_rxs needs no dilation and one group"
    channels = op.in_channels
    if op.stride == 1 and op.kernel_w <= RXS_BLOCK and channels % 2:
        return "winograd_rxs at stride 1 with a filter at most 3 wide needs an even channel count"
    blocks = float(rxs_blocks(np.array([op.kernel_h]), np.array([op.kernel_w]), np.array([op.stride]))[0])
    if blocks * channels < RXS_MIN_BLOCK_CHANNELS:
        return f"winograd_rxs needs padded 3x3 blocks x channels >= {RXS_MIN_BLOCK_CHANNELS}"
    return None


__all__ = ["RXS", "rxs_blocks", "rxs_error"]
