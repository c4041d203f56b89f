"""The scoreboard's first-runs line (A100 -> A40 + the A40's first k runs), one scale per device against one per
band class (``calibration/target_band.py``; with and without ``REST_GROUP``), in the same run, with coverage per
scored label.

    python benchmarks/first_runs_classes.py [--swap] [--k 10] [--draws 5]   # a few minutes (Vidur A100 + A40 only)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measured_data import all_rows
from scoreboard import first_runs, fit_mask

from perfmodel.calibration import build, fit_calibration, predict_calibrated, target_band

SOURCE, TARGET = "nvidia-a100-sxm4-80gb", "nvidia-a40"


def _device_only(*args: Any) -> tuple[float | None, dict[str, float]]:
    rest, target_band.REST_GROUP = target_band.REST_GROUP, False
    try:
        return target_band.target_scales(*args)[0], {}
    finally:
        target_band.REST_GROUP = rest


def _classes(rest: bool) -> Any:
    def rule(*args: Any) -> tuple[float | None, dict[str, float]]:
        kept, target_band.REST_GROUP = target_band.REST_GROUP, rest
        try:
            return target_band.target_scales(*args)
        finally:
            target_band.REST_GROUP = kept
    return rule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--swap", action="store_true")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--draws", type=int, default=5)
    args = parser.parse_args()
    rows = all_rows()
    mask = fit_mask(rows) != args.swap
    src = [r for r, m in zip(rows, mask, strict=True) if m and r.dataset == "vidur" and r.hardware == SOURCE
           and r.timing == "kernel"]
    mine = [(r, m) for r, m in zip(rows, mask, strict=True) if r.dataset == "vidur" and r.hardware == TARGET
            and r.timing == "kernel"]
    fit, test = [r for r, m in mine if m], [r for r, m in mine if not m]
    source = fit_calibration(SOURCE, [(r.op, r.measured_s) for r in src])
    measured = np.array([r.measured_s for r in test])
    labels = np.array([r.label for r in test])
    for name, rule in (("per device", _device_only), ("per class", _classes(False)),
                       ("per class, the rest pooled", _classes(True))):
        setattr(build, "target_scales", rule)  # noqa: B010 (build imports it by name)
        inside_draws, per_label = [], {str(k): [] for k in sorted(set(labels.tolist()))}  # type: ignore[var-annotated]
        for draw in range(args.draws):
            first = first_runs(fit, k=args.k, seed=draw)
            cal = fit_calibration(TARGET, [(r.op, r.measured_s) for r in first], base=source)
            batch = predict_calibrated(TARGET, [r.op for r in test], cal)
            assert batch.interval_s is not None
            inside = (measured >= batch.interval_s[:, 0]) & (measured <= batch.interval_s[:, 1])
            inside_draws.append(float(inside.mean()))
            for label in per_label:
                per_label[label].append(float(inside[labels == label].mean()))
            print(f"  {name} draw {draw}: inside {inside.mean():.2f}, scale {cal.transfer_scale}, classes "
                  f"{ {k: round(v, 2) for k, v in cal.transfer_class_scales.items()} }", flush=True)
        print(f"{name} ({'swapped' if args.swap else 'default'}, k = {args.k}): inside {np.mean(inside_draws):.2f} "
              f"(draws {', '.join(f'{v:.2f}' for v in inside_draws)}); by label " + ", ".join(
                  f"{k} {np.mean(v):.2f}" for k, v in per_label.items()), flush=True)
    setattr(build, "target_scales", target_band.target_scales)  # noqa: B010 (build imports it by name)


if __name__ == "__main__":
    main()
