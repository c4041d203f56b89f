"""The note of an op beyond a class fitted only on runs without FLOPs (AlexNet's fp32 copies on the A100) names
that, not "fitted nan-nan" (qa14: the README's calibrated /predict example answered "log10 FLOPs 7.39 (fitted
nan-nan)")."""

from __future__ import annotations

import perfmodel
from perfmodel.calibration import fit_calibration, predict_calibrated
from perfmodel.calibration.model import BEYOND_NOTE

HW = "nvidia-a100-sxm4-80gb"


def _copy(n: int, flops_per_element: float) -> dict[str, object]:
    return {"kind": "elementwise", "shape": [n], "dtype": "fp32", "flops_per_element": flops_per_element}


def test_beyond_a_class_fitted_without_flops_says_so() -> None:
    ops = [_copy(n, 0.0) for n in (221184, 524288, 1 << 20, 5537792, 1 << 23, 24780800) * 2]
    times = perfmodel.predict_many(HW, ops).time_s * 1.2
    cal = fit_calibration(HW, list(zip(ops, times.tolist(), strict=True)), folds=2)
    assert cal.report["classes"]["elementwise:fp32"]["size_range"]["log10_flops"] is None
    out = predict_calibrated(HW, [_copy(24780800, 1.0)], cal)
    assert out.in_calibrated_range is not None and not bool(out.in_calibrated_range[0])
    notes = [n for n in out.notes.get(0, []) if n.startswith(BEYOND_NOTE)]
    assert notes and "log10 FLOPs 7.39 (the fitted runs do no FLOPs)" in notes[0] and "nan" not in notes[0]
