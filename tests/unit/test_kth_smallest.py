"""The search's shortlist cut (``engine._kth_smallest``) is numpy's partition value exactly, on scores with ties and
rejected (infinite) candidates, for every k, whether the sampled bound holds enough values or not; and a search's
ranked list is the one the whole partition gives."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.search import engine


@pytest.mark.parametrize("seed", range(6))
def test_kth_smallest_is_the_partition_value(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 3000))
    values = rng.choice(rng.random(max(1, size // (1 + seed))), size)  # few distinct values: many ties
    values[rng.random(size) < 0.1 * seed] = np.inf  # rejected candidates
    for k in sorted({0, 1, size // 3, size - 1, *rng.integers(0, size, 20).tolist()}):
        assert engine._kth_smallest(values, k) == np.partition(values, k)[k], (size, k)


def test_kth_smallest_when_the_sample_is_no_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the sampled values small: fewer than k + 1 at or under the bound, so the whole partition answers."""
    values = np.full(4000, 1e3)
    values[::engine.SAMPLE_STEP] = np.arange(500.0)  # the sample: 0, 1, ..., 499; every other value 1,000
    whole: list[int] = []
    partition = np.partition

    def spy(a: Any, kth: int) -> Any:
        whole.append(a.size == values.size)
        return partition(a, kth)

    monkeypatch.setattr(np, "partition", spy)
    for k in (0, 200, 499, 3999):
        whole.clear()
        assert engine._kth_smallest(values, k) == partition(values, k)[k]
        # k = 0: bound 0, one value under it, enough; k = 200: bound 50, 51 values, too few; k = 499: 126; k = 3999:
        # the sample has no 1,000th value
        assert whole[-1] == (k != 0), k


@pytest.mark.parametrize("op", [
    {"kind": "matmul", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"},
    {"kind": "matmul", "m": 1, "n": 4096, "k": 4096, "dtype": "fp16"},
    {"kind": "conv2d", "batch": 32, "in_channels": 256, "out_channels": 256, "height": 56, "width": 56,
     "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "bf16"}])
@pytest.mark.parametrize("device", ["nvidia-h100-sxm5-80gb", "google-tpu-v5p"])
def test_search_ranks_as_the_whole_partition(op: dict[str, object], device: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    fast = perfmodel.search(device, op, cache=False)
    monkeypatch.setattr(engine, "_kth_smallest", lambda values, k: float(np.partition(values, k)[k]))
    whole = perfmodel.search(device, op, cache=False)
    assert fast.top_k == whole.top_k and fast.pareto == whole.pareto and fast.best.time_s == whole.best.time_s
