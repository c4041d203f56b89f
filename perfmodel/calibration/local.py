"""Local correction: what the smooth curve leaves, smoothed over the measured shapes nearby.

The curve (``curve``) is one smooth function of size and shape numbers per class. Real libraries
pick kernels per shape (cuBLAS heuristics, cuDNN algorithms, one-block-per-row kernels), so the
curve's residuals come in neighbourhoods: shapes close to a measured one tend to miss the curve
the same way. The local correction is a kernel (Nadaraya-Watson) regression of the curve's log
residuals r over the fitted runs, shrunk towards zero:

    c(x) = Σ n_i w_i(x) r_i / (λ + Σ n_i w_i(x)),   w_i(x) = exp(−|x − x_i|² / 2h²)
    t_cal → t_cal · exp(c(x))

with x = (log10 FLOPs, log10 bytes, s · shape numbers) (``coordinates``), one point per distinct
op (n_i its runs, r_i their mean residual). Far from every measured op Σ n_i w_i → 0 and so does
c: the correction never extrapolates; with λ = 1 a single run one bandwidth away moves a
prediction by a third of its residual. The bandwidth h, the shrinkage λ and the shape scale s are
chosen per class by leave-one-op-out cross-validation on the fitted runs; a class keeps no
correction unless it has ``MIN_OPS`` distinct ops and the correction lowers that held-out loss by
``MARGIN``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.calibration.curve import Features
from perfmodel.calibration.distance import shared_values, sorted_points, without_shared
from perfmodel.calibration.fit import MIN_RAMP_SHAPES, held_out_loss
from perfmodel.calibration.shape import N_SHAPE
from perfmodel.ops.base import FloatArray, IntArray

BANDWIDTHS = (0.05, 0.1, 0.2, 0.3, 0.5)  # h, in decades of size (and scaled shape units)
SHRINKS = (0.3, 1.0, 3.0, 10.0)  # λ, in runs
SHAPE_SCALES = (0.0, 0.1, 0.3, 1.0)  # s: decades per unit of a shape number (0: size alone)
MIN_OPS = MIN_RAMP_SHAPES  # distinct ops a class needs, as for the ramp: fewer, and the choice of (h, λ, s) is noise
MARGIN = 0.95  # the held-out loss must drop by 5 % for a class to keep its correction
MAX_POINTS = 2500  # distinct ops kept per class (memory of the fit: a few MAX_POINTS^2 float arrays, 50 MB each)
CHUNK_ROWS = 2048  # rows per block of the distance matrix when applying (memory: CHUNK_ROWS x points)
# leave out of the compiled distances a coordinate every point and row share (``LocalCorrection._smoothed``): same bits
USE_CONSTANT = True
NEGLIGIBLE = 2.0 ** -60  # the most the points a compiled c(x) leaves out may change it (exp(c): < 1e-18 relative)


def coordinates(f: Features, shape_scale: float) -> FloatArray:
    """Each row's position: log10 FLOPs, log10 bytes, then ``shape_scale`` x each shape number."""
    out: FloatArray = np.column_stack([f.log10_flops, f.log10_bytes, f.shape * shape_scale])
    return out


