"""Robust fit of the calibration form (``curve``) to measured runs, and its k-fold cross-validation.

Residuals are in log time, r = log(t_cal / t_measured), so a 10 % miss weighs the same on a
2 µs kernel as on a 2 s one. The loss is soft-L1 with a scale of 5 %: residuals well above it
count linearly, so a few runs far off (a throttled repeat, a wrong shape) barely move the fit.
Weak Gaussian priors (as extra residuals) keep parameters that the data cannot see (the compute
curve of an always memory-bound class, the ramp of a class measured at one size) at the model's
values or at a related device's (``prior_mean``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfmodel.calibration import curve, shape, solver
from perfmodel.calibration.curve import Features
from perfmodel.ops.base import FloatArray, IntArray

MIN_RAMP_SHAPES = 12  # distinct ops a class needs before a size-dependent efficiency is tried
RAMP_MARGIN = 0.9  # ... and its held-out loss must beat the 3-parameter form's by 10 %
LOSS_SCALE = 0.05  # soft-L1 scale of the log-time residuals (~5 %)
PRIOR_WEIGHT = 0.03  # one prior standard deviation costs as much as a 3 % miss on one run
SHAPE_PRIOR_SD = 0.5  # log-time per unit of a shape number
SHAPE_BOUND = 3.0
PRIOR_SD = np.array([1.5, 1.0, 1.0, 2.0, 0.7, 1.0, 1.0, 2.0, 0.7, *([SHAPE_PRIOR_SD] * shape.N_SHAPE)])
LOG_WIDTH_BOUNDS = (np.log(0.1), np.log(3.0))  # ramp width 0.1-3 decades
HELD_OUT_CAP = 0.5  # |log residual| counted at most this much when forms are compared on held-out runs
MAX_EVALUATIONS = 100  # per least-squares start: 400 gave the same scoreboard to 0.1 %, at 4x the fit time
# least-squares stopping tolerances (scipy's default 1e-8): on 5,000 Vidur A100 runs the same form for every
# class and k-fold errors within 0.03 points, at 0.65x the CPU time of the curve fits
TOLERANCE = 1e-5
CV_MAX_RUNS = 4000  # runs of one class cross-validated at most (whole ops drawn at random); the final fit uses all
# several starts (a ramp's centres at three size quantiles): each runs START_EVALUATIONS evaluations, then those
# whose loss is within START_KEEP of the lowest go on to MAX_EVALUATIONS. Scoreboard (both halves, same rows): the
# same per-class tables as every start run to the end, but for one 12-row class (P100 all-reduce 13.0/18.3 ->
# 12.9/18.2 %); only the best start continued (no START_KEEP) moved the swapped Vidur A100 GEMM p90 15.5 -> 15.8 %
START_EVALUATIONS = 10
START_KEEP = 0.05


@dataclass(frozen=True)
class FitResult:
    """Fitted parameters and the log residuals log(t_measured / t_cal) per run."""

    theta: FloatArray
    residuals: FloatArray  # in-sample
    cv_residuals: FloatArray | None  # each run predicted by the fit that did not see it (nan: not held out)
    folds: int
    form: str  # the chosen form (FORMS)
    cv_outside: np.ndarray[Any, np.dtype[np.bool_]] | None = None  # held out beyond its fit's data (``outside``)
    cv_fold: IntArray | None = None  # each run's k-fold fold (-1: not held out)


def _bounds(f: Features) -> tuple[FloatArray, FloatArray]:
    lo_f, hi_f = float(f.log10_flops.min()), float(f.log10_flops.max())
    lo_b, hi_b = float(f.log10_bytes.min()), float(f.log10_bytes.max())
    w_lo, w_hi = LOG_WIDTH_BOUNDS
    beta = [SHAPE_BOUND] * shape.N_SHAPE
    lower = np.array([np.log(0.02), -3.0, -4.0, lo_f - 3.0, w_lo, -3.0, -4.0, lo_b - 3.0, w_lo, *(-b for b in beta)])
    upper = np.array([np.log(50.0), 3.0, 4.0, hi_f + 3.0, w_hi, 3.0, 4.0, hi_b + 3.0, w_hi, *beta])
    return lower, upper


def prior_for(f: Features) -> FloatArray:
    """The model itself (no correction), with ramp centres at the data's median sizes."""
    mean = curve.IDENTITY.copy()
    mean[3] = float(np.median(f.log10_flops))
    mean[7] = float(np.median(f.log10_bytes))
    return mean


