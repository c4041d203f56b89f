"""benchmarks/lodo_residual_groups.py (conv20): the de-bias ceiling and the batch pairs it reads off a saved run."""

from __future__ import annotations

import numpy as np
import pytest
from benchmark_module import load_benchmark

groups = load_benchmark("lodo_residual_groups", "lodo_residual_groups_benchmark")
Row = groups.Row


def _conv(batch: int, hardware: str = "nvidia-v100-sxm2-32gb", seconds: float = 1e-4) -> object:
    op = {"kind": "conv2d", "batch": batch, "in_channels": 64, "out_channels": 64, "height": 56, "width": 56,
          "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp32"}
    return Row("deepbench", hardware, op, seconds, "kernel", "-", "conv2d")


def test_a_group_bias_is_removed_and_scatter_stays() -> None:
    # two groups, each a constant bias: de-biased per group, no error is left; pooled, half the rows keep theirs
    log_ratio = np.log(np.array([2.0, 2.0, 0.5, 0.5]))
    assert groups.debiased_median(log_ratio, ["a", "a", "b", "b"]) == pytest.approx(0.0)
    assert groups.debiased_median(log_ratio, ["x"] * 4) > 0.4
    # scatter inside a group is what no per-group constant removes
    scatter = np.log(np.array([0.8, 1.25, 0.8, 1.25]))
    assert groups.debiased_median(scatter, ["a", "a", "b", "b"]) == pytest.approx(0.225, abs=0.03)


def test_batch_pairs_compare_measured_and_predicted_scaling() -> None:
    rows = [_conv(8, seconds=1e-4), _conv(16, seconds=1.5e-4), _conv(32, seconds=2.7e-4), _conv(8, "nvidia-t4")]
    pairs = groups.batch_pairs(rows, np.array([1.0, 2.0, 4.0, 1.0]))
    assert sorted((round(m, 3), round(p, 3)) for _, m, p, _ in pairs) == [(1.5, 2.0), (1.8, 2.0)]
    assert all(hw == "nvidia-v100-sxm2-32gb" for hw, *_ in pairs)
    # 8 x 56 x 56 output pixels in 128-row tiles, 64 channels in one 128-column tile, on the V100's 80 SMs
    assert pairs[0][3] == pytest.approx(196 / 80) or pairs[1][3] == pytest.approx(196 / 80)
