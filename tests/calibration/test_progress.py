"""``fit_calibration``'s ``progress`` callback: stage names, fractions 0..1 never decreasing, bounded calls."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.calibration import fit_calibration
from perfmodel.calibration.build import STAGES
from tests.calibration.test_calibration import HW, synthetic


def test_progress_reports_every_stage_in_order() -> None:
    calls: list[tuple[str, float]] = []
    fit_calibration(HW, synthetic(60, 40, noise=0.05), progress=lambda stage, done: calls.append((stage, done)))
    stages = [stage for stage, _ in calls]
    fractions = np.array([done for _, done in calls])
    assert set(stages) <= set(STAGES)
    assert stages[0] == "model" and stages[-1] == "done" and fractions[-1] == 1.0
    assert {"hardware", "classes", "trees"} <= set(stages)
    assert np.all(np.diff(fractions) >= 0) and fractions.min() >= 0.0
    assert len(calls) <= 300
    # stages come in the order of STAGES (each starts no earlier than the previous one)
    first = [stages.index(s) for s in STAGES if s in stages]
    assert first == sorted(first)


def test_no_progress_callback_is_fine_and_empty_runs_report_done() -> None:
    calls: list[tuple[str, Any]] = []
    fit_calibration(HW, [], progress=lambda stage, done: calls.append((stage, done)))
    assert calls[0][0] == "model" and calls[-1] == ("done", 1.0)
