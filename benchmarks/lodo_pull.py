"""Which training cells set a refitted default in one leave-one-device-out fold.

``lodo.py`` refits each default on the other devices by the balanced score, the mean over (op class, device)
cells of the median |log(pred/meas)|. This prints, for one held-out device and one default, every training cell's
term at each value of the default's grid (the other defaults at the fold's refit values) and the score: a flat
score means the choice rests on a few cells' small preferences, and a change to any op class can move it (and
with it every class of the held-out device).

    python benchmarks/lodo_pull.py nvidia-a100-sxm4-80gb kernel_overhead_s
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lodo import (
    GRIDS,
    HARNESS_GRIDS,
    _buildable,
    _fit_sample,
    _predict,
    _split,
    extra_collectives,
    fit_defaults,
)
from lodo_network import _in_scope
from lodo_vendor import with_model
from measured_data import Row, all_rows

import perfmodel
from perfmodel.efficiency import defaults_for
from perfmodel.specs import load_hardware


def cell_terms(rows: list[Row], choice: dict[str, float], name: str, grid: tuple[float, ...]
               ) -> tuple[list[str], np.ndarray]:
    """Cells (``label|device``) and their median |log(pred/meas)| at each grid value (cells x values)."""
    shipped = {hw: defaults_for(load_hardware(hw)) for hw in {r.hardware for r in rows}}
    measured = np.array([r.measured_s for r in rows])
    cells = np.array([f"{r.label}|{r.hardware}" for r in rows])
    names = sorted(set(cells.tolist()))
    terms = np.zeros((len(names), len(grid)))
    for j, value in enumerate(grid):
        model, harness = _split({**choice, name: value})
        predicted = _predict(rows, with_model(shipped, model), harness)
        error = np.abs(np.log(predicted / measured))
        terms[:, j] = [np.median(error[cells == c]) for c in names]
    return names, terms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("device", help="the held-out device")
    parser.add_argument("default", help=f"one of {', '.join([*GRIDS, *HARNESS_GRIDS])}")
    args = parser.parse_args()
    grids = {**GRIDS, **HARNESS_GRIDS}
    if args.default.split("@")[0] not in grids:
        parser.error(f"unknown default {args.default!r}")
    known = set(perfmodel.list_hardware())
    rows = [r for r in [*all_rows(), *extra_collectives()] if r.hardware in known and _buildable(r)]
    train = [r for r in rows if r.hardware != args.device
             and ("devices" not in r.op or not _in_scope(r, "across, unknown network"))]
    sample = [train[i] for i in _fit_sample(train, np.arange(len(train)))]
    shipped = {hw: defaults_for(load_hardware(hw)) for hw in {r.hardware for r in sample}}
    fitted = {k: v for k, v in GRIDS.items() if all(hasattr(d, k) for d in shipped.values())}
    choice = fit_defaults(sample, shipped, fitted)
    print(f"fold without {args.device}: " + ", ".join(f"{k}={v:g}" for k, v in choice.items()))
    grid = grids[args.default.split("@")[0]]
    names, terms = cell_terms(sample, choice, args.default, grid)
    print(f"{'cell':<40} " + " ".join(f"{v:>10g}" for v in grid) + "  prefers")
    for cell, row in zip(names, terms, strict=True):
        print(f"{cell:<40} " + " ".join(f"{t:>10.3f}" for t in row) + f"  {grid[int(np.argmin(row))]:g}")
    print(f"{'score (mean)':<40} " + " ".join(f"{t:>10.4f}" for t in terms.mean(axis=0)))


if __name__ == "__main__":
    main()
