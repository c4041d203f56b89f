"""Which held-out DeepBench convolution rows lie in a layer configuration the calibration never saw?

The scoreboard splits DeepBench by crc32 parity of the shape, so whole layer configurations (filter
size, stride, padding: DeepSpeech's 5x5 stride-2 layers, ResNet's padded 1x1 stride-2 shortcut)
can fall on the scored side only. For those rows the calibration has no run of that configuration
to learn from: only the model's own physics and the shape numbers' trends carry over. This script
fits the scoreboard's calibrations (same split) and prints, per (pass, filter, stride, padding),
the fitted and scored rows and the scored rows more than 20 % off, then the totals for
configurations with and without fitted rows.

    .venv/bin/python benchmarks/unseen_configs.py
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measured_data import Row, all_rows
from scoreboard import GEMM_LABELS, TARGET_P90_PCT, fit_mask

from perfmodel.calibration import fit_calibration, predict_calibrated


def configuration(row: Row) -> str:
    """``conv2d_bwd 5x5 s2 p1``: the pass, filter, stride and padding of a convolution row."""
    op = row.op
    return f"{row.label:<10} {op['kernel_h']}x{op['kernel_w']} s{op['stride']} p{op['padding']}"


def main() -> None:
    rows = [r for r in all_rows() if r.dataset == "deepbench" and r.label in GEMM_LABELS]
    mask = fit_mask(rows)
    by_hw: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_hw[r.hardware].append(i)
    fitted: dict[str, int] = defaultdict(int)
    scored: dict[str, list[float]] = defaultdict(list)
    gemm_misses = 0
    for hw, idx in sorted(by_hw.items()):
        fit = [rows[i] for i in idx if mask[i]]
        test = [rows[i] for i in idx if not mask[i]]
        cal = fit_calibration(hw, [(r.op, r.measured_s) for r in fit])
        predicted = predict_calibrated(hw, [r.op for r in test], cal).time_s
        ape = np.abs(predicted / np.array([r.measured_s for r in test]) - 1.0) * 100.0
        for r in fit:
            if r.op["kind"] == "conv2d":
                fitted[configuration(r)] += 1
        for r, e in zip(test, ape, strict=True):
            if r.op["kind"] == "conv2d":
                scored[configuration(r)].append(float(e))
            else:
                gemm_misses += int(e > TARGET_P90_PCT)
    print(f"DeepBench convolutions by configuration (4 devices), scored rows more than {TARGET_P90_PCT:.0f} % off")
    print(f"{'configuration':<28} {'fit':>5} {'score':>5} {'> 20 %':>6}")
    totals = {"seen": [0, 0], "unseen": [0, 0]}
    for config in sorted(set(fitted) | set(scored)):
        errors = np.array(scored.get(config, []))
        misses = int((errors > TARGET_P90_PCT).sum())
        part = totals["seen" if fitted.get(config) else "unseen"]
        part[0] += errors.size
        part[1] += misses
        print(f"{config:<28} {fitted.get(config, 0):>5} {errors.size:>5} {misses:>6}")
    for name, (n, misses) in totals.items():
        print(f"scored conv rows in configurations {name} in the fit: {n}, {misses} more than "
              f"{TARGET_P90_PCT:.0f} % off")
    print(f"scored GEMM rows more than {TARGET_P90_PCT:.0f} % off: {gemm_misses}")


if __name__ == "__main__":
    main()
