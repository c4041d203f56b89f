"""A bounded, robust (soft-L1) Levenberg–Marquardt solver for the calibration's small least-squares problems.

Minimises ``cost(x) = s² Σ_i (√(1 + r_i(x)² / s²) − 1)`` (scipy's ``least_squares(loss="soft_l1", f_scale=s)``
cost: half the sum of ρ(r²/s²)·s², ρ(z) = 2(√(1+z) − 1)) over a box ``lower ≤ x ≤ upper``.

Why not ``scipy.optimize.least_squares``: the calibration solves a few hundred problems of 3–17 parameters per
fit, most in 5–20 iterations, where scipy's trust-region-reflective bookkeeping (an SVD of the rows × parameters
Jacobian, the reflective step search) costs several times the evaluation of the form itself. Here each
iteration asks the problem for its *normal equations* (``Jᵀ W J`` and ``Jᵀ w r``: parameters × parameters),
which the problem may build from distinct ops only (repeats of one op share their row of the Jacobian), and
solves one damped parameters × parameters system. The curvature weights are scipy's for the robust loss
(ρ' + 2zρ'' = (1+z)^−3/2 for the Hessian, ρ' = (1+z)^−1/2 for the gradient), the damping is scaled by
``x_scale`` as scipy's trust region is, and its stopping tests are scipy's ``ftol``, ``xtol`` and ``gtol``.
Bounds: variables at a bound whose gradient points out of the box are held there for the step (an active set),
and the step is projected onto the box. ``tests/calibration/test_solver.py`` checks the cost it reaches against
scipy's on bounded robust problems.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from perfmodel.ops.base import FloatArray

# normal equations at x: (residuals r, their gradient weights ρ'(z), their curvature weights) -> (H, g)
NormalEquations = Callable[[FloatArray, FloatArray, FloatArray, FloatArray], tuple[FloatArray, FloatArray]]
Residuals = Callable[[FloatArray], FloatArray]
_INITIAL_DAMPING = 1e-3  # μ at the start, relative to the largest scaled curvature
_BOUND_EPS = 1e-10  # a variable within this share of its box's span of a bound is at it


@dataclass(frozen=True)
class Solution:
    """Where the solver stopped: ``x``, its ``cost``, ``status`` (0: the evaluation budget ran out, 1: converged),
    the residual evaluations it spent (``evaluations``) and its damping ``mu`` (to continue from)."""

    x: FloatArray
    cost: float
    status: int
    evaluations: int
    mu: float


def robust_cost(r: FloatArray, f_scale: float) -> float:
    """s² Σ (√(1 + (r/s)²) − 1): scipy's soft-L1 ``cost`` of the residuals ``r``."""
    return float(f_scale * f_scale * np.sum(np.sqrt(1.0 + (r / f_scale) ** 2) - 1.0))


def solve(residuals: Residuals, normal_equations: NormalEquations, x0: FloatArray, lower: FloatArray,
          upper: FloatArray, x_scale: FloatArray, f_scale: float, max_evaluations: int, tolerance: float,
          mu: float | None = None) -> Solution:
    """Minimise the soft-L1 cost of ``residuals(x)`` over ``lower ≤ x ≤ upper``, starting at ``x0`` (clipped into
    the box). ``normal_equations(x, r, gradient_weights, curvature_weights)`` returns ``(Jᵀ diag(cw) J,
    Jᵀ (gw · r))`` at ``x``. Stops when ``max_evaluations`` residual evaluations are spent (status 0) or on
    scipy's ``ftol = xtol = gtol = tolerance`` tests (status 1). ``mu``: a damping to continue from."""
    x = np.clip(np.asarray(x0, dtype=float), lower, upper)
    span = np.maximum(upper - lower, 1e-300)
    r = residuals(x)
    evaluations = 1
    cost = robust_cost(r, f_scale)
    damping = 1.0 / (x_scale * x_scale)
    hessian, gradient = _normal(normal_equations, x, r, f_scale)
    if mu is None:
        mu = _INITIAL_DAMPING * max(float(np.max(np.diag(hessian) / damping)), 1e-12)
    nu = 2.0
    near_lower, near_upper = lower + _BOUND_EPS * span, upper - _BOUND_EPS * span
    while evaluations < max_evaluations:
        held = ((x <= near_lower) & (gradient > 0)) | ((x >= near_upper) & (gradient < 0))
        free = ~held
        if float(np.max(np.abs(np.where(held, 0.0, gradient * x_scale)))) < tolerance:
            return Solution(x, cost, 1, evaluations, mu)
        if held.any():  # a held variable: its row and column decoupled, its step 0
            sub = np.where(free[:, None] & free[None, :], hessian, 0.0)
            sub.flat[::sub.shape[0] + 1] += np.where(free, mu * damping, 1.0)
            rhs = np.where(free, -gradient, 0.0)
        else:
            sub = hessian.copy()
            sub.flat[::sub.shape[0] + 1] += mu * damping
            rhs = -gradient
        try:
            step = np.linalg.solve(sub, rhs)
        except np.linalg.LinAlgError:
            mu *= nu
            nu *= 2.0
            continue
        x_new = np.clip(x + step, lower, upper)
        step = x_new - x
        if math.sqrt(float(step @ step)) <= tolerance * (tolerance + math.sqrt(float(x @ x))):
            return Solution(x, cost, 1, evaluations, mu)
        r_new = residuals(x_new)
        evaluations += 1
        cost_new = robust_cost(r_new, f_scale)
        predicted = -float(gradient @ step + 0.5 * step @ hessian @ step)
        actual = cost - cost_new
        if np.isfinite(cost_new) and actual > 0:
            ratio = actual / predicted if predicted > 0 else 1.0
            x, r, cost = x_new, r_new, cost_new
            hessian, gradient = _normal(normal_equations, x, r, f_scale)
            mu *= max(1.0 / 3.0, 1.0 - (2.0 * ratio - 1.0) ** 3)
            nu = 2.0
            if actual < tolerance * (cost + actual) and ratio > 0.25:
                return Solution(x, cost, 1, evaluations, mu)
        else:
            mu *= nu
            nu *= 2.0
    return Solution(x, cost, 0, evaluations, mu)


def _normal(normal_equations: NormalEquations, x: FloatArray, r: FloatArray,
            f_scale: float) -> tuple[FloatArray, FloatArray]:
    z = 1.0 + (r / f_scale) ** 2
    gradient_weights = 1.0 / np.sqrt(z)
    return normal_equations(x, r, gradient_weights, gradient_weights / z)


def dense_normal_equations(jacobian: Callable[[FloatArray], FloatArray]) -> NormalEquations:
    """``normal_equations`` from a dense Jacobian function (rows × parameters): for problems without repeats."""
    def normal(x: FloatArray, r: FloatArray, gradient_weights: FloatArray,
               curvature_weights: FloatArray) -> tuple[FloatArray, FloatArray]:
        jac = jacobian(x)
        hessian: FloatArray = jac.T @ (curvature_weights[:, None] * jac)
        gradient: FloatArray = jac.T @ (gradient_weights * r)
        return hessian, gradient
    return normal
