"""The scoreboard's spread figures: the first-runs line's standard error over draws and a data set's coverage
range with its classes resampled, and the first-runs line's draw by run (``benchmarks/scoreboard.py``)."""

from __future__ import annotations

import math

import numpy as np

from tests.benchmark_module import load_benchmark

scoreboard = load_benchmark("scoreboard", "scoreboard_spread_under_test")


def test_draw_error_is_the_sample_standard_deviation_over_root_n() -> None:
    assert math.isclose(scoreboard.draw_error([0.7, 0.9]), 0.1)
    values = [0.88, 0.56, 0.97, 0.72, 0.8]
    assert math.isclose(scoreboard.draw_error(values), float(np.std(values, ddof=1)) / math.sqrt(5))
    assert math.isnan(scoreboard.draw_error([0.8]))


def test_classes_with_one_share_give_that_share_at_both_ends() -> None:
    clusters = [np.array([True] * 4 + [False]), np.array([True] * 8 + [False] * 2),
                np.array([True] * 40 + [False] * 10)]
    low, high = scoreboard.cluster_range(clusters, draws=500)
    assert math.isclose(low, 0.8) and math.isclose(high, 0.8)


def test_a_few_classes_leave_a_wide_range_where_rows_alone_would_not() -> None:
    # 200 rows, but in two classes: one all inside, one all outside. Row by row the share's standard error would be
    # 0.035; resampling the two classes gives 0 or 1 or the share of the rows in one each.
    clusters = [np.ones(100, dtype=bool), np.zeros(100, dtype=bool)]
    low, high = scoreboard.cluster_range(clusters, draws=2000, seed=1)
    assert low == 0.0 and high == 1.0
    many = [np.ones(10, dtype=bool) if i % 2 else np.zeros(10, dtype=bool) for i in range(20)]
    low, high = scoreboard.cluster_range(many, draws=2000, seed=1)
    assert 0.25 < low < 0.5 < high < 0.75  # twenty classes narrow it about the pooled 0.5


def test_larger_classes_weigh_more_and_the_seed_repeats() -> None:
    clusters = [np.ones(90, dtype=bool), np.zeros(10, dtype=bool), np.ones(5, dtype=bool)]
    first = scoreboard.cluster_range(clusters, draws=300, seed=7)
    assert first == scoreboard.cluster_range(clusters, draws=300, seed=7)
    assert first[1] == 1.0 and first[0] >= 0.0
    assert all(math.isnan(v) for v in scoreboard.cluster_range([np.zeros(0, dtype=bool)], draws=10))


def _row(n: int) -> object:
    return scoreboard.Row("vidur", "nvidia-a40", {"kind": "elementwise", "shape": [n, 1024], "dtype": "fp16"}, 1e-5,
                          "kernel", "family", "elementwise")


def test_the_first_runs_are_k_distinct_ops_drawn_by_run_where_the_old_draw_took_them_uniformly() -> None:
    rows = [_row(7)] * 50 + [_row(n) for n in range(8, 58)]  # one op with 50 runs, 50 ops with one run each
    by_run = [scoreboard.first_runs(rows, 5, seed) for seed in range(200)]
    uniform = [scoreboard.first_distinct(rows, 5, seed) for seed in range(200)]
    assert all(len({repr(r.op) for r in p}) == 5 for p in by_run + uniform)
    share = [float(np.mean([any(r.op["shape"][0] == 7 for r in p) for p in picked])) for picked in (by_run, uniform)]
    assert share[0] > 0.9  # by run: in nearly every draw (half the runs are its)
    assert 0.03 < share[1] < 0.2  # uniformly over the 51 distinct ops: 5 / 51 = 0.1
    assert scoreboard.first_runs(rows, 5, 3) == scoreboard.first_runs(rows, 5, 3)  # seeded
    assert scoreboard.first_runs(rows, 5, [1, 5, 0]) != scoreboard.first_runs(rows, 5, [1, 5, 1])  # a seed sequence
    assert len(scoreboard.first_runs(rows[:3], 5, 0)) == 1  # fewer distinct ops than k: all of them
