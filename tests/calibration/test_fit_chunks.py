"""The fit predicts its runs in chunks (memory): the same calibration as predicting them in one batch."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel.calibration import build, fit_calibration

HW = "nvidia-a100-sxm4-80gb"


def test_chunked_model_predictions_give_the_same_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    ops = [{"kind": "matmul", "m": int(2 ** rng.uniform(6, 12)), "n": int(2 ** rng.uniform(6, 12)),
            "k": int(2 ** rng.uniform(6, 12)), "dtype": "bf16"} for _ in range(40)]
    ops += [{"kind": "softmax", "shape": [int(2 ** rng.uniform(4, 12)), 1024], "dtype": "bf16"} for _ in range(20)]
    measured = perfmodel.predict_many(HW, ops).time_s * np.exp(rng.normal(0.2, 0.1, len(ops)))
    runs = list(zip(ops, measured.tolist(), strict=True))
    whole = fit_calibration(HW, runs, residual_trees=False)
    monkeypatch.setattr(build, "PREDICT_CHUNK_OPS", 7)
    chunked = fit_calibration(HW, runs, residual_trees=False)
    assert chunked.params == whole.params