@dataclass(frozen=True)
class LocalCorrection:
    """Measured points of one class and the smoother over them."""

    points: FloatArray  # m x d coordinates, one per distinct op
    residuals: FloatArray  # m: mean log(t_measured / t_curve) of its runs
    runs: FloatArray  # m: runs per point
    bandwidth: float
    shrink: float
    shape_scale: float
    loo_residuals: FloatArray  # per fitted run: log(t_measured / t_corrected) with its op left out (or not a point)
    fold_residuals: FloatArray = dataclasses.field(default_factory=lambda: np.zeros(0))  # ``fit_local``'s ``fold``

    def log_factor(self, f: Features) -> FloatArray:
        """c(x) per row of ``f`` (0 far from every measured point): compiled (``near_jit.smooth``, the points within
        ``reach`` along log10 FLOPs) where the process uses the compiled kernels, else over every point in numpy
        (the reference: the same up to round-off)."""
        x = coordinates(f, self.shape_scale)[:, :self.points.shape[1]]  # stored before later shape numbers: fewer
        smooth = _compiled_smooth(len(x) * len(self.points))
        if smooth is not None and len(x) and np.isfinite(x).all():
            return self._smoothed(x, smooth)
        out = np.zeros(len(x))
        for start in range(0, len(x), CHUNK_ROWS):
            weight = _weights(x[start:start + CHUNK_ROWS], self.points, self.bandwidth) * self.runs
            out[start:start + CHUNK_ROWS] = (weight @ self.residuals) / (self.shrink + weight.sum(axis=1))
        return out

    @functools.cached_property
    def reach(self) -> float:
        """The distance beyond which the points, all of them together, change c(x) by under ``NEGLIGIBLE``: leaving
        out points of weights w_i (sum w, sum of w_i r_i s) changes c = S / (λ + W) by |s − c w| / (λ + W − w)
        <= (Σ w_i |r_i| + |r|max w) / λ, as |c| <= |r|max; beyond h √(2T) each w_i <= n_i e^(−T), so
        T = ln((Σ n |r| + |r|max Σ n) / (λ ``NEGLIGIBLE``)) bounds the change. A point that far along log10 FLOPs
        alone is that far in all coordinates."""
        spread = float(np.abs(self.residuals) @ self.runs + np.abs(self.residuals).max(initial=0.0) * self.runs.sum())
        if not spread > 0:
            return 0.0
        cut = math.log(spread / (self.shrink * NEGLIGIBLE))
        return self.bandwidth * math.sqrt(2.0 * max(cut, 0.0))

    @functools.cached_property
    def _by_first(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(points, runs, residuals) sorted by log10 FLOPs."""
        order, points = sorted_points(self.points)
        return points, np.ascontiguousarray(self.runs[order], dtype=np.float64), np.ascontiguousarray(
            self.residuals[order], dtype=np.float64)

    @functools.cached_property
    def screen(self) -> int:
        """The coordinate after log10 FLOPs along which the points spread widest: ``near_jit.smooth_screened``
        rejects a pair on it before the full distance (the points within ``lo``..``hi`` are already near along
        log10 FLOPs; a wide spread leaves the most pairs farther than ``reach`` along it alone)."""
        if self.points.shape[1] < 2 or not len(self.points):
            return 0
        return 1 + int(np.argmax(np.ptp(self.points[:, 1:], axis=0)))

    @functools.cached_property
    def _constant(self) -> FloatArray:
        """Per coordinate, the one finite value every point has there (nan where they differ, or for log10 FLOPs)."""
        return shared_values(self._by_first[0])

    def _smoothed(self, x: FloatArray, smooth: Callable[..., None]) -> FloatArray:
        """``smooth`` (``near_jit.smooth_screened``: its arguments) over the points within ``reach`` along log10
        FLOPs, the rows taken in order of log10 FLOPs: neighbouring rows then see nearly the same points and the
        screen's branch goes the same way row after row (the 10k-op table's four corrections: 0.915 of the time in
        the batch's order, median of 25 alternate pairs). Each row's sum is its own, whatever the order: the same
        bits. A coordinate where every point and every row hold one finite value is left out of the distances
        (``_constant``, where ``USE_CONSTANT`` allows): its difference is 0.0, its square +0.0, and adding +0.0 to a
        sum of squares (>= +0.0) leaves it as it is; the 10k-op table's matmuls and norms keep 6 and 7 of 10
        coordinates, its elementwise chains 2."""
        points, runs, residuals = self._by_first
        order = np.argsort(x[:, 0], kind="stable")
        rows = np.ascontiguousarray(x[order], dtype=np.float64)
        lo = np.searchsorted(points[:, 0], rows[:, 0] - self.reach, side="left")
        hi = np.searchsorted(points[:, 0], rows[:, 0] + self.reach, side="right")
        screen = self.screen
        if USE_CONSTANT:
            rows, points, kept = without_shared(rows, points, self._constant)
            if kept is not None:  # the screen's place among the coordinates kept; left out: log10 FLOPs
                screen = int(np.searchsorted(kept, screen)) if screen in kept else 0
        smoothed = np.empty(len(x))
        smooth(rows, points, runs, residuals, -0.5 / self.bandwidth ** 2, float(self.shrink), lo, hi, self.reach ** 2,
               screen, smoothed)
        out = np.empty(len(x))
        out[order] = smoothed
        return out

    def to_json(self) -> dict[str, Any]:
        return {"bandwidth": self.bandwidth, "shrink": self.shrink, "shape_scale": self.shape_scale,
                "points": self.points.tolist(), "residuals": self.residuals.tolist(),
                "runs": self.runs.astype(int).tolist()}

    @staticmethod
    def from_json(data: dict[str, Any]) -> LocalCorrection:
        try:
            points = np.asarray(data["points"], dtype=float)
            residuals = np.asarray(data["residuals"], dtype=float)
            runs = np.asarray(data["runs"], dtype=float)
            bandwidth, shrink, scale = float(data["bandwidth"]), float(data["shrink"]), float(data["shape_scale"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"calibration local correction: expected bandwidth, shrink, shape_scale, points, "
                             f"residuals and runs as numbers ({err})") from None
        if points.ndim != 2 or residuals.shape != (len(points),) or runs.shape != (len(points),):
            raise ValueError("calibration local correction: points (m x d), residuals (m) and runs (m) must agree")
        if not 2 < points.shape[1] <= 2 + N_SHAPE:
            raise ValueError(f"calibration local correction: points need 3 to {2 + N_SHAPE} coordinates "
                             f"(log10 FLOPs, log10 bytes, shape numbers), got {points.shape[1]}")
        if not bandwidth > 0 or not shrink > 0:
            raise ValueError("calibration local correction: bandwidth and shrink must be positive")
        return LocalCorrection(points, residuals, runs, bandwidth, shrink, scale, np.zeros(0))


def _compiled_smooth(elements: int) -> Callable[..., None] | None:
    """``near_jit.smooth`` where ``elements`` (rows x points) go through the compiled kernels (once they are loaded,
    always: ``gemm_kernel.use_kernel``), else None (numpy)."""
    from perfmodel.search import gemm_kernel

    if not gemm_kernel.use_kernel(elements):
        return None
    kernels = near_kernels()
    return None if kernels is None else kernels[0]


@functools.cache
def near_kernels() -> tuple[Callable[..., None], Callable[..., None]] | None:
    """(``near_jit.smooth_screened``, ``near_jit.nearest``), or None where numba does not import."""
    try:
        from perfmodel.calibration import near_jit
    except ImportError:  # pragma: no cover - numba is a dependency; the numpy loops cover its absence
        return None
    return near_jit.smooth_screened, near_jit.nearest


def _distance2(x: FloatArray, points: FloatArray) -> FloatArray:
    """Squared distances, rows of ``x`` x ``points``, in the dtype of ``x`` (float32 on the fit's hot paths:
    the coordinates are centred first, so the expansion |x|² + |p|² − 2 x·p loses nothing that matters)."""
    d2: FloatArray = x @ points.T  # then in place: one rows x points array
    d2 *= -2.0
    d2 += (x * x).sum(axis=1)[:, None]
    d2 += (points * points).sum(axis=1)[None, :]
    np.maximum(d2, 0.0, out=d2)
    return d2


def _weights(x: FloatArray, points: FloatArray, bandwidth: float) -> FloatArray:
    out = _distance2(x, points)
    out *= -0.5 / bandwidth ** 2
    np.exp(out, out=out)
    return out


def _centred32(x: FloatArray, points: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``x`` and ``points`` less the points' mean, as float32 (half the memory and time of the weights)."""
    centre = points.mean(axis=0) if len(points) else np.zeros(points.shape[1])
    return (x - centre).astype(np.float32), (points - centre).astype(np.float32)


def fit_local(f: Features, residuals: FloatArray, groups: IntArray,
              fold: IntArray | None = None) -> LocalCorrection | None:
    """The (h, λ, s) with the lowest leave-one-op-out loss, or None if no choice beats no correction.

    ``residuals``: log(t_measured / t_curve) per run; ``groups``: the distinct op of each run; ``fold``: a
    fold per run (one per distinct op), for ``fold_residuals``: each run's residual after the correction
    smoothed over the other folds' ops only (what the residual trees are judged against).
    """
    ids, group = np.unique(groups, return_inverse=True)
    if ids.size < MIN_OPS:
        return None
    all_f, all_residuals, rows, group_all = f, residuals, np.arange(residuals.size), group
    if ids.size > MAX_POINTS:  # the LOO matrices are points x points: keep a fixed random subset of ops
        kept = np.zeros(ids.size, dtype=bool)
        kept[np.random.default_rng(0).choice(ids.size, MAX_POINTS, replace=False)] = True
        rows = np.flatnonzero(kept[group])
        f, residuals = f.take(rows), residuals[rows]
        group = np.unique(group[rows], return_inverse=True)[1]
    runs = np.bincount(group).astype(float)
    mean_residual = np.bincount(group, weights=residuals) / runs
    best_loss = held_out_loss(residuals) * MARGIN
    best: tuple[float, float, float, FloatArray] | None = None
    first_run = np.unique(group, return_index=True)[1]  # one row per distinct op, in group order
    runs32, mean32 = runs.astype(np.float32), mean_residual.astype(np.float32)
    for scale in SHAPE_SCALES:
        at = coordinates(f, scale)[first_run]
        points = (at - at.mean(axis=0)).astype(np.float32)  # centred float32: see ``_distance2``
        distance2 = _distance2(points, points)
        for bandwidth in BANDWIDTHS:
            weight = np.multiply(distance2, np.float32(-0.5 / bandwidth ** 2))  # in place: two points^2 arrays
            np.exp(weight, out=weight)
            weight *= runs32[None, :]
            np.fill_diagonal(weight, 0.0)  # leave the op itself out
            numerator, total = (weight @ mean32).astype(float), weight.sum(axis=1, dtype=float)
            for shrink in SHRINKS:
                left_out = residuals - (numerator / (shrink + total))[group]
                loss = held_out_loss(left_out)
                if loss < best_loss:
                    best_loss, best = loss, (bandwidth, shrink, scale, left_out)
    if best is None:
        return None
    bandwidth, shrink, scale, left_out = best
    out = LocalCorrection(coordinates(f, scale)[first_run], mean_residual, runs, bandwidth, shrink, scale, left_out)
    subset = rows.size != all_residuals.size
    if subset or fold is not None:
        every, by_fold = _applied(out, all_f, all_residuals, group_all, fold,
                                  None if fold is None else fold[rows][first_run], whole=subset)
        if every is not None:  # the ops left out of the points are held out already
            every[rows] = left_out
            out = dataclasses.replace(out, loo_residuals=every)
        if by_fold is not None:
            out = dataclasses.replace(out, fold_residuals=by_fold)
    return out


def _applied(correction: LocalCorrection, f: Features, residuals: FloatArray, groups: IntArray,
             fold: IntArray | None, point_fold: IntArray | None, whole: bool) -> tuple[FloatArray | None,
                                                                                       FloatArray | None]:
    """Per run, from one pass over the weights (distinct ops x points, ``CHUNK_ROWS`` ops at a time, float32): its
    residual less the correction over every point (if ``whole``), and less the correction smoothed over the points
    of other folds only (if ``fold`` and ``point_fold`` are given). ``groups``: each run's distinct op (0..n-1;
    its runs share coordinates and fold, so each distinct op is weighed once). The other folds' sums are the
    sums over all points less those over the op's own fold (points sorted by fold: contiguous slices)."""
    first = np.unique(groups, return_index=True)[1]
    x, points = _centred32(coordinates(f.take(first), correction.shape_scale), correction.points)
    runs, values = correction.runs, correction.residuals
    folds = fold is not None and point_fold is not None
    order = np.argsort(point_fold, kind="stable") if folds and point_fold is not None else np.arange(len(points))
    points, runs, values = points[order], runs[order].astype(np.float32), values[order].astype(np.float32)
    op_fold = fold[first] if fold is not None else np.zeros(first.size, dtype=np.int64)
    sorted_folds = point_fold[order] if point_fold is not None else np.zeros(0, dtype=np.int64)
    spans = {int(k): (int(np.searchsorted(sorted_folds, k)), int(np.searchsorted(sorted_folds, k, side="right")))
             for k in np.unique(sorted_folds)} if folds else {}
    every = np.empty(first.size) if whole else None
    by_fold = np.empty(first.size) if folds else None
    for start in range(0, first.size, CHUNK_ROWS):
        rows = slice(start, start + CHUNK_ROWS)
        weight = _weights(x[rows], points, correction.bandwidth)
        weight *= runs
        numerator, total = (weight @ values).astype(float), weight.sum(axis=1, dtype=float)
        if every is not None:
            every[rows] = numerator / (correction.shrink + total)
        if by_fold is not None:
            own_numerator, own_total = np.zeros_like(numerator), np.zeros_like(total)
            chunk_fold = op_fold[rows]
            for k, (lo, hi) in spans.items():
                mine = chunk_fold == k
                if mine.any():
                    part = weight[mine, lo:hi]
                    own_numerator[mine] = part @ values[lo:hi]
                    own_total[mine] = part.sum(axis=1, dtype=float)
            by_fold[rows] = (numerator - own_numerator) / (correction.shrink + np.maximum(total - own_total, 0.0))
    return (None if every is None else residuals - every[groups],
            None if by_fold is None else residuals - by_fold[groups])


__all__ = ["LocalCorrection", "coordinates", "fit_local"]

