"""Offline (nothing shipped from it): an unvaried-shape band learned across data sets, leaving the data set out.

Pass 1 runs the scoreboard and records, per data set, the signed log(measured / calibrated) of the scored rows
beyond their class's fitted shape range, and which of them vary a shape number the fit never varied
(``calibration.bands_apply.unvaried_band``'s rows). Pass 2 reruns it with each data set's unvaried rows given the
10-90 % of the *other* data sets' beyond-shape rows (each data set weighing the same), in place of today's band
(``--hull``: the class's beyond band hulled with it, in place of the hull with the model's band), and prints the
scoreboard. docs/accuracy.md, "Eleventh pass: the first-runs line and LLMCompass coverage (issue 22, calib14)".

    python benchmarks/unvaried_band_xds.py [--swap] [--hull]     # about 50 s CPU
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scoreboard as sb
from measured_data import Row, all_rows

import perfmodel
from perfmodel.calibration import Calibration, bands_apply, curve, predict_calibrated
from perfmodel.calibration import model as calibration_model
from perfmodel.ops import make_op
from perfmodel.ops.base import FloatArray

Bool = np.ndarray[Any, np.dtype[np.bool_]]
ORIGINAL_BAND = bands_apply.unvaried_band
ORIGINAL_SCORE = sb._score


class Experiment:
    def __init__(self, hull: bool) -> None:
        self.hull = hull
        self.masks: tuple[Bool, Bool] | None = None  # last call's rows: unvaried, beyond the fitted shapes
        self.band: tuple[float, float] | None = None  # the band the current data set's unvaried rows get
        self.bands: dict[str, tuple[float, float]] = {}
        self.records: list[tuple[str, float, bool, bool]] = []  # data set, log residual, unvaried, beyond shape

    def unvaried_band(self, beyond_fit: Bool, shape_low: FloatArray, shape_high: FloatArray, f: curve.Features,
                      model_log: FloatArray, time: FloatArray, model_s: FloatArray,
                      interval_log: FloatArray) -> FloatArray:
        single = shape_low == shape_high
        moved = np.abs(f.shape - shape_low) > 1e-9
        unvaried = beyond_fit & np.any(single & moved, axis=1)
        outside = np.any((f.shape < shape_low - 1e-9) | (f.shape > shape_high + 1e-9), axis=1)
        self.masks = (unvaried, beyond_fit & outside)
        out = ORIGINAL_BAND(beyond_fit, shape_low, shape_high, f, model_log, time, model_s, interval_log)
        if self.band is not None and unvaried.any():
            rows = np.flatnonzero(unvaried)
            low, high = self.band
            if self.hull:
                out[rows, 0] = np.fmin(interval_log[rows, 0], low)
                out[rows, 1] = np.fmax(interval_log[rows, 1], high)
            else:
                out[rows, 0], out[rows, 1] = low, high
        return out

    def score(self, setup: str, hw: str, cal: Calibration, fit: list[Row], test: list[Row]) -> list[sb.Score]:
        dataset = setup.split(" ")[0]
        self.band = self.bands.get(dataset)
        ops = [r.op for r in test]
        calibrated = predict_calibrated(hw, ops, cal)
        assert self.masks is not None
        unvaried, outside = self.masks
        if len(unvaried) != len(test):  # predicted once per distinct op
            _, op_row = calibration_model.distinct_ops([make_op(o) for o in ops])
            unvaried, outside = unvaried[op_row], outside[op_row]
        if not setup.startswith("vidur, A100"):
            for i, r in enumerate(test):
                self.records.append((dataset, float(np.log(r.measured_s / calibrated.time_s[i])),
                                     bool(unvaried[i]), bool(outside[i])))
        return ORIGINAL_SCORE(setup, hw, cal, fit, test)

    def learn(self) -> None:
        """Each data set's band: 10-90 % of the other data sets' beyond-shape rows, each data set weighing the same."""
        names = np.array([r[0] for r in self.records])
        residual = np.array([r[1] for r in self.records])
        unvaried = np.array([r[2] for r in self.records], dtype=bool)
        outside = np.array([r[3] for r in self.records], dtype=bool)
        for d in sorted(set(names.tolist())):
            mine = names == d
            print(f"{d}: scored {int(mine.sum())}, beyond the fitted shapes {int(outside[mine].sum())}, unvaried "
                  f"{int(unvaried[mine].sum())}")
        for d in sorted(set(names.tolist())):
            others = (names != d) & outside
            group = np.unique(names[others], return_inverse=True)[1].reshape(-1)
            order = np.argsort(residual[others])
            weight = (1.0 / np.bincount(group)[group])[order]
            cumulative = np.cumsum(weight) / weight.sum()
            values = residual[others][order]
            low, high = (float(values[min(int(np.searchsorted(cumulative, q)), values.size - 1)]) for q in (0.1, 0.9))
            self.bands[d] = (low, high)
            print(f"band for {d} from the other data sets' {int(others.sum())} beyond-shape rows: "
                  f"x{np.exp(low):.2f}..x{np.exp(high):.2f}")
        self.records.clear()


def main() -> None:
    swap = "--swap" in sys.argv
    experiment = Experiment(hull="--hull" in sys.argv)
    setattr(calibration_model, "unvaried_band", experiment.unvaried_band)  # noqa: B010 (patched for the experiment)
    sb._score = experiment.score
    rows = all_rows()
    known = set(perfmodel.list_hardware())
    sb.scoreboard(rows, known, swap=swap)
    experiment.learn()
    sb.print_scoreboard(rows, sb.scoreboard(rows, known, swap=swap), swap=swap)


if __name__ == "__main__":
    main()
