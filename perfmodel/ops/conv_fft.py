"""cuDNN's FFT convolutions (``algorithm='fft'`` and ``'fft_tiling'``): their transforms and complex GEMMs.

FFT: x, w and y are 2-D real-to-complex transforms of T_h x T_w (the padded input rounded up to a size of
small prime factors 2, 3, 5, 7, as cuFFT runs fastest; cuDNN allows at most 256), F = T_h·(T_w/2 + 1)
complex values per plane. The output spectrum is, per frequency, a complex GEMM of the images' spectra by
the filters' (N x K x C: four real GEMMs), and its inverse transform, cropped, is y. FFT_TILING runs the
same on 32x32 tiles, each giving 32 − R + 1 outputs per side, so a large map keeps small transforms.

Each transform is its own kernel writing its spectrum (complex values of the data's precision: 8 B for
fp32, 4 B for fp16) through DRAM, and the complex GEMMs read them back: 2 x the spectra's bytes after the
GEMMs (``Work.serial_bytes``), as for the non-fused Winograd. The filter's spectrum, K·C planes of F
values, is the big one: 128 -> 256 channels at T = 60 write 488 MB in fp32. The complex GEMMs run in fp32
(cuDNN's FFT takes fp32 or pseudo-half: fp16 data, fp32 math). DeepBench's P100 3x3 128 -> 256 on
16 x 56 x 56 took 1.59 ms in fp32 and 1.02 ms in pseudo-half; this model gives 2.7 and 1.8 ms (implicit
GEMM: 3.5 ms). A backward pass runs the transforms and complex GEMMs again for each gradient
(BWD_DATA_ALGO_FFT, BWD_FILTER_ALGO_FFT).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.ops.base import FloatArray

FFT_ALGORITHMS = ("fft", "fft_tiling")
FFT_TILE = 32  # FFT_TILING's transform side
FFT_MAX_SIZE = 256  # FFT: padded input height and width at most this (cuDNN's limit)
SMOOTH_PRIMES = (2, 3, 5, 7)  # cuFFT's fast radices
REAL_FFT_FLOPS = 2.5  # a real-input 2-D FFT of n points: ~2.5 n log2 n flops (half a complex one's 5 n log2 n)
COMPLEX_GEMM_REAL_GEMMS = 4.0  # one complex multiply-add = 4 real ones


@dataclass(frozen=True)
class FftTerms:
    """Per op (0 where the op runs no FFT), for one pass: frequencies per transform, transform tiles per
    image plane, the transforms' flops and their spectra's DRAM bytes (written and read back)."""

    frequencies: FloatArray
    tiles: FloatArray
    transform_flops: FloatArray
    spectra_bytes: FloatArray
    planes: FloatArray  # transforms per pass: the parallel work


def _smooth_size(n: int) -> int:
    """The smallest size >= n whose prime factors are all in ``SMOOTH_PRIMES``."""
    size = max(n, 1)
    while True:
        rest = size
        for prime in SMOOTH_PRIMES:
            while rest % prime == 0:
                rest //= prime
        if rest == 1:
            return size
        size += 1


def _padded(op: Any) -> tuple[int, int]:
    """The padded input's height and width."""
    return op.height + 2 * op.padding, op.width + 2 * op.along_w("padding")


def fft_error(op: Any) -> str | None:
    """Why ``op`` (a Conv2d) cannot run its FFT algorithm, or None."""
    if op.algorithm not in FFT_ALGORITHMS:
        return None
    if (op.stride, op.along_w("stride"), op.dilation, op.along_w("dilation"), op.groups) != (1, 1, 1, 1, 1):
        return f"{op.algorithm} needs stride 1, no dilation and one group"
    if op.algorithm == "fft" and max(_padded(op)) > FFT_MAX_SIZE:
        return f"fft needs the padded input at most {FFT_MAX_SIZE} x {FFT_MAX_SIZE} (fft_tiling has no limit)"
    if op.algorithm == "fft_tiling" and max(op.kernel_h, op.kernel_w) >= FFT_TILE:
        return f"fft_tiling needs a filter smaller than its {FFT_TILE} x {FFT_TILE} tiles"
    return None


def _sizes(op: Any) -> tuple[int, int, int]:
    """(transform height, width, tiles per image plane)."""
    if op.algorithm == "fft_tiling":
        tiles = math.ceil(op.out_h / (FFT_TILE - op.kernel_h + 1)) * math.ceil(op.out_w / (FFT_TILE - op.kernel_w + 1))
        return FFT_TILE, FFT_TILE, tiles
    padded_h, padded_w = _padded(op)
    return _smooth_size(padded_h), _smooth_size(padded_w), 1


def fft_terms(ops: Sequence[Any], batch: FloatArray, in_channels: FloatArray, out_channels: FloatArray,
              elem_bytes: FloatArray) -> FftTerms:
    """The ``FftTerms`` of Conv2d ops (one pass: x -> y, dy -> dx or x, dy -> dw move the same planes)."""
    sizes = np.array([_sizes(o) if o.algorithm in FFT_ALGORITHMS else (0, 0, 0) for o in ops],
                     dtype=np.float64).reshape(len(ops), 3)
    th, tw, tiles = sizes.T
    points = th * tw
    frequencies = th * (np.floor(tw / 2) + 1)
    planes = tiles * batch * (in_channels + out_channels) + out_channels * in_channels  # x, y and w spectra
    with np.errstate(divide="ignore", invalid="ignore"):
        per_plane = np.where(points > 0, REAL_FFT_FLOPS * points * np.log2(np.maximum(points, 1.0)), 0.0)
    complex_bytes = 2.0 * elem_bytes
    return FftTerms(frequencies, tiles, per_plane * planes, 2.0 * complex_bytes * frequencies * planes,
                    np.where(points > 0, planes, 0.0))


__all__ = ["FFT_ALGORITHMS", "FftTerms", "fft_error", "fft_terms"]
