"""Is a group's change real? Mann-Whitney U over the repeats of each side, a paired Wilcoxon signed-rank
test where both sides have the same calls in the same order (the same program profiled twice), and a
bootstrap CI of the ratio of medians (new / base). The tests are scipy's, computed by ``rank_tests``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfmodel.compare.rank_tests import mann_whitney_p, wilcoxon_p

MIN_REPEATS = 5  # per side: below it no verdict ("too few repeats")
BOOTSTRAP_RESAMPLES = 400
MAX_BOOTSTRAP_SAMPLES = 256  # per side: larger groups are thinned evenly for the bootstrap (bounded work)
CI_LEVEL = 0.95


@dataclass(frozen=True)
class Change:
    """The change of one group: ratio of medians (new / base), its CI and the tests' p-values."""

    ratio: float
    ci_low: float
    ci_high: float
    p_mann_whitney: float
    p_paired: float | None  # Wilcoxon signed-rank on the calls paired in order (equal counts only)

    @property
    def p_value(self) -> float:
        """The test the verdict uses: paired where the calls pair up, else Mann-Whitney U."""
        return self.p_mann_whitney if self.p_paired is None else self.p_paired


def _thin(values: np.ndarray, limit: int) -> np.ndarray:
    if values.size <= limit:
        return values
    return values[np.linspace(0, values.size - 1, limit).astype(np.int64)]


def resampled_medians(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``np.median(values[idx], axis=1)`` without sorting floats: each resample's ranks (of ``values``, as the
    smallest unsigned type that holds them: bytes up to 256 values) sorted by numpy's radix sort, its median the
    value at its middle rank(s)."""
    n = values.size
    order = np.argsort(values, kind="stable")
    ranks = np.empty(n, dtype=np.uint8 if n <= 1 << 8 else np.uint16 if n <= 1 << 16 else np.int64)
    ranks[order] = np.arange(n)
    m = idx.shape[1]
    ranked = np.sort(ranks[idx], axis=1, kind="stable")  # radix sort for 8- and 16-bit ints
    ordered = values[order]
    return np.asarray((ordered[ranked[:, (m - 1) // 2]] + ordered[ranked[:, m // 2]]) / 2.0)


def _bootstrap(base: np.ndarray, new: np.ndarray, paired: bool, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    if paired:
        idx = rng.integers(0, base.size, (BOOTSTRAP_RESAMPLES, base.size))
        med_base, med_new = resampled_medians(base, idx), resampled_medians(new, idx)
    else:
        med_base = resampled_medians(base, rng.integers(0, base.size, (BOOTSTRAP_RESAMPLES, base.size)))
        med_new = resampled_medians(new, rng.integers(0, new.size, (BOOTSTRAP_RESAMPLES, new.size)))
    ok = med_base > 0
    if not ok.any():
        return float("nan"), float("nan")
    ratios = med_new[ok] / med_base[ok]
    tail = (1.0 - CI_LEVEL) / 2.0 * 100.0
    low, high = np.percentile(ratios, [tail, 100.0 - tail])
    return float(low), float(high)


def _p(value: float) -> float:
    return 1.0 if value != value else float(value)  # nan (all values tied) -> no evidence of a change


def measure_change(base_s: Sequence[float], new_s: Sequence[float], seed: int = 0) -> Change | None:
    """The change from ``base_s`` to ``new_s`` (per-call times, s, in trace order); None when either side has
    fewer than ``MIN_REPEATS`` calls or a zero median."""
    base, new = np.asarray(base_s, dtype=float), np.asarray(new_s, dtype=float)
    if base.size < MIN_REPEATS or new.size < MIN_REPEATS:
        return None
    med_base = float(np.median(base))
    if med_base <= 0:
        return None
    ratio = float(np.median(new)) / med_base
    p_mwu = _p(mann_whitney_p(base, new)) if np.ptp(np.concatenate([base, new])) > 0 else 1.0
    paired = base.size == new.size
    p_paired: float | None = None
    if paired:
        moved = bool(np.any(new != base))
        p_paired = _p(wilcoxon_p(new, base)) if moved else 1.0
    thin_base, thin_new = _thin(base, MAX_BOOTSTRAP_SAMPLES), _thin(new, MAX_BOOTSTRAP_SAMPLES)
    low, high = _bootstrap(thin_base, thin_new, paired, seed)
    return Change(ratio, low, high, p_mwu, p_paired)


def holm_reject(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm-Bonferroni over many groups: which p-values stay significant at family-wise level ``alpha``."""
    order = np.argsort(np.asarray(p_values, dtype=float), kind="stable")
    reject = [False] * len(p_values)
    m = len(p_values)
    for rank, i in enumerate(order):
        if p_values[int(i)] > alpha / (m - rank):
            break
        reject[int(i)] = True
    return reject
