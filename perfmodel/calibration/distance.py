"""How far an op lies from its class's fitted ops, and how much wider its band is for it (a locally adaptive band).

A class's in-range band comes from k-fold runs, each held out at some distance from the other folds' ops; a new op
may sit nearer (a size between two fitted ones) or farther (a model family unlike the fitted ones). Distances are
Euclidean over (log10 FLOPs, log10 bytes, log10(2) x shape numbers): decades, shape numbers being mostly log2
quantities. The band's spread grows as ρ^p with ρ = distance / the class's median held-out distance, p fitted
per device on its held-out runs (``spread_exponent``); ρ is clipped to the range those runs cover, so nothing is
extrapolated. The band is the conformal band of the residuals divided by their spread (normalised conformal
scores: Lei et al. 2018, section 5.2), times the op's spread.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfmodel.calibration.curve import Features
from perfmodel.ops.base import FloatArray, IntArray

SHAPE_UNIT = math.log10(2.0)  # a shape number unit (a halving, log2 of a ratio) in decades
MAX_POINTS = 2500  # fitted ops kept per class (a fixed random subset beyond; as the local correction's)
BLOCK = 2048  # rows whose distances are computed at once (BLOCK x points floats)
RHO_RANGE = (0.1, 0.9)  # quantiles of the held-out runs' ρ the spread is trusted between
MAX_EXPONENT = 1.0  # at most linear growth of the spread with distance
USE_SHARED = True  # the compiled nearest point without the coordinates all points and rows share (same bits)
# Nearer than a class's own held-out runs (ρ below their 10 % quantile ``bridge_rho``): the spread falls as a Wiener
# process's variance with a nugget, g² + (1 - g²) ρ / bridge_rho, from 1 at bridge_rho to g² at a fitted op itself
# (g: the class's in-sample band over its held-out one). Off: ρ is clipped at the device's range (never narrower).
BRIDGE = False


def coordinates(f: Features) -> FloatArray:
    """Per row: log10 FLOPs, log10 bytes, and the shape numbers in decades (n x (2 + N_SHAPE))."""
    out: FloatArray = np.column_stack([f.log10_flops, f.log10_bytes, SHAPE_UNIT * f.shape])
    return out


def nearest(x: FloatArray, points: FloatArray) -> FloatArray:
    """Per row of ``x``, the distance to the nearest of ``points`` (inf when there are none)."""
    out = np.full(len(x), math.inf)
    if not len(points):
        return out
    squared = (points ** 2).sum(axis=1)
    for start in range(0, len(x), BLOCK):
        block = x[start:start + BLOCK]
        d2 = (block ** 2).sum(axis=1)[:, None] + squared[None, :] - 2.0 * block @ points.T
        out[start:start + BLOCK] = np.sqrt(np.maximum(d2.min(axis=1), 0.0))
    return out


def shared_values(points: FloatArray) -> FloatArray:
    """Per coordinate of ``points``, the one finite value every point has there (nan where they differ; nan for the
    first coordinate, which the compiled kernels search along)."""
    out = np.full(points.shape[1], math.nan)
    if len(points):
        same = (points == points[0]).all(axis=0) & np.isfinite(points[0])
        out[same] = points[0][same]
    out[:1] = math.nan
    return out


def without_shared(rows: FloatArray, points: FloatArray, shared: FloatArray
                   ) -> tuple[FloatArray, FloatArray, IntArray | None]:
    """``rows`` and ``points`` (as many coordinates) less each coordinate where every point holds ``shared``'s value
    and every row too, and the coordinates kept (None: all): their difference there is 0.0, its square +0.0, and
    adding +0.0 to a sum of squares (>= +0.0) leaves it as it is, so the compiled kernels' distances (Σ (x_j − p_j)²
    in coordinate order) are the same floats without it. The first coordinate is always kept."""
    fixed = ~np.isnan(shared)
    if fixed.any():
        fixed[fixed] = (rows[:, fixed] == shared[fixed]).all(axis=0)
    if not fixed.any():
        return rows, points, None
    kept = np.flatnonzero(~fixed)
    return np.ascontiguousarray(rows[:, kept]), np.ascontiguousarray(points[:, kept]), kept


def sorted_points(points: FloatArray) -> tuple[IntArray, FloatArray]:
    """(order, points[order]): ``points`` sorted by their first coordinate (log10 FLOPs), contiguous float64."""
    order = np.argsort(points[:, 0], kind="stable")
    out: FloatArray = np.ascontiguousarray(points[order], dtype=np.float64)
    return order, out


def held_out_distances(x: FloatArray, fold: IntArray) -> FloatArray:
    """Per run held out in k-fold CV (``fold`` >= 0), its distance to the nearest op of the other folds (nan for
    runs not held out)."""
    out = np.full(len(x), np.nan)
    for j in np.unique(fold[fold >= 0]).tolist():
        test, train = fold == j, (fold >= 0) & (fold != j)
        if train.any():  # once per distinct held-out op (a trace's runs repeat their ops)
            distinct, inverse = np.unique(x[test], axis=0, return_inverse=True)
            out[test] = nearest(distinct, np.unique(x[train], axis=0))[inverse.ravel()]
    return out


def spread_exponent(rho: FloatArray, residuals: FloatArray, cls: IntArray) -> float:
    """p in |r| ~ ρ^p: the least-squares slope of log |r| on log ρ within classes (each class's means taken out),
    over held-out runs with ρ > 0 and r != 0; clipped to 0..``MAX_EXPONENT`` (0 with fewer than 10 runs)."""
    ok = np.isfinite(rho) & (rho > 0) & np.isfinite(residuals) & (residuals != 0)
    if int(ok.sum()) < 10:
        return 0.0
    lx, ly, c = np.log(rho[ok]), np.log(np.abs(residuals[ok])), cls[ok]
    counts = np.bincount(c)
    safe = np.maximum(counts, 1)
    lx = lx - (np.bincount(c, lx) / safe)[c]
    ly = ly - (np.bincount(c, ly) / safe)[c]
    spread = float((lx ** 2).sum())
    if spread <= 0:
        return 0.0
    return float(min(max(float((lx * ly).sum()) / spread, 0.0), MAX_EXPONENT))


@dataclass(frozen=True)
class DistanceScale:
    """A class's band spread as a function of an op's distance to its fitted ops."""

    points: FloatArray  # fitted ops' coordinates (distinct, at most MAX_POINTS)
    typical: float  # median distance of the class's in-range held-out runs to the other folds' ops (ρ = 1)
    exponent: float  # p
    rho_low: float  # ρ is clipped to [rho_low, rho_high]
    rho_high: float
    bridge_rho: float = 0.0  # ρ below which the bridge narrows the band (0: never; ``BRIDGE``)
    nugget: float = 1.0  # g: the spread at ρ = 0 relative to that at ``bridge_rho``

    def factor(self, x: FloatArray) -> FloatArray:
        """Per row of coordinates ``x``: how many times the class's band (at ρ = 1) its band is. The nearest point
        is found by ``near_jit.nearest`` (one thread, a search outwards along log10 FLOPs) where the process uses
        the compiled kernels, else by ``nearest`` in numpy (the reference: the same up to round-off)."""
        from perfmodel.calibration.local import near_kernels
        from perfmodel.search import gemm_kernel

        kernels = near_kernels() if gemm_kernel.use_kernel(len(x) * len(self.points)) else None
        if kernels is None or not len(x) or not len(self.points) or not np.isfinite(x).all():
            return self.spread(nearest(x, self.points) / self.typical)
        points = self._by_first
        start = np.searchsorted(points[:, 0], x[:, 0], side="left")
        out = np.empty(len(x))
        rows = np.ascontiguousarray(x[:, :points.shape[1]], dtype=np.float64)  # the kernel reads no more columns
        if USE_SHARED:
            rows, points, _ = without_shared(rows, points, self._shared)
        kernels[1](rows, points, start, out)
        return self.spread(out / self.typical)

    @functools.cached_property
    def _by_first(self) -> FloatArray:
        return sorted_points(self.points)[1]

    @functools.cached_property
    def _shared(self) -> FloatArray:
        return shared_values(self._by_first)

    def spread(self, rho: FloatArray) -> FloatArray:
        rho = np.nan_to_num(rho, nan=1.0)
        out: FloatArray = np.clip(rho, self.rho_low, self.rho_high) ** self.exponent
        if self.bridge_rho > 0:
            near = rho < self.bridge_rho
            at = min(max(self.bridge_rho, self.rho_low), self.rho_high) ** self.exponent
            g2 = self.nugget ** 2
            out = np.where(near, at * np.sqrt(g2 + (1.0 - g2) * np.maximum(rho, 0.0) / self.bridge_rho), out)
        return out

    def to_json(self) -> dict[str, Any]:
        out = {"points": self.points.tolist(), "typical": self.typical, "exponent": self.exponent,
               "rho_range": [self.rho_low, self.rho_high]}
        if self.bridge_rho > 0:
            out["bridge"] = [self.bridge_rho, self.nugget]
        return out

    @staticmethod
    def from_json(data: dict[str, Any]) -> DistanceScale:
        points = np.array(data["points"], dtype=float).reshape(len(data["points"]), -1)
        low, high = (float(v) for v in data["rho_range"])
        bridge, nugget = (float(v) for v in data.get("bridge", (0.0, 1.0)))
        return DistanceScale(points, float(data["typical"]), float(data["exponent"]), low, high, bridge, nugget)


def fitted_points(x: FloatArray, seed: int) -> FloatArray:
    """The distinct rows of ``x``; a fixed random ``MAX_POINTS`` of them beyond that."""
    points = np.unique(x, axis=0)
    if len(points) > MAX_POINTS:
        points = points[np.sort(np.random.default_rng(seed).choice(len(points), MAX_POINTS, replace=False))]
    out: FloatArray = points
    return out