_SHAPE_IDX = tuple(range(curve.N_CURVE, curve.N_PARAMS))
FORMS: dict[str, tuple[int, ...]] = {
    # the model unchanged: a calibration must beat it on held-out folds
    "none": (),
    # floor scale and one efficiency per part (b = 0): 3 parameters
    "scale": (0, 1, 5),
    # floor scale and a size-dependent efficiency per part: 9 parameters
    "ramp": tuple(range(curve.N_CURVE)),
    # either, and a log-time coefficient per shape number (``shape``)
    "scale+shape": (0, 1, 5, *_SHAPE_IDX),
    "ramp+shape": tuple(range(curve.N_PARAMS)),
}
# how many extensions of the 3-parameter form a form adds: each must earn its keep (RAMP_MARGIN)
EXTENSIONS = {"none": 0, "scale": 0, "ramp": 1, "scale+shape": 1, "ramp+shape": 2}


@dataclass(frozen=True)
class _Problem:
    """One form's least-squares problem on some runs: the free parameters, their bounds, and the log-time
    residuals (the runs' and the priors') and their normal equations as functions of the free parameters.

    ``f`` holds one row per distinct op and ``inverse`` maps each run to its row: repeats of one op share their
    prediction and their row of the Jacobian, so the normal equations sum the runs' weights per op first."""

    mean: FloatArray
    free: IntArray
    lower: FloatArray
    upper: FloatArray
    f: Features
    log_measured: FloatArray
    inverse: IntArray
    identity: bool = False  # ``inverse`` is 0..n-1: no sums per op needed
    last: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # the last evaluation's parts

    def theta(self, x: FloatArray) -> FloatArray:
        out = self.mean.copy()
        out[self.free] = x
        return out

    def residuals(self, x: FloatArray) -> FloatArray:
        """log(t_cal / t_measured) per run, then the priors' residuals; keeps the evaluation for the gradient."""
        evaluation = curve.evaluate(self.theta(x), self.f)
        self.last.clear()
        self.last.update(x=x.copy(), evaluation=evaluation)
        predicted = np.log(np.maximum(evaluation.total_s, 1e-30))
        prior = PRIOR_WEIGHT * (x - self.mean[self.free]) / PRIOR_SD[self.free]
        return np.concatenate([predicted[self.inverse] - self.log_measured, prior])

    def gradient_rows(self, x: FloatArray) -> FloatArray:
        """d log(t_cal) / d x per distinct op (rows × free parameters), from the last ``residuals`` evaluation
        when it was at ``x``."""
        if "x" not in self.last or not np.array_equal(self.last["x"], x):
            self.residuals(x)
        return curve.log_time_gradient(self.theta(x), self.f, self.free.tolist(), at=self.last["evaluation"])

    def normal_equations(self, x: FloatArray, r: FloatArray, gradient_weights: FloatArray,
                         curvature_weights: FloatArray) -> tuple[FloatArray, FloatArray]:
        """(Jᵀ diag(curvature_weights) J, Jᵀ (gradient_weights · r)) over the runs and the priors."""
        n, rows = self.inverse.size, len(self.f.body_s)
        jac = self.gradient_rows(x)
        curvature: FloatArray = curvature_weights[:n]
        pull: FloatArray = gradient_weights[:n] * r[:n]
        if not self.identity:  # sums per distinct op (else every run its own row, in order)
            curvature = np.bincount(self.inverse, curvature, minlength=rows).astype(float, copy=False)
            pull = np.bincount(self.inverse, pull, minlength=rows).astype(float, copy=False)
        prior_slope = self.prior_slope
        hessian: FloatArray = jac.T @ (curvature[:, None] * jac)
        hessian.flat[::hessian.shape[0] + 1] += curvature_weights[n:] * prior_slope ** 2
        gradient: FloatArray = jac.T @ pull + gradient_weights[n:] * r[n:] * prior_slope
        return hessian, gradient

    @property
    def prior_slope(self) -> FloatArray:
        out: FloatArray = PRIOR_WEIGHT / PRIOR_SD[self.free]
        return out

    def jacobian(self, x: FloatArray) -> FloatArray:
        """d residuals / d x per run and prior (runs + priors × free parameters)."""
        out: FloatArray = np.vstack([curve.log_time_gradient(self.theta(x), self.f)[self.inverse][:, self.free],
                                     np.diag(PRIOR_WEIGHT / PRIOR_SD[self.free])])
        return out


