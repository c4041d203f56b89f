"""How stable is a leave-one-device-out fold's refit? The same fold fitted on three per-cell samples of the other
devices' rows (``lodo.FIT_ROWS_PER_CELL`` 150, 200, 250: which evenly spaced rows of each cell choose the defaults),
printing the defaults the fit chose and the held-out device's median |error| per class. A fold whose chosen values or
held-out errors move between samples sits on a near-tie of the balanced score (docs/accuracy.md, eleventh pass:
the V100 fold's conv2d 22.2 / 25.5 / 20.4 %).

    python benchmarks/lodo_stability.py DEVICE [DEVICE ...] [--classes conv2d conv2d_bwd matmul]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lodo
from measured_data import all_rows

import perfmodel

SAMPLES = (150, 200, 250)
SHOWN = ("matrix_efficiency", "conv_matrix_efficiency", "dram_efficiency", "onchip_efficiency", "kernel_overhead_s",
         "issue_interval_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("devices", nargs="+")
    parser.add_argument("--classes", nargs="*", default=("conv2d", "conv2d_bwd", "matmul"))
    args = parser.parse_args()
    known = set(perfmodel.list_hardware())
    rows = [r for r in [*all_rows(), *lodo.extra_collectives()] if r.hardware in known and lodo._buildable(r)]
    fold_of = np.array([r.hardware for r in rows])
    measured = np.array([r.measured_s for r in rows])
    labels = np.array([r.label for r in rows])
    for device in args.devices:
        for per_cell in SAMPLES:
            lodo.FIT_ROWS_PER_CELL = per_cell
            folds = lodo.run_folds(rows, fold_of, [device])
            chosen = folds.fitted[device]
            errors = []
            for label in args.classes:
                sel = (labels == label) & np.isfinite(folds.predicted)
                if sel.any():
                    median = np.median(np.abs(folds.predicted[sel] / measured[sel] - 1)) * 100
                    errors.append(f"{label} {median:.1f} %")
            print(f"{device:<24} {per_cell:>4} rows/cell  " + " ".join(f"{k}={chosen.get(k)}" for k in SHOWN)
                  + "  |  " + ", ".join(errors), flush=True)


if __name__ == "__main__":
    main()
