"""A joint fold fit for benchmarks/lodo.py (conv19): ``onchip_efficiency`` and ``matrix_efficiency`` chosen together
on a 2-D grid (every pair scored on the kernel rows, the other values as chosen) inside the coordinate descent, in
place of one at a time. conv18 found the matmul folds' loss under D+R+W comes through the defaults fitted alongside
``onchip_efficiency`` (docs/accuracy.md, conv18); a joint choice lets a GEMM cell trade the two at once.

Off at the tip: ``lodo.fit_defaults`` is lodo.py's; ``benchmarks/lodo_conv_switches.py --switches J`` swaps in
``fit_defaults_joint`` (``use_joint``). lodo.py stays under 500 lines, so the fit lives here.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import lodo
import numpy as np
from lodo_network import COLLECTIVE_LABELS
from measured_data import Row

from perfmodel.efficiency import ModelDefaults

JOINT: tuple[str, str] = ("matrix_efficiency", "onchip_efficiency")


def _scores(rows: Sequence[Row], idx: np.ndarray, shipped: dict[str, ModelDefaults], choice: dict[str, float],
            trials: Sequence[dict[str, float]], measured: np.ndarray, cells: np.ndarray) -> list[float]:
    """lodo's balanced score of ``rows[idx]`` with each trial's values over ``choice``."""
    subset, out = [rows[int(i)] for i in idx], []
    for trial in trials:
        model, harness = lodo._split({**choice, **trial})
        predicted = lodo._predict(subset, lodo.with_model(shipped, model), harness)
        out.append(lodo._score(np.log(predicted / measured[idx]), cells[idx]))
    return out


def fit_defaults_joint(rows: Sequence[Row], shipped: dict[str, ModelDefaults], grids: dict[str, tuple[float, ...]]
                       ) -> dict[str, float]:
    """lodo.fit_defaults with ``JOINT``'s two defaults chosen as a pair on their grids' product (where the first
    comes in the descent); a pair moves only to a strictly lower score, as a single value does."""
    measured = np.array([r.measured_s for r in rows])
    cells = np.array([f"{r.label}|{r.hardware}" for r in rows])
    collective = np.array([r.label in COLLECTIVE_LABELS for r in rows])
    groups = {True: np.nonzero(collective)[0], False: np.nonzero(~collective)[0]}
    first = next(iter(shipped.values()))
    vendors = sorted({lodo.vendor(r.hardware) for r in rows})
    grids = {f"{name}@{v}" if name in lodo.PER_VENDOR else name: grid
             for name, grid in grids.items() for v in (vendors if name in lodo.PER_VENDOR else [""])}
    joint = all(name in grids for name in JOINT)
    choice = {name: lodo._shipped_value(first, name) for name in grids}
    choice.update({name: 0.0 for name in lodo.HARNESS_GRIDS})
    for _ in range(lodo.FIT_MAX_PASSES):
        before = dict(choice)
        for name, grid in {**grids, **lodo.HARNESS_GRIDS}.items():
            if joint and name == JOINT[1]:
                continue  # chosen with JOINT[0]
            idx = groups[name in lodo.COLLECTIVE_DEFAULTS]
            if name == lodo.FLOOR_DEFAULT:
                idx = lodo._floor_rows(rows, idx, lodo.with_model(shipped, lodo._split(choice)[0]))
            if name in lodo.DECIDED_DEFAULTS:
                idx = lodo._decided_rows(rows, idx, shipped, choice, name, grid)
            if name in lodo.ROW_SUBSETS:
                idx = np.array([i for i in idx if lodo.ROW_SUBSETS[name](rows[int(i)])], dtype=int)
                if not idx.size:
                    choice.pop(name, None)
                    continue
            if not idx.size:
                continue
            names = JOINT if joint and name == JOINT[0] else (name,)
            trials = [dict(zip(names, values, strict=True))
                      for values in itertools.product(*(grids.get(n, lodo.HARNESS_GRIDS.get(n, ())) for n in names))]
            scores = _scores(rows, idx, shipped, choice, trials, measured, cells)
            best = int(np.argmin(scores))
            if "@" in name and max(scores) - scores[best] < 1e-12:
                choice.pop(name, None)
                continue
            here = {n: choice.get(n) for n in names}
            current = trials.index(here) if here in trials else None  # type: ignore[arg-type]
            if current is None or scores[best] < scores[current] - 1e-12:
                choice.update(trials[best])
        if choice == before:
            break
    return choice


def use_joint() -> None:
    """Swap the joint fit into lodo's fold fit (run_folds, fit_all)."""
    lodo.fit_defaults = fit_defaults_joint
