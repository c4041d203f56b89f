"""How far could any learner take the DeepBench GEMM-like rows? A gradient-boosted tree ensemble
against the calibration, on the scoreboard's split.

The scoreboard's GEMM-like p90 misses its 20 % target on the DeepBench GEMMs and convolutions.
This script asks whether that is the calibration's form or the data: per device it fits
scikit-learn's ``HistGradientBoostingRegressor`` to log(measured / model) of the same fit rows
(crc32 shape parity, ``scoreboard.fit_mask``), pooled over GEMMs, conv forward and conv backward
and every dtype, on the raw shape (log2 of every dimension, strides, padding, transposes, 8-element
alignment, the recorded Winograd choice) plus the model's own log time, and scores it on the same
held-out rows. A flexible learner with every raw dimension is the generous baseline; if it misses
by as much, the misses are per-shape library choices that nearby shapes do not share.

scikit-learn is not a perfmodel dependency (this is an analysis, not a model):

    .venv/bin/pip install scikit-learn && .venv/bin/python benchmarks/learner_ceiling.py [--swap]

It also scores the two together, the geometric mean of the calibrated and the trees' times: what led to
the calibration's residual trees (``perfmodel.calibration.boost``), so the calibration here is fitted
without them. ``--swap`` fits on the other half.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measured_data import Row, all_rows
from scoreboard import GEMM_LABELS, TARGET_P90_PCT, fit_mask

import perfmodel
from perfmodel.calibration import fit_calibration, predict_calibrated

LABEL_CODES = {label: i for i, label in enumerate(GEMM_LABELS)}
DTYPE_CODES = {"fp32": 0.0, "fp16": 1.0}


def _log2(x: float) -> float:
    return float(np.log2(max(x, 1.0)))


def raw_features(row: Row, model_s: float) -> list[float]:
    """Every dimension of the op (log2), its layout flags and the model's log time."""
    op = row.op
    head = [float(LABEL_CODES[row.label]), DTYPE_CODES[op["dtype"]] + ("compute_dtype" in op), np.log(model_s)]
    if op["kind"] == "matmul":
        m, n, k = op["m"], op["n"], op["k"]
        return [*head, _log2(m), _log2(n), _log2(k), float(op["transpose_a"]), float(op["transpose_b"]),
                float(m % 8 != 0), float(n % 8 != 0), float(k % 8 != 0), 0, 0, 0, 0, 0, 0, 0]
    p = (op["height"] + 2 * op["padding"] - op["kernel_h"]) // op["stride"] + 1
    q = (op["width"] + 2 * op["padding_w"] - op["kernel_w"]) // op["stride_w"] + 1
    return [*head, _log2(op["batch"] * p * q), _log2(op["out_channels"]),
            _log2(op["in_channels"] * op["kernel_h"] * op["kernel_w"]), 0, 0,
            float(op["in_channels"] % 8 != 0), float(op["out_channels"] % 8 != 0), 0,
            _log2(op["in_channels"]), float(op["kernel_h"]), float(op["kernel_w"]), float(op["stride"]),
            float(op["padding"]), _log2(op["batch"]), float(op.get("algorithm") == "winograd")]


def learner_times(rows: list[Row], mask: np.ndarray[Any, np.dtype[np.bool_]]) -> dict[str, Any]:
    """Per device: the held-out rows' indices and the tree ensemble's times for them (seconds)."""
    from sklearn.ensemble import HistGradientBoostingRegressor  # type: ignore[import-not-found,import-untyped,unused-ignore]

    by_hw: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if r.label in GEMM_LABELS:
            by_hw[r.hardware].append(i)
    out: dict[str, Any] = {}
    for hw, idx in sorted(by_hw.items()):
        model_s = perfmodel.predict_many(hw, [rows[i].op for i in idx], timing="kernel", space="compact").time_s
        x = np.array([raw_features(rows[i], t) for i, t in zip(idx, model_s, strict=True)])
        y = np.log(np.array([rows[i].measured_s for i in idx]) / model_s)
        fit = mask[idx]
        learner = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, min_samples_leaf=5,
                                                loss="absolute_error", random_state=0).fit(x[fit], y[fit])
        out[hw] = (np.array(idx)[~fit], model_s[~fit] * np.exp(learner.predict(x[~fit])))
    return out


def calibrated_times(rows: list[Row], mask: np.ndarray[Any, np.dtype[np.bool_]], hw: str,
                     scored: np.ndarray[Any, np.dtype[np.intp]]) -> Any:
    """The calibration fitted on the device's fit rows, without its residual trees (the curve and local
    correction these trees were first compared with), on the ``scored`` rows."""
    fit = [(r.op, r.measured_s) for r, m in zip(rows, mask, strict=True) if m and r.hardware == hw]
    calibration = fit_calibration(hw, fit, timing="kernel", residual_trees=False)
    return predict_calibrated(hw, [rows[i].op for i in scored], calibration).time_s


def _over(predicted: Any, measured: Any) -> Any:
    return np.abs(predicted / measured - 1.0) * 100.0


def main() -> None:
    try:
        import sklearn  # type: ignore[import-not-found,import-untyped,unused-ignore]  # noqa: F401
    except ImportError:
        sys.exit("needs scikit-learn (not a perfmodel dependency): .venv/bin/pip install scikit-learn")
    swap = "--swap" in sys.argv[1:]
    rows = [r for r in all_rows() if r.dataset == "deepbench" and r.label in GEMM_LABELS]
    mask = fit_mask(rows) != swap
    labels = np.array([r.label for r in rows])
    measured = np.array([r.measured_s for r in rows])
    half = "the other half (--swap)" if swap else "crc32 shape parity"
    print(f"DeepBench GEMM-like rows, held out ({half}), abs % error: calibration, tree ensemble, and their "
          "geometric mean")
    print(f"{'hardware':<24} {'op class':<11} {'rows':>5}  {'cal med':>7} {'p90':>6} {'>20%':>5}  "
          f"{'trees med':>9} {'p90':>6} {'>20%':>5}  {'both med':>8} {'p90':>6} {'>20%':>5}")
    total = {"cal": 0, "trees": 0, "both": 0, "rows": 0}
    for hw, (scored, trees_s) in learner_times(rows, mask).items():
        cal_s = calibrated_times(rows, mask, hw, scored)
        errors = {"cal": _over(cal_s, measured[scored]), "trees": _over(trees_s, measured[scored]),
                  "both": _over(np.sqrt(cal_s * trees_s), measured[scored])}
        for label in sorted(set(labels[scored])):
            sel = labels[scored] == label
            cells = []
            for name, ape in errors.items():
                over = int((ape[sel] > TARGET_P90_PCT).sum())
                total[name] += over
                cells.append(f"{np.median(ape[sel]):>7.1f} {np.percentile(ape[sel], 90):>6.1f} {over:>5}")
            total["rows"] += int(sel.sum())
            print(f"{hw:<24} {label:<11} {int(sel.sum()):>5}  {cells[0]}  {cells[1]:>23}  {cells[2]:>22}")
    print(f"rows more than {TARGET_P90_PCT:.0f} % off: calibration {total['cal']}, tree ensemble {total['trees']}, "
          f"geometric mean {total['both']} of {total['rows']}")


if __name__ == "__main__":
    main()
