"""calfit18's cuts to ``predict_calibrated`` (issue 27, docs/accuracy.md thirteenth pass) give the answers of the code
they replace to the bit: every row calibrated as its own op where a sample of the ops repeats none (no hashing, no
take) as the distinct ops calibrated once and taken, the trees' walk two rows at a time, the local correction's rows
taken in order of log10 FLOPs, the beyond notes formatted from Python floats. ``test_calibrated_fast_path.py``
compares the whole call with ``apply_calibration(predict_many(...))`` on tables without repeats or with many."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from benchmark_module import load_benchmark

from perfmodel.calibration import Calibration, curve, predict_calibrated, shape
from perfmodel.calibration import model as calibration_model
from perfmodel.calibration.model import BEYOND_NOTE, BEYOND_TAIL
from perfmodel.calibration.op_groups import probably_distinct
from perfmodel.calibration.trees import fit_trees
from perfmodel.ops import Op, make_op

HW = "nvidia-a100-sxm4-80gb"


@pytest.fixture(scope="module")
def fitted_table() -> list[Op]:
    """``benchmarks/calibrated_speed.py``'s fp16 table (1,200 ops, all distinct)."""
    table: list[Op] = load_benchmark("calibrated_speed", "calibrated_speed").tables(1200)["fitted classes"]
    return table


def _assert_same_bits(fast: Any, reference: Any) -> None:
    for name in ("time_s", "overhead_s", "interval_s", "in_calibrated_range", "utilization"):
        a, b = np.asarray(getattr(fast, name)), np.asarray(getattr(reference, name))
        assert a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8)), name
    assert fast.notes == reference.notes and (fast.bound == reference.bound).all()


