"""Transfers with the target's first k runs: coverage and error of the held-out target rows against k.

As the product is used: a device with no calibration of its own is seeded from a related device's
(``fit_calibration(target, runs, base=source)``) with the few runs measured on it so far. For each
leave-one-device-out transfer of ``transfer_weight.py`` (the source calibrated on its scoreboard fit rows), k
distinct ops are drawn from the target's fit rows as a trace delivers them (``BY_RUN``: its runs in a seeded random
order, an op kept the first time one of its runs comes up, as the scoreboard's first-runs line draws them; one run
each; ``DRAWS`` seeded draws per k, the same draws for every source of one target), the target calibrated on them,
and its held-out rows scored: share inside the 10-90 %
interval, median abs % error (GEMM-like, other). The uncalibrated band table (a transferred class's band, and what
``target_band`` rescales) is rebuilt without the target device, fit and prediction alike. k = 0 is the transfer
with no run of the target (``transfer_weight.py``'s figure).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from measured_data import Row
from scoreboard import first_runs as first_by_run

from perfmodel import uncalibrated_interval
from perfmodel.calibration import Calibration, fit_calibration, predict_calibrated
from perfmodel.uncalibrated_interval import ClassBand

KS = (0, 5, 10, 20)
# Seeded draws per transfer and k: at 8 one transfer's mean moved by up to 0.09 with the random stream alone (the
# DeepBench targets, whose two draws below are one distribution: P100 -> V100 at k = 5 0.84 / 0.75), and the count of
# transfers in 0.75-0.85 with it (k = 10: 8/8 and 5/8); 32 draws halve that (docs/accuracy.md, calib17)
DRAWS = 32
# The target's first runs drawn by run (``scoreboard.first_runs``: each op in proportion to its runs, as a trace
# delivers them and as the held-out rows are scored), not uniformly over its distinct ops (False: the draw before
# calib17); the same decision as the scoreboard's first-runs line (benchmarks/scoreboard.py's docstring)
BY_RUN = True
GEMM_LABELS = ("matmul", "conv2d", "conv2d_bwd")


@dataclass(frozen=True)
class FirstRuns:
    """One transfer at one k, averaged over the draws."""

    source: str
    target: str
    k: int
    coverage: float  # mean over draws of the share of held-out rows inside their interval
    coverage_range: tuple[float, float]  # lowest and highest draw
    gemm_median: float  # mean over draws of the held-out GEMM-like median abs % error (nan: none)
    other_median: float
    scale: float  # median over draws of the transfer scale (1: none)


def _median(values: np.ndarray[Any, Any]) -> float:
    return float(np.median(values)) if values.size else float("nan")


def first_runs(rows: list[Row], mask: np.ndarray[Any, np.dtype[np.bool_]],
               bands_without: Callable[[str], dict[str, ClassBand]], sources: dict[tuple[str, str], Calibration],
               transfers: Sequence[tuple[str, str, str]], ks: Sequence[int] = KS,
               draws: int = DRAWS, by_run: bool = BY_RUN) -> list[FirstRuns]:
    """Every transfer at every k (``sources``: (data set, source device) -> the source's calibration; ``by_run``:
    the k distinct ops drawn in proportion to their runs, ``scoreboard.first_runs``, else uniformly)."""
    shipped = uncalibrated_interval.load_bands
    out = []
    for dataset, source, target in transfers:
        mine = [i for i, r in enumerate(rows) if r.dataset == dataset and r.hardware == target and r.timing == "kernel"]
        pool: dict[str, Row] = {}
        for i in mine:  # the target's fit rows, one run per distinct op (the first)
            if mask[i]:
                pool.setdefault(repr(rows[i].op), rows[i])
        candidates = list(pool.values())
        fit = [rows[i] for i in mine if mask[i]]
        test = [rows[i] for i in mine if not mask[i]]
        measured = np.array([r.measured_s for r in test])
        gemm = np.array([r.label in GEMM_LABELS for r in test])
        table = bands_without(target)
        uncalibrated_interval.load_bands = lambda path=None, table=table: table  # type: ignore[assignment]
        try:
            for k in ks:
                inside, gemm_med, other_med, scales = [], [], [], []
                for draw in range(draws if k else 1):
                    rng = np.random.default_rng([zlib.crc32(target.encode()), k, draw])
                    if by_run:
                        picked = first_by_run(fit, k, [zlib.crc32(target.encode()), k, draw]) if k else []
                    else:
                        picked = ([candidates[int(j)] for j in rng.choice(len(candidates), k, replace=False)]
                                  if k else [])
                    cal = fit_calibration(target, [(r.op, r.measured_s) for r in picked],
                                          base=sources[(dataset, source)])
                    batch = predict_calibrated(target, [r.op for r in test], cal)
                    assert batch.interval_s is not None
                    inside.append(float(((measured >= batch.interval_s[:, 0])
                                         & (measured <= batch.interval_s[:, 1])).mean()))
                    ape = np.abs(batch.time_s / measured - 1.0) * 100.0
                    gemm_med.append(_median(ape[gemm]))
                    other_med.append(_median(ape[~gemm]))
                    scales.append(1.0 if cal.transfer_scale is None else cal.transfer_scale)
                out.append(FirstRuns(source, target, k, float(np.mean(inside)), (min(inside), max(inside)),
                                     float(np.mean(gemm_med)), float(np.mean(other_med)), float(np.median(scales))))
        finally:
            uncalibrated_interval.load_bands = shipped
    return out


def print_first_runs(results: list[FirstRuns]) -> None:
    print(f"transfers with the target's first k runs (k distinct ops of its fit rows, drawn "
          f"{'by run' if BY_RUN else 'uniformly'}, {DRAWS} draws each, k = 0 the transfer alone): held-out rows "
          "inside their interval (mean, lowest-highest draw), median abs % error "
          "GEMM-like / other, transfer scale")
    for r in results:
        print(f"  {r.source:>22} -> {r.target:<22} k = {r.k:>2}: inside {r.coverage:.2f} "
              f"({r.coverage_range[0]:.2f}-{r.coverage_range[1]:.2f}), median {r.gemm_median:5.1f} / "
              f"{r.other_median:5.1f} %, scale {r.scale:.2f}")
    for k in sorted({r.k for r in results}):
        at_k = [r.coverage for r in results if r.k == k]
        within = sum(0.75 <= c <= 0.85 for c in at_k)
        print(f"  k = {k:>2}: mean inside {np.mean(at_k):.2f}, lowest {min(at_k):.2f}, highest {max(at_k):.2f}, "
              f"in 0.75-0.85: {within}/{len(at_k)}")
