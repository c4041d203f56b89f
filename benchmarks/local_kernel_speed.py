"""The local correction's compiled kernel (``near_jit.smooth``) against two variants that give the same bits, on
the inputs ``predict_calibrated`` hands it for ``calibrated_speed``'s *fitted classes* table (Vidur A100
calibration: four local corrections, ~5,000 rows, 1.46 M row x point pairs inside ``lo``..``hi``, 465 k exps).

- ``by column``: the points stored column-major; each row's squared distances to all points of its window are
  accumulated one coordinate at a time (a loop over points that LLVM vectorises, the same additions in the same
  order per point), then the exps of the points within reach, in point order;
- ``no exp``: the reference loop with ``exp`` left out (wrong answers: it only shows the exps' share);
- ``screened``: ``near_jit.smooth_screened`` (shipped, calfit17): a pair rejected on the coordinate after log10 FLOPs
  with the widest spread of the points (``LocalCorrection.screen``) before its full distance.

``--end-to-end`` also times ``predict_calibrated`` on that table with the local corrections' kernel switched between
``near_jit.smooth`` and ``near_jit.smooth_screened`` (alternate calls, bits checked).

Ratios are variant / reference CPU time (``time.process_time``), median of alternate pairs; the ``by column``
answers are checked bit for bit against the reference in every pair.

    python benchmarks/local_kernel_speed.py [--ops 10000] [--pairs 9] [--end-to-end]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from perfmodel.ops.base import FloatArray, IntArray


@numba.njit(cache=False, error_model="numpy")
def by_column(x: FloatArray, points_t: FloatArray, runs: FloatArray, residuals: FloatArray, scale: float,
              shrink: float, lo: IntArray, hi: IntArray, reach2: float, out: FloatArray) -> None:
    """``near_jit.smooth`` with ``points_t`` = the points transposed (coordinates x points)."""
    d = x.shape[1]
    d2 = np.empty(points_t.shape[1])
    kept = np.empty(points_t.shape[1], dtype=np.int64)
    for r in range(x.shape[0]):
        start = lo[r]
        n = hi[r] - start
        for i in range(n):
            diff = x[r, 0] - points_t[0, start + i]
            d2[i] = diff * diff
        for j in range(1, d):
            xj = x[r, j]
            for i in range(n):
                diff = xj - points_t[j, start + i]
                d2[i] += diff * diff
        k = 0
        for i in range(n):  # branch-free compaction of the points within reach
            kept[k] = i
            k += d2[i] <= reach2
        numerator = 0.0
        total = 0.0
        for q in range(k):
            i = kept[q]
            w = math.exp(d2[i] * scale) * runs[start + i]
            numerator += w * residuals[start + i]
            total += w
        out[r] = numerator / (shrink + total)


@numba.njit(cache=False, error_model="numpy")
def no_exp(x: FloatArray, points: FloatArray, runs: FloatArray, residuals: FloatArray, scale: float,
           shrink: float, lo: IntArray, hi: IntArray, reach2: float, out: FloatArray) -> None:
    """``near_jit.smooth`` with ``exp(d2 * scale)`` replaced by ``d2 * scale`` (timing only)."""
    d = x.shape[1]
    for r in range(x.shape[0]):
        numerator = 0.0
        total = 0.0
        for p in range(lo[r], hi[r]):
            d2 = 0.0
            for j in range(d):
                diff = x[r, j] - points[p, j]
                d2 += diff * diff
            if d2 > reach2:
                continue
            w = d2 * scale * runs[p]
            numerator += w * residuals[p]
            total += w
        out[r] = numerator / (shrink + total)


def kernel_inputs(count: int) -> list[tuple[Any, ...]]:
    """The arguments ``LocalCorrection._smoothed`` passes to the kernel on the *fitted classes* table."""
    from calibrated_speed import calibration, tables

    from perfmodel.calibration import local, predict_calibrated

    seen: list[tuple[Any, FloatArray]] = []
    original = local.LocalCorrection._smoothed

    def capture(self: Any, x: FloatArray, smooth: Callable[..., None]) -> FloatArray:
        seen.append((self, np.ascontiguousarray(x, dtype=np.float64)))
        return original(self, x, smooth)

    local.LocalCorrection._smoothed = capture  # type: ignore[method-assign]
    try:
        predict_calibrated("nvidia-a100-sxm4-80gb", tables(count)["fitted classes"], calibration())
    finally:
        local.LocalCorrection._smoothed = original  # type: ignore[method-assign]
    out = []
    for correction, x in seen:
        points, runs, residuals = correction._by_first
        lo = np.searchsorted(points[:, 0], x[:, 0] - correction.reach, side="left")
        hi = np.searchsorted(points[:, 0], x[:, 0] + correction.reach, side="right")
        out.append((x, points, runs, residuals, -0.5 / correction.bandwidth ** 2, float(correction.shrink), lo, hi,
                    correction.reach ** 2, correction.screen))
    return out


def timed(kernel: Callable[..., None], inputs: list[tuple[Any, ...]], transpose: bool) -> tuple[float, list[Any]]:
    """CPU time and answers of ``kernel`` over ``inputs``; ``screen`` passed only to ``near_jit.smooth_screened``."""
    from perfmodel.calibration import near_jit

    outs = []
    start = time.process_time()
    for x, points, *rest, screen in inputs:
        out = np.empty(len(x))
        if kernel is near_jit.smooth_screened:
            kernel(x, points, *rest, screen, out)
        else:
            kernel(x, np.ascontiguousarray(points.T) if transpose else points, *rest, out)
        outs.append(out)
    return time.process_time() - start, outs


def end_to_end(count: int, pairs: int) -> None:
    """``predict_calibrated`` on the *fitted classes* table, the local corrections' kernel alternately
    ``near_jit.smooth`` and ``near_jit.smooth_screened``."""
    from calibrated_speed import calibration, tables

    from perfmodel.calibration import local, near_jit, predict_calibrated

    ops, cal = tables(count)["fitted classes"], calibration()
    original = local.LocalCorrection._smoothed

    plain: Callable[..., None] = near_jit.smooth

    def reference(*args: Any) -> None:
        plain(*args[:9], args[10])

    def with_reference(self: Any, x: FloatArray, smooth: Callable[..., None]) -> FloatArray:
        return original(self, x, reference)

    def call(use_reference: bool) -> tuple[float, Any]:
        local.LocalCorrection._smoothed = with_reference if use_reference else original  # type: ignore[method-assign]
        try:
            start = time.process_time()
            answer = predict_calibrated("nvidia-a100-sxm4-80gb", ops, cal)
            return time.process_time() - start, answer
        finally:
            local.LocalCorrection._smoothed = original  # type: ignore[method-assign]

    call(True)
    call(False)
    base, variant, ratios = [], [], []
    for _ in range(pairs):
        a, expected = call(True)
        b, answer = call(False)
        if not np.array_equal(expected.time_s.view(np.uint8), answer.time_s.view(np.uint8)):
            raise SystemExit("end to end: time_s differs between the kernels")
        base.append(a)
        variant.append(b)
        ratios.append(b / a)
    print(f"end to end ({len(ops):,} ops): reference {np.median(base) * 1e3:.1f} ms, screened "
          f"{np.median(variant) * 1e3:.1f} ms, screened / reference median {float(np.median(ratios)):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--pairs", type=int, default=9)
    parser.add_argument("--end-to-end", action="store_true")
    args = parser.parse_args()
    from perfmodel.calibration import near_jit
    from perfmodel.search import gemm_kernel

    gemm_kernel.load()
    inputs = kernel_inputs(args.ops)
    pairs = sum(int((hi - lo).sum()) for _, _, _, _, _, _, lo, hi, _, _ in inputs)
    print(f"{len(inputs)} local corrections, {sum(len(i[0]) for i in inputs):,} rows, {pairs:,} row x point pairs, "
          f"screened on coordinates {[i[-1] for i in inputs]}")
    for name, kernel, transpose in (("screened", near_jit.smooth_screened, False), ("by column", by_column, True),
                                    ("no exp (timing only)", no_exp, False)):
        timed(near_jit.smooth, inputs, False)
        timed(kernel, inputs, transpose)
        ratios, base, variant = [], [], []
        for _ in range(args.pairs):
            a, reference = timed(near_jit.smooth, inputs, False)
            b, outs = timed(kernel, inputs, transpose)
            if kernel is not no_exp and not all(np.array_equal(p, q) for p, q in zip(reference, outs, strict=True)):
                raise SystemExit(f"{name}: answers differ from near_jit.smooth")
            ratios.append(b / a)
            base.append(a)
            variant.append(b)
        print(f"{name}: reference {np.median(base) * 1e3:.1f} ms, variant {np.median(variant) * 1e3:.1f} ms, "
              f"variant / reference median {float(np.median(ratios)):.2f} (min {min(ratios):.2f}, "
              f"max {max(ratios):.2f})")
    if args.end_to_end:
        end_to_end(args.ops, args.pairs)


if __name__ == "__main__":
    main()
