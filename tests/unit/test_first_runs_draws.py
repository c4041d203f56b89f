"""The first-runs diagnosis's helpers (``benchmarks/first_runs_draws.py``): the transferred band's spread profiled by op
time and the unmeasured classes' level rule (the draw by run is the scoreboard's: ``test_scoreboard_spread.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfmodel import uncalibrated_interval
from perfmodel.ops import make_op
from tests.benchmark_module import load_benchmark

draws = load_benchmark("first_runs_draws", "first_runs_draws_under_test")
Row = draws.Row


def _row(n: int, label: str = "elementwise") -> object:
    return Row("vidur", "nvidia-a40", {"kind": "elementwise", "shape": [n, 1024], "dtype": "fp16"}, 1e-5, "kernel",
               "family", label)


def test_the_profile_follows_the_scores_by_op_time_relative_to_the_class() -> None:
    ops = [make_op({"kind": "elementwise", "shape": [n, 1024], "dtype": "fp16"}) for n in range(1, 81)]
    model_s = np.geomspace(1e-6, 1e-3, 80)
    band = np.log(uncalibrated_interval.interval_s(ops, model_s) / model_s[:, None])
    centre, half = band.mean(axis=1), (band[:, 1] - band[:, 0]) / 2.0
    score = np.where(model_s < 3e-5, 2.0, 0.5)  # the small half twice the class's width off, the large half a half
    measured = model_s * np.exp(centre - score * half)
    profile = draws.spread_profile(ops, model_s, measured)
    knots, relative = profile["elementwise"]
    assert knots == sorted(knots) and len(knots) == draws.BINS
    # 0.8 quantile of the class: 2.0; of each quartile 2.0 or 0.5 (to rounding: the band's logs from the intervals file)
    assert relative == pytest.approx([1.0, 1.0, 0.25, 0.25], rel=1e-12)
    got = draws.spread(profile, [ops[0], ops[-1], make_op({"kind": "rmsnorm", "shape": [8, 8], "dtype": "fp16"})],
                       np.array([1e-7, 1e-2, 1e-5]))
    assert got.tolist() == pytest.approx([1.0, 0.25, 1.0], rel=1e-12)  # flat beyond the end knots; no profile: 1
    assert draws.spread_profile(ops[:39], model_s[:39], measured[:39]) == {}  # under MIN_PROFILE_RUNS


def test_the_profiled_band_is_widened_about_its_centre_and_restored_after() -> None:
    ops = [make_op({"kind": "elementwise", "shape": [4, 1024], "dtype": "fp16"})]
    t = np.array([1e-5])
    profile = {"elementwise": ([-6.0, -4.0], [2.0, 2.0])}
    plain = np.log(uncalibrated_interval.interval_s(ops, t) / t[:, None])
    with draws.profiled(profile):
        wide = np.log(draws.target_band.uncalibrated_interval.interval_s(ops, t) / t[:, None])
    assert math.isclose(wide.mean(), plain.mean())
    assert math.isclose(wide[0, 1] - wide[0, 0], 2.0 * (plain[0, 1] - plain[0, 0]))
    assert draws.target_band.uncalibrated_interval is uncalibrated_interval


def test_an_unmeasured_class_takes_the_rest_scale_times_its_source_level(monkeypatch: object) -> None:
    # source scores: 10 elementwise ops at 0.5, 10 rmsnorm at 1.5, 10 embedding at 0.25 (0.8 quantiles: the values)
    score = np.array([0.5] * 10 + [1.5] * 10 + [0.25] * 10)
    keys = ["elementwise"] * 10 + ["rmsnorm"] * 10 + ["embedding"] * 10
    rule = draws.level_rule(score, keys)
    calls = []

    def fixed(*args: object) -> tuple[float, dict[str, float]]:
        calls.append(args)
        return 0.8, {"matmul": 0.4}
    monkeypatch.setattr(draws.target_band, "target_scales", fixed)  # type: ignore[attr-defined]
    ops = [make_op({"kind": "elementwise", "shape": [8, 8], "dtype": "fp16"}),
           make_op({"kind": "matmul", "m": 8, "n": 8, "k": 8, "dtype": "fp16"})]
    scale, per_class = rule(ops, np.ones(2), np.ones(2), np.arange(2))
    assert len(calls) == 1 and scale == 0.8
    # the rest group here is elementwise (matmul has its own scale): rmsnorm 1.5 / 0.5 = 3x it, embedding half of it
    assert per_class == {"matmul": 0.4, "rmsnorm": 0.8 * 3.0, "embedding": 0.8 * 0.5}
    # own_rest: the rest group here is one op, so the scale is not the rest group's own: nothing changes
    assert draws.level_rule(score, keys, own_rest=True)(ops, np.ones(2), np.ones(2), np.arange(2)) == (
        0.8, {"matmul": 0.4})
    four = [ops[0]] * 4 + [ops[1]]
    assert draws.level_rule(score, keys, own_rest=True)(four, np.ones(5), np.ones(5), np.arange(5))[1] == per_class