def distinct_rows(f: Features, groups: IntArray | None) -> tuple[Features, IntArray]:
    """One row of ``f`` per distinct op (``groups``: equal ids, equal ops) and each run's row; without groups, every
    run its own row."""
    if groups is None:
        return f, np.arange(len(f.body_s))
    _, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
    return f.take(first), inverse.astype(np.intp)


@dataclass(frozen=True)
class _Runs:
    """What every form's problem on the same runs shares (computed once per ``fit_forms``): the prior mean, the
    bounds of every parameter, which shape numbers vary, the distinct ops' rows and each run's row."""

    mean: FloatArray
    lower: FloatArray
    upper: FloatArray
    varies: np.ndarray[Any, np.dtype[np.bool_]]
    rows: Features
    inverse: IntArray
    log_measured: FloatArray
    identity: bool


def _runs(f: Features, measured_s: FloatArray, prior_mean: FloatArray | None, groups: IntArray | None) -> _Runs:
    mean = prior_for(f) if prior_mean is None else prior_mean
    varies = np.ptp(f.shape, axis=0) > 0 if f.shape.size else np.zeros(shape.N_SHAPE, dtype=bool)
    lower, upper = _bounds(f)
    rows, inverse = distinct_rows(f, groups)
    return _Runs(mean, lower, upper, varies, rows, inverse, np.log(measured_s), groups is None)


def _problem(f: Features, measured_s: FloatArray, prior_mean: FloatArray | None, form: str,
             groups: IntArray | None = None, runs: _Runs | None = None) -> _Problem:
    """``form``'s problem on these runs (``runs``: their shared parts, when the caller has them)."""
    r = _runs(f, measured_s, prior_mean, groups) if runs is None else runs
    # a shape number constant over the data cannot be told from the efficiency: it stays at the prior
    free = np.array([i for i in FORMS[form] if i < curve.N_CURVE or r.varies[i - curve.N_CURVE]], dtype=np.intp)
    return _Problem(r.mean, free, r.lower[free], r.upper[free], r.rows, r.log_measured, r.inverse, r.identity)


def fit_theta(f: Features, measured_s: FloatArray, prior_mean: FloatArray | None = None,
              form: str = "ramp", warm_start: FloatArray | None = None, groups: IntArray | None = None,
              runs: _Runs | None = None) -> FloatArray:
    """Parameters minimising the robust log-time loss plus the priors (multi-start over ramp centres,
    or the one ``warm_start`` given: the fit of the form without shape numbers, for a ``+shape`` form).

    Only the parameters of ``form`` move; the others stay at the prior mean. ``groups`` (equal ids: equal ops)
    lets repeats of one op share their evaluation of the form; ``runs``: what the forms' problems on these runs
    share (``fit_forms`` computes it once).
    """
    problem = _problem(f, measured_s, prior_mean, form, groups, runs)
    mean, free, lower, upper = problem.mean, problem.free, problem.lower, problem.upper
    if free.size == 0:
        return mean.copy()
    starts = [mean]
    if warm_start is not None:
        starts = [warm_start]
    elif form.startswith("ramp"):
        starts = []
        for q in (0.25, 0.5, 0.75):
            start = mean.copy()
            start[3] = float(np.quantile(f.log10_flops, q))
            start[7] = float(np.quantile(f.log10_bytes, q))
            starts.append(start)
        if prior_mean is not None:
            starts.append(prior_mean)
    span = upper - lower

    def run(x0: FloatArray, evaluations: int, mu: float | None = None) -> solver.Solution:
        return solver.solve(problem.residuals, problem.normal_equations,
                            np.clip(x0, lower + 1e-6 * span, upper - 1e-6 * span), lower, upper, PRIOR_SD[free],
                            LOSS_SCALE, evaluations, TOLERANCE, mu)
    if len(starts) == 1:
        return problem.theta(run(starts[0][free], MAX_EVALUATIONS).x)
    # several starts: each for START_EVALUATIONS, then those within START_KEEP of the best on to convergence
    tries = [run(start[free], START_EVALUATIONS) for start in starts]
    lowest = min(result.cost for result in tries)
    finished = [result if result.status != 0 or result.cost > lowest * (1.0 + START_KEEP) + 1e-12
                else run(result.x, MAX_EVALUATIONS, result.mu) for result in tries]
    best = min(finished, key=lambda result: result.cost)
    return problem.theta(best.x)


