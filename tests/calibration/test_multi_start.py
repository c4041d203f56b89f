"""The curve fit's multi-start (ramp centres at three size quantiles) runs every start briefly and only the near-best
on to convergence (``fit.START_EVALUATIONS``, ``fit.START_KEEP``): its loss is that of every start run to the end."""

from __future__ import annotations

import numpy as np
import pytest

from perfmodel.calibration import curve, fit, shape
from perfmodel.calibration.curve import Features


def _runs(rows: int, seed: int) -> tuple[Features, np.ndarray]:
    """Runs of a known ramp (efficiency falling by e^0.8 below 10^8.5 FLOPs), 3 % noise, 5 % of runs 5x slow."""
    rng = np.random.default_rng(seed)
    f = Features(rng.uniform(1e-6, 5e-6, rows), rng.uniform(1e-6, 1e-3, rows), rng.uniform(0.0, 1.0, rows),
                 rng.uniform(6.0, 12.0, rows), rng.uniform(4.0, 9.0, rows), np.ones(rows, dtype=bool),
                 np.zeros((rows, shape.N_SHAPE)))
    truth = curve.IDENTITY.copy()
    truth[[0, 1, 2, 3, 5, 6, 7]] = [0.3, 0.2, 0.8, 8.5, 0.1, 0.5, 6.0]
    seconds = curve.time_s(truth, f) * np.exp(0.03 * rng.standard_normal(rows))
    return f, np.where(rng.random(rows) < 0.05, 5.0 * seconds, seconds)


def _every_start_to_the_end(f: Features, measured: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> np.ndarray:
    with monkeypatch.context() as patch:
        patch.setattr(fit, "START_EVALUATIONS", fit.MAX_EVALUATIONS)
        return fit.fit_theta(f, measured, None, "ramp")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_brief_starts_keep_the_loss_of_every_start_run_to_the_end(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    f, measured = _runs(400, seed)
    problem = fit._problem(f, measured, None, "ramp")

    def loss(theta: np.ndarray) -> float:  # soft-L1 on the log residuals and the priors: what the fit minimises
        r = problem.residuals(theta[problem.free])
        return float(np.sum(np.sqrt(1.0 + (r / fit.LOSS_SCALE) ** 2) - 1.0))
    quick = fit.fit_theta(f, measured, None, "ramp")
    full = _every_start_to_the_end(f, measured, monkeypatch)
    assert loss(quick) <= loss(full) * (1.0 + 1e-6)  # brief tries alone, none continued: 1e-5-2e-4 above
    assert loss(quick) < 0.5 * loss(fit.prior_for(f))  # it did fit: far below the uncorrected model's loss
