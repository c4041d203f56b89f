"""The numba loops behind applying a calibration's fitted points: the local correction's kernel smoother
(``local.LocalCorrection.log_factor``) and the distance band's nearest fitted op (``distance.DistanceScale.factor``).

The numpy versions stay the reference and the fallback (``PERFMODEL_NO_JIT=1``, or a process that has not loaded
the compiled kernels: ``gemm_kernel.use_kernel``). They build rows x points matrices through BLAS (|x|² + |p|² −
2 x·p), whose threads spin on the other cores after each product: on a busy 2-core machine that tripled the CPU time
of applying a calibration. These loops run on one thread, visit only the points a row can reach (points sorted by
their first coordinate, log10 FLOPs: ``lo``/``hi`` per row, or a search outwards from the row's place that stops
once the first coordinate alone is farther than the nearest so far) and compute each distance as Σ (x_j − p_j)²,
which equals the expansion up to its round-off (the expansion loses more: it cancels). Imported on first use.
"""

from __future__ import annotations

import math

import numba

from perfmodel.ops.base import FloatArray, IntArray


@numba.njit(cache=True, error_model="numpy")
def smooth(x: FloatArray, points: FloatArray, runs: FloatArray, residuals: FloatArray, scale: float, shrink: float,
           lo: IntArray, hi: IntArray, reach2: float, out: FloatArray) -> None:
    """``out[r]`` = Σ w_p r_p / (``shrink`` + Σ w_p), w_p = exp(``scale`` |x_r − p|²) n_p, over points ``lo[r]`` to
    ``hi[r]`` (``points`` sorted by column 0; ``scale`` = −1 / 2h²) within ``reach2`` (squared distance) of the
    row: the points farther along column 0 are outside ``lo``..``hi``, the others are skipped before their exp."""
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
            w = math.exp(d2 * scale) * runs[p]
            numerator += w * residuals[p]
            total += w
        out[r] = numerator / (shrink + total)


@numba.njit(cache=True, error_model="numpy")
def smooth_screened(x: FloatArray, points: FloatArray, runs: FloatArray, residuals: FloatArray, scale: float,
                    shrink: float, lo: IntArray, hi: IntArray, reach2: float, screen: int, out: FloatArray) -> None:
    """``smooth``, to the bit, with a pair first rejected on coordinate ``screen`` alone ((x_s − p_s)² > ``reach2``)
    before its full distance: the full sum adds that same rounded square and others >= 0 in rounded (monotone)
    additions, so it is at least as large and ``smooth`` rejects the pair too; the pairs kept, their distances and
    the order of their sums are ``smooth``'s. ``screen`` is the coordinate after log10 FLOPs with the widest spread
    of the points (``LocalCorrection.screen``): on the Vidur A100 calibration it rejects half the window's pairs."""
    d = x.shape[1]
    for r in range(x.shape[0]):
        numerator = 0.0
        total = 0.0
        xs = x[r, screen]
        for p in range(lo[r], hi[r]):
            gap = xs - points[p, screen]
            if gap * gap > reach2:
                continue
            d2 = 0.0
            for j in range(d):
                diff = x[r, j] - points[p, j]
                d2 += diff * diff
            if d2 > reach2:
                continue
            w = math.exp(d2 * scale) * runs[p]
            numerator += w * residuals[p]
            total += w
        out[r] = numerator / (shrink + total)


@numba.njit(inline="always", cache=True, error_model="numpy")
def _squared_distance(x: FloatArray, r: int, points: FloatArray, p: int) -> float:
    """Squared Euclidean distance between row ``r`` of ``x`` and row ``p`` of ``points``."""
    d2 = 0.0
    for j in range(points.shape[1]):
        diff = x[r, j] - points[p, j]
        d2 += diff * diff
    return d2


@numba.njit(cache=True, error_model="numpy")
def nearest(x: FloatArray, points: FloatArray, start: IntArray, out: FloatArray) -> None:
    """``out[r]``: the distance from row ``r`` of ``x`` to the nearest of ``points`` (sorted by column 0; ``start[r]``
    the first point whose column 0 is >= the row's), searched outwards from ``start[r]`` in both directions until
    the first coordinate's gap alone reaches the nearest distance found."""
    m = points.shape[0]
    for r in range(x.shape[0]):
        best = math.inf
        x0 = x[r, 0]
        for p in range(start[r], m):
            gap = points[p, 0] - x0
            if gap * gap >= best:
                break
            best = min(best, _squared_distance(x, r, points, p))
        for p in range(start[r] - 1, -1, -1):
            gap = x0 - points[p, 0]
            if gap * gap >= best:
                break
            best = min(best, _squared_distance(x, r, points, p))
        out[r] = math.sqrt(best)


__all__ = ["nearest", "smooth", "smooth_screened"]
