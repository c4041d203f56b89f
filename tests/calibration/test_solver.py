"""The calibration's own bounded soft-L1 Levenberg–Marquardt solver (``calibration.solver``) against scipy's
``least_squares`` (the reference it replaced): the same cost on the fit's own problems, with and without repeats
of one op, and on bounded problems whose optimum lies on a bound."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import least_squares  # type: ignore[import-untyped,unused-ignore]

from perfmodel.calibration import curve, fit, shape, solver
from perfmodel.calibration.curve import Features


def _runs(rows: int, seed: int, repeats: int = 1) -> tuple[Features, np.ndarray, np.ndarray]:
    """Runs of a known ramp with shape effects, 3 % noise, 5 % of runs 5x slow; each op ``repeats`` times."""
    rng = np.random.default_rng(seed)
    distinct = rows // repeats
    shapes = np.zeros((distinct, shape.N_SHAPE))
    shapes[:, 0] = rng.integers(0, 4, distinct)
    shapes[:, 1] = rng.normal(0.0, 1.0, distinct)
    f = Features(rng.uniform(1e-6, 5e-6, distinct), rng.uniform(1e-6, 1e-3, distinct), rng.uniform(0.0, 1.0, distinct),
                 rng.uniform(6.0, 12.0, distinct), rng.uniform(4.0, 9.0, distinct), np.ones(distinct, dtype=bool),
                 shapes)
    groups = np.repeat(np.arange(distinct), repeats)
    f = f.take(groups)
    truth = curve.IDENTITY.copy()
    truth[[0, 1, 2, 3, 5, 6, 7, curve.N_CURVE, curve.N_CURVE + 1]] = [0.3, 0.2, 0.8, 8.5, 0.1, 0.5, 6.0, 0.2, -0.1]
    seconds = curve.time_s(truth, f) * np.exp(0.03 * rng.standard_normal(groups.size))
    return f, np.where(rng.random(groups.size) < 0.05, 5.0 * seconds, seconds), groups


def _scipy_cost(problem: fit._Problem, x0: np.ndarray) -> float:
    span = problem.upper - problem.lower
    result = least_squares(problem.residuals, np.clip(x0, problem.lower + 1e-6 * span, problem.upper - 1e-6 * span),
                           jac=problem.jacobian, bounds=(problem.lower, problem.upper), loss="soft_l1",
                           f_scale=fit.LOSS_SCALE, x_scale=fit.PRIOR_SD[problem.free], max_nfev=2000, ftol=1e-12,
                           xtol=1e-12, gtol=1e-12)
    return float(result.cost)


@pytest.mark.parametrize(("form", "repeats", "seed"), [("scale", 1, 0), ("ramp", 1, 1), ("ramp+shape", 1, 2),
                                                       ("ramp+shape", 4, 3), ("scale+shape", 3, 4)])
def test_the_fit_reaches_scipys_cost(form: str, repeats: int, seed: int) -> None:
    f, measured, groups = _runs(480, seed, repeats)
    theta = fit.fit_theta(f, measured, None, form, groups=groups if repeats > 1 else None)
    problem = fit._problem(f, measured, None, form)  # every run its own row: the plain definition
    ours = solver.robust_cost(problem.residuals(theta[problem.free]), fit.LOSS_SCALE)
    start = fit.prior_for(f)
    if form.startswith("ramp"):
        start[3], start[7] = float(np.median(f.log10_flops)), float(np.median(f.log10_bytes))
    reference = _scipy_cost(problem, start[problem.free])
    assert ours <= reference * (1.0 + 1e-4)  # the fit's own stopping tolerance is 1e-5
    assert ours < 0.5 * solver.robust_cost(problem.residuals(start[problem.free]), fit.LOSS_SCALE)


@pytest.mark.parametrize("repeats", [3, 1])
def test_repeats_give_the_normal_equations_of_every_run(repeats: int) -> None:
    """Grouped rows (repeats of one op; or every run its own op, ids in shuffled order) sum to the per-run
    normal equations."""
    f, measured, groups = _runs(300, 5, repeats)
    groups = np.random.default_rng(1).permutation(int(groups.max()) + 1)[groups]
    plain = fit._problem(f, measured, None, "ramp+shape")
    grouped = fit._problem(f, measured, None, "ramp+shape", groups)
    assert len(grouped.f.body_s) == 300 // repeats
    x = plain.mean[plain.free] + 0.05
    r = plain.residuals(x)
    np.testing.assert_allclose(grouped.residuals(x), r, rtol=1e-12, atol=1e-15)
    z = 1.0 + (r / fit.LOSS_SCALE) ** 2
    h_plain, g_plain = solver.dense_normal_equations(plain.jacobian)(x, r, 1.0 / np.sqrt(z), z ** -1.5)
    h_grouped, g_grouped = grouped.normal_equations(x, r, 1.0 / np.sqrt(z), z ** -1.5)
    np.testing.assert_allclose(h_grouped, h_plain, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(g_grouped, g_plain, rtol=1e-9, atol=1e-12)


def test_an_optimum_on_a_bound_is_found_there() -> None:
    """A robust line fit whose slope is bounded below the data's: the solution sits on the bound, as scipy's."""
    rng = np.random.default_rng(7)
    t = np.linspace(0.0, 1.0, 200)
    y = 2.0 + 3.0 * t + 0.01 * rng.standard_normal(t.size)
    design = np.column_stack([np.ones_like(t), t])

    def residuals(x: np.ndarray) -> np.ndarray:
        out: np.ndarray = design @ x - y
        return out
    lower, upper = np.array([-10.0, -10.0]), np.array([10.0, 2.5])
    ours = solver.solve(residuals, solver.dense_normal_equations(lambda x: design), np.zeros(2), lower, upper,
                        np.ones(2), 0.05, 200, 1e-10)
    reference = least_squares(residuals, np.zeros(2), bounds=(lower, upper), loss="soft_l1", f_scale=0.05,
                              ftol=1e-12, xtol=1e-12, gtol=1e-12)
    assert ours.status == 1
    assert ours.x[1] == pytest.approx(2.5)
    assert ours.cost <= float(reference.cost) * (1.0 + 1e-6)
    np.testing.assert_allclose(ours.x, reference.x, atol=1e-4)


def test_the_evaluation_budget_is_kept() -> None:
    f, measured, _ = _runs(200, 8)
    problem = fit._problem(f, measured, None, "ramp")
    out = solver.solve(problem.residuals, problem.normal_equations, problem.mean[problem.free], problem.lower,
                       problem.upper, fit.PRIOR_SD[problem.free], fit.LOSS_SCALE, 3, 1e-12)
    assert out.evaluations <= 3 and out.status == 0