def fit_forms(f: Features, measured_s: FloatArray, prior_mean: FloatArray | None,
              forms: list[str], warm: dict[str, FloatArray] | None = None,
              groups: IntArray | None = None) -> dict[str, FloatArray]:
    """``fit_theta`` for each form; a form starts from ``warm[form]`` when given (one start: a cross-validation
    fold starts from the fit on all runs), else a ``+shape`` form from its base form's fit when that is in
    ``forms``."""
    out: dict[str, FloatArray] = {}
    shared = _runs(f, measured_s, prior_mean, groups)
    for form in forms:
        base = out.get(form.removesuffix("+shape")) if form.endswith("+shape") else None
        start = warm.get(form) if warm is not None else None
        out[form] = fit_theta(f, measured_s, prior_mean, form, warm_start=base if start is None else start,
                              groups=groups, runs=shared)
    return out


def fold_ids(groups: IntArray, folds: int, seed: int) -> IntArray:
    """Fold of each run: whole groups (identical ops) go to one fold, groups shuffled by ``seed``."""
    n_groups = int(groups.max()) + 1 if groups.size else 0
    order = np.random.default_rng(seed).permutation(n_groups)
    fold_of_group = np.empty(n_groups, dtype=np.int64)
    fold_of_group[order] = np.arange(n_groups) % max(folds, 1)
    out: IntArray = fold_of_group[groups]
    return out


def held_out_loss(log_residuals: FloatArray) -> float:
    """Mean |log residual| capped at ``HELD_OUT_CAP`` per run: a few wild runs do not decide."""
    return float(np.mean(np.minimum(np.abs(log_residuals), HELD_OUT_CAP)))