def test_every_row_as_its_own_op_gives_the_answers_of_the_distinct_ops_taken(vidur: Calibration,
                                                                            fitted_table: list[Op],
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Shuffled repeats (300 ops in 900 rows, equal ops that are other objects among them): ``predict_calibrated``
    calibrating every row (``probably_distinct`` forced True) gives, to the bit, what it gives calibrating the
    distinct ops once and taking them (its way for a batch whose sample repeats)."""
    from perfmodel.calibration import model

    pool = fitted_table[:300]
    many = [pool[int(i) % 300] if i % 3 else make_op(pool[int(i) % 300].to_dict())
            for i in np.random.default_rng(4).permutation(900)]
    assert not probably_distinct(many) and len(set(many)) == 300
    taken = predict_calibrated(HW, many, vidur)
    monkeypatch.setattr(model, "probably_distinct", lambda ops: True)
    each = predict_calibrated(HW, many, vidur)
    _assert_same_bits(each, taken)
    assert len({float(v) for v in each.time_s}) > 250  # the rows differ: this compares something


def test_both_ways_of_telling_ops_apart_give_apply_calibrations_answers(vidur: Calibration,
                                                                       fitted_table: list[Op]) -> None:
    """The fp16 table with three ops repeated at its end (a 64-op sample misses them: every row calibrated as its
    own op) and shuffled repeats (300 ops in 900 rows: the distinct ops, then taken): ``predict_calibrated`` gives
    ``apply_calibration(predict_many(...))`` to the bit (``test_calibrated_fast_path._assert_same``'s arrays and
    notes)."""
    import perfmodel
    from perfmodel.calibration import apply_calibration

    few = fitted_table + fitted_table[5:8]
    many = [fitted_table[int(i) % 300] for i in np.random.default_rng(1).permutation(900)]
    assert probably_distinct(few) and len(set(few)) < len(few) and not probably_distinct(many)
    assert probably_distinct(fitted_table[:1]) and probably_distinct([])
    assert not probably_distinct([_Unhashable(), _Unhashable()])  # type: ignore[list-item]
    for ops in (few, many):
        fast = predict_calibrated(HW, ops, vidur)
        reference = apply_calibration(vidur, perfmodel.predict_many(HW, ops, timing=vidur.timing,  # type: ignore[arg-type]
                                                                    space=vidur.space))
        _assert_same_bits(fast, reference)
        assert all(a == b for a, b in zip(fast.ops, ops, strict=True))


class _Unhashable:
    __hash__ = None  # type: ignore[assignment]


def test_the_walk_two_rows_at_a_time_equals_the_numpy_walk_for_any_row_count() -> None:
    """``trees_jit.walk`` pairs rows; an odd last row of a block walks alone: 1, 2, 3 rows, one block's worth and one
    row either side, two blocks and three rows; with nan, ±inf and values on the thresholds."""
    from perfmodel.calibration import trees as trees_module
    from perfmodel.search import gemm_kernel

    rng = np.random.default_rng(12)
    x = rng.uniform(0, 10, size=(3700, 4))
    x[rng.random(x.shape) < 0.1] = np.nan
    ensemble = fit_trees(x[:1500], np.sin(np.nan_to_num(x[:1500, 0])) + np.nan_to_num(x[:1500, 1]) / 5)
    test = x[1500:].copy()
    on = ensemble.threshold[ensemble.feature >= 0]
    test[:40, 0] = on[:40]
    test[40:44, 1] = [np.inf, -np.inf, -0.0, np.nan]
    assert gemm_kernel.load()
    walk = trees_module._walk_kernel()
    assert walk is not None
    for n in (1, 2, 3, 1023, 1024, 1025, 2051):
        rows = np.ascontiguousarray(test[:n])
        out = np.empty(n)
        walk(rows, ensemble.feature, ensemble.threshold, ensemble.left, ensemble.right, ensemble.value,
             ensemble.missing_left, ensemble.base, out)
        # the numpy walk of one row alone sums its trees pairwise (a contiguous reduction), of two or more in tree
        # order as the compiled walk does: its rows plus one
        reference = ensemble._predict(np.vstack([rows, rows[:1]]))[:n]
        assert np.array_equal(out.view(np.int64), reference.view(np.int64)), n


def test_the_local_correction_in_any_row_order_gives_the_same_bits(vidur: Calibration, fitted_table: list[Op],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``LocalCorrection._smoothed`` (rows sorted by log10 FLOPs, then scattered back) against the compiled kernel
    run on the rows in the batch's order, and on the rows shuffled, for the corrections the fp16 table reaches."""
    from perfmodel.calibration import local
    from perfmodel.search import gemm_kernel

    assert gemm_kernel.load()
    seen: list[tuple[local.LocalCorrection, Any]] = []
    original = local.LocalCorrection._smoothed

    def capture(self: local.LocalCorrection, x: Any, smooth: Any) -> Any:
        seen.append((self, x.copy()))
        return original(self, x, smooth)

    monkeypatch.setattr(local.LocalCorrection, "_smoothed", capture)
    predict_calibrated(HW, fitted_table, vidur)
    monkeypatch.setattr(local.LocalCorrection, "_smoothed", original)
    kernels = local.near_kernels()
    assert kernels is not None and len(seen) >= 4
    smooth = kernels[0]
    unsorted = 0
    for correction, x in seen:
        points, runs, residuals = correction._by_first
        lo = np.searchsorted(points[:, 0], x[:, 0] - correction.reach, side="left")
        hi = np.searchsorted(points[:, 0], x[:, 0] + correction.reach, side="right")
        direct = np.empty(len(x))
        smooth(np.ascontiguousarray(x), points, runs, residuals, -0.5 / correction.bandwidth ** 2,
               float(correction.shrink), lo, hi, correction.reach ** 2, correction.screen, direct)
        got = correction._smoothed(x, smooth)
        assert np.array_equal(got.view(np.int64), direct.view(np.int64))
        shuffle = np.random.default_rng(len(x)).permutation(len(x))
        assert np.array_equal(correction._smoothed(x[shuffle], smooth).view(np.int64), got[shuffle].view(np.int64))
        unsorted += int((np.diff(x[:, 0]) < 0).any())
    assert unsorted >= 2  # the batch's order is not already sorted: the sort changed the kernel's order


def _reference_notes(batch: Any, rows: Any, outside: Any, f: curve.Features, low: Any, high: Any) -> dict[int,
                                                                                                        list[str]]:
    """``model._beyond_notes`` before calfit18 (numpy scalars formatted one by one)."""
    if not rows.size:
        return dict(batch.notes)
    values = curve.range_values(f)
    parts: dict[int, list[str]] = {}
    for r, j in zip(*np.nonzero(outside), strict=True):
        i = int(rows[r])
        if j < 2:
            what = f"{('log10 FLOPs', 'log10 bytes')[j]} {values[r, j]:.2f} (fitted {low[r, j]:.2f}-{high[r, j]:.2f})"
        else:
            name = shape.FAMILY_FEATURES[shape.family(batch.ops[i])][j - 2] or f"shape_{j - 2}"
            what = f"{name} {values[r, j]:.3g} (fitted {low[r, j]:.3g}-{high[r, j]:.3g})"
        parts.setdefault(i, []).append(what)
    notes = dict(batch.notes)
    for i, what_lies_outside in parts.items():
        notes[i] = [*notes.get(i, []), BEYOND_NOTE + ", ".join(what_lies_outside) + BEYOND_TAIL]
    return notes


def test_beyond_notes_read_as_before(vidur: Calibration, fitted_table: list[Op],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The notes of the fp16 table's rows beyond their fitted data (size and shape numbers), and of values a float
    formats oddly (nan, ±inf, -0.0, the tiniest and largest), as the numpy scalars were formatted."""
    calls: list[tuple[Any, ...]] = []
    original = calibration_model._beyond_notes

    def capture(*args: Any) -> dict[int, list[str]]:
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(calibration_model, "_beyond_notes", capture)
    predict_calibrated(HW, fitted_table, vidur)
    batch, rows, outside, f, low, high = calls[0]
    assert rows.size > 10 and outside[:, 2:].any() and outside[:, :2].any()
    assert original(*calls[0]) == _reference_notes(*calls[0])
    odd = np.array([math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308, 0.005, 0.015, 2.675, 1e-5])
    for value in odd:
        assert f"{value.item():.2f}" == f"{value:.2f}" and f"{value.item():.3g}" == f"{value:.3g}"
    lows = low.copy()
    lows[: len(odd), 0] = odd[: len(lows)]
    assert original(batch, rows, outside, f, lows, high) == _reference_notes(batch, rows, outside, f, lows, high)
