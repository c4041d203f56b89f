"""What a library chose for a run, read from its kernel names: TF32 math, split-K, and a convolution's algorithm
(or the several algorithms of a cuDNN benchmark-mode call). Used by ``matching`` once a run's kernels are known."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from perfmodel.ops import OpError, make_op
from perfmodel.traces.kernel_names import math_dtype, split_k


def kernel_choices(op: dict[str, Any], names: Iterable[str], notes: list[str]) -> str | None:
    """What the library chose, read from a run's kernel names (``op`` and ``notes`` updated in place): TF32 math for
    an fp32 GEMM or convolution (``..._tf32f32_...``, ``ampere_tf32_s1688gemm...``, CUTLASS
    ``cutlass_80_tensorop_s1688gemm_...``: PyTorch's cuDNN default on Ampere and newer, see
    ``kernel_names.math_dtype``), split-K, and a convolution's algorithm (``_conv_algorithm``). The library's
    choice is part of the measurement, so the model runs the same one. Returns "low" where the run's confidence
    drops (cuDNN benchmark-mode trials), else None."""
    kind = op.get("kind")
    if kind not in ("matmul", "conv2d"):  # most runs (elementwise, norms, copies): nothing to read, no join
        return None
    names = list(names)
    joined = " ".join(names).lower()
    if op.get("dtype") == "fp32" and "compute_dtype" not in op and any(math_dtype(name) == "tf32" for name in names):
        op["compute_dtype"] = "tf32"
        notes.append("tf32 math, from its kernel names")
    if kind == "matmul" and any(split_k(name) for name in names):
        notes.append("split-K GEMM (from its kernel names): its partial sums are reduced by a second kernel")
    tried = [family for family, pattern in _CONV_FAMILIES if pattern.search(joined)] if kind == "conv2d" else []
    if len(tried) >= MIN_TRIALS:
        notes.append(f"kernels of {len(tried)} convolution algorithms in one call ({', '.join(tried)}): cuDNN "
                     "benchmark mode trying each, so the measured time is the sum of the trials, not one "
                     "convolution")
        return "low"
    algorithm = _conv_algorithm(joined, op) if kind == "conv2d" else None
    if algorithm is None:
        return None
    try:
        make_op({**op, "algorithm": algorithm})
    except OpError as exc:
        notes.append(f"{algorithm} kernels, but modelled as implicit GEMM ({exc.reason})")
        return None
    op["algorithm"] = algorithm
    notes.append(f"algorithm {algorithm}, from its kernel names")
    return None


# a convolution's algorithm families by kernel name; a call running three or more is an autotuning (benchmark-mode)
# call (a backward call runs at most two: one per gradient)
_CONV_FAMILIES = tuple((family, re.compile(pattern)) for family, pattern in (
    ("implicit GEMM", r"implicit_convolve|implicit_gemm|scudnn_(?!winograd)"),
    ("explicit GEMM", r"explicit_convolve|im2col"), ("FFT", r"fft"), ("Winograd", r"winograd"),
    ("direct", r"dgrad_engine|wgrad_alg\d_engine")))
MIN_TRIALS = 3
_FFT_SIZE = re.compile(r"fft2d_r2c_(\d+)x(\d+)")


def _conv_algorithm(names: str, op: dict[str, Any]) -> str | None:
    """cuDNN's/MIOpen's Winograd (``winogradForwardData4x4`` & co.: non-fused) or FFT (``fft2d_r2c_32x32``:
    FFT_TILING where the transform is smaller than the padded map, else FFT) from a conv's kernel names."""
    if "winograd" in names:
        return "winograd_nonfused" if "winograd_nonfused" in names else "winograd"
    if "fft" not in names:
        return None
    size = _FFT_SIZE.search(names)
    padded = int(op.get("height", 0)) + 2 * int(op.get("padding", 0))
    return "fft_tiling" if size is not None and int(size.group(1)) < padded else "fft"