def cv_subset(groups: IntArray, max_runs: int, seed: int) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Runs that cross-validation holds out: all of them up to ``max_runs``, else whole distinct ops
    (``groups``) drawn at random (``seed``) until ``max_runs`` runs."""
    if groups.size <= max_runs:
        return np.ones(groups.size, dtype=bool)
    ids, group = np.unique(groups, return_inverse=True)
    order = np.random.default_rng(seed).permutation(ids.size)
    taken = np.cumsum(np.bincount(group, minlength=ids.size)[order]) <= max_runs
    chosen = np.zeros(ids.size, dtype=bool)
    chosen[order[taken]] = True
    out: np.ndarray[Any, np.dtype[np.bool_]] = chosen[group]
    return out


def fit_with_cv(f: Features, measured_s: FloatArray, groups: IntArray, folds: int, seed: int,
                prior_mean: FloatArray | None = None) -> FitResult:
    """For each form, refit ``folds`` times leaving one fold out to predict it; keep the form with
    the lower ``held_out_loss`` and fit it on every run. Above ``CV_MAX_RUNS`` runs the forms are
    cross-validated on ``cv_subset`` (whole distinct ops): the other runs get no held-out residual (nan)."""
    groups = np.unique(groups, return_inverse=True)[1]
    k = min(folds, int(groups.max()) + 1 if groups.size else 0)
    if k < 2:
        theta = fit_theta(f, measured_s, prior_mean, "scale", groups=groups)
        return FitResult(theta, np.log(measured_s / curve.time_s(theta, f)), None, 0, "scale")
    fold = np.where(cv_subset(groups, CV_MAX_RUNS, seed), fold_ids(groups, k, seed), -1)
    best: tuple[float, str, FloatArray] | None = None
    distinct = int(groups.max()) + 1
    forms = [form for form in FORMS if form in ("none", "scale") or distinct >= MIN_RAMP_SHAPES]
    cvs = {form: np.full(measured_s.size, np.nan) for form in forms}
    beyond = np.zeros(measured_s.size, dtype=bool)
    # every form on all runs first (multi-start); each fold's fit starts from it (one start, few iterations).
    # Above CV_MAX_RUNS the forms' multi-start fits use the cross-validated runs, and only the chosen form is
    # fitted on all runs, from that fit (one start): 100,000 runs fitted 5 forms x 3-4 starts on every run
    subset = fold >= 0
    sample = None if subset.all() else np.flatnonzero(subset)
    full = fit_forms(f if sample is None else f.take(sample), measured_s if sample is None else measured_s[sample],
                     prior_mean, forms, groups=groups if sample is None else groups[sample])
    for j in range(k):
        test = np.flatnonzero(fold == j)
        train = np.flatnonzero((fold != j) & (fold >= 0))
        fitted = f.take(train)
        beyond[test] = outside(f.take(test), fitted)
        held_out = curve.clip_shape(f.take(test), *map(np.array, curve.shape_range(fitted)))
        for form, theta_j in fit_forms(fitted, measured_s[train], prior_mean, forms, warm=full,
                                          groups=groups[train]).items():
            cvs[form][test] = np.log(measured_s[test] / curve.time_s(theta_j, held_out))
    for form, cv in cvs.items():
        loss = held_out_loss(cv[fold >= 0])
        loss /= RAMP_MARGIN ** EXTENSIONS[form]  # a richer form must earn its keep
        if best is None or loss < best[0]:
            best = (loss, form, cv)
    assert best is not None
    _, form, cv = best
    theta = full[form] if sample is None else fit_theta(f, measured_s, prior_mean, form, warm_start=full[form],
                                                            groups=groups)
    return FitResult(theta, np.log(measured_s / curve.time_s(theta, f)), cv, k, form, beyond, fold)


def outside(f: Features, fitted: Features) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Per row of ``f``: does it lie beyond ``fitted``'s data -- its log FLOPs or log bytes outside their fitted
    range, or any shape number outside its fitted range? (What ``in_calibrated_range`` is false for.)"""
    flops = fitted.log10_flops[fitted.has_flops]
    low, high = (np.array(v) for v in curve.shape_range(fitted))
    bounds = [(float(flops.min()), float(flops.max())) if flops.size else (np.nan, np.nan),
              (float(fitted.log10_bytes.min()), float(fitted.log10_bytes.max()))]
    outside_any: np.ndarray[Any, np.dtype[np.bool_]] = np.any(curve.beyond(
        f, np.array([bounds[0][0], bounds[1][0], *low]), np.array([bounds[0][1], bounds[1][1], *high])), axis=1)
    return outside_any


def abs_pct(log_residuals: FloatArray) -> dict[str, float]:
    """Median and p90 of |t_cal / t_measured − 1| in % from log(t_measured / t_cal)."""
    r = log_residuals[np.isfinite(log_residuals)]
    if r.size == 0:
        return {"median_abs_pct": float("nan"), "p90_abs_pct": float("nan")}
    # clipped: a run timed at 1e-300 s is a ratio past float range (inf, then NaN percentiles, then a report the
    # store refused after the whole fit); e**700 % still says "absurd"
    err = np.abs(np.exp(-np.clip(r, -700.0, 700.0)) - 1.0) * 100.0
    return {"median_abs_pct": float(np.median(err)), "p90_abs_pct": float(np.percentile(err, 90))}
