"""Coverage on a synthetic heteroscedastic set: classes 15x apart in noise, and noise growing with size inside
one class; the calibrated 10-90 % interval must hold 75-85 % of fresh runs drawn as the fitted ones were."""

from __future__ import annotations

from typing import Any

import numpy as np
from synthetic_ops import random_gemms, random_norms

import perfmodel
from perfmodel.calibration import fit_calibration, predict_calibrated

HW = "nvidia-a100-sxm4-80gb"
FRESH = 600  # fresh runs per class: a coverage's sampling sd is sqrt(0.16 / 600) = 0.016


def _softmaxes(n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    rows = np.round(2 ** rng.uniform(4, 14, size=n)).astype(int)
    return [{"kind": "softmax", "shape": [int(r), 2048], "dtype": "fp16"} for r in rows]


def _measured(ops: list[dict[str, Any]], rng: np.random.Generator) -> np.ndarray:
    """The model's time times a per-class bias and lognormal noise whose log sd is the class's (GEMMs: growing from
    0.05 at the smallest to 0.35 at the largest, by log FLOPs)."""
    batch = perfmodel.predict_many(HW, ops)
    kind = np.array([op["kind"] for op in ops])
    size = np.log10(np.maximum(batch.flops, 1.0))  # GEMMs of 2^6..2^13 per side: 10^5.7..10^12.3 FLOPs
    gemm_sd = 0.05 + 0.3 * np.clip((size - 5.7) / 6.6, 0.0, 1.0)
    sd = np.select([kind == "matmul", kind == "rmsnorm"], [gemm_sd, 0.02], 0.1)
    bias = np.select([kind == "matmul", kind == "rmsnorm"], [1.3, 0.8], 1.1)
    out: np.ndarray = np.asarray(batch.time_s) * bias * np.exp(sd * rng.standard_normal(len(ops)))
    return out


def _fit_and_score(seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    fit_ops = random_gemms(200, rng) + random_norms(150, rng) + _softmaxes(150, rng)
    cal = fit_calibration(HW, list(zip(fit_ops, _measured(fit_ops, rng).tolist(), strict=True)),
                          residual_trees=False)
    out: dict[str, float] = {}
    inside_all = []
    for name, make in (("matmul", random_gemms), ("rmsnorm", random_norms), ("softmax", _softmaxes)):
        fresh = make(FRESH, rng)
        batch = predict_calibrated(HW, fresh, cal)
        assert batch.interval_s is not None
        measured = _measured(fresh, rng)
        inside = (measured >= batch.interval_s[:, 0]) & (measured <= batch.interval_s[:, 1])
        out[name] = float(inside.mean())
        inside_all.append(inside)
    out["all"] = float(np.concatenate(inside_all).mean())
    return out


def test_the_interval_holds_75_to_85_percent_of_fresh_heteroscedastic_runs() -> None:
    """Per class and over all: inside 0.75-0.85 (a band pooled over the classes would hold ~1.0 of the exact norms
    and ~0.6 of the noisy GEMMs; one blind to the GEMMs' growing noise over-covers the small ones and misses the
    large ones, and the mean of those is not what is asserted per class)."""
    for seed in (41, 42):  # two draws of the fitted runs and the fresh ones
        coverage = _fit_and_score(seed)
        for name, value in coverage.items():
            assert 0.75 <= value <= 0.85, (seed, name, coverage)


def test_a_band_blind_to_the_classes_noise_would_fail_the_aim() -> None:
    """The check can fail: one band for every class (the 10-90 % of all fresh runs' log residuals pooled) holds far
    more than 85 % of the exact norms and under 75 % of the GEMMs."""
    rng = np.random.default_rng(41)
    gemm, norm = random_gemms(FRESH, rng), random_norms(FRESH, rng)
    log_ratio = {name: np.log(_measured(ops, rng) / np.asarray(perfmodel.predict_many(HW, ops).time_s))
                 for name, ops in (("matmul", gemm), ("rmsnorm", norm))}
    centred = {name: r - np.median(r) for name, r in log_ratio.items()}  # the classes' biases taken out
    low, high = np.quantile(np.concatenate(list(centred.values())), [0.1, 0.9])
    inside = {name: float(np.mean((r >= low) & (r <= high))) for name, r in centred.items()}
    assert inside["rmsnorm"] > 0.85 and inside["matmul"] < 0.75
