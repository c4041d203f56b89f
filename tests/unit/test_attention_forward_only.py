"""A batch whose attention rows run only the forward kernel skips the backward's candidates
(``attention_cost.SKIP_UNUSED_BACKWARD``): the answers of the path that computes them and weighs them by 0, to the
bit."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.search import attention_cost, call_memo

DEVICES = ["nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb", "nvidia-l4", "nvidia-v100-sxm2-32gb", "nvidia-b200",
           "amd-mi300x", "amd-mi250x", "google-tpu-v5p", "intel-gaudi3"]


def _attention(passes: list[str | None]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    grid = itertools.product([1, 3, 16], [(32, 8), (16, 16), (64, 1)], [1, 17, 512, 2048],
                             [1, 300, 2048, 8192], [64, 80, 128], [True, False], ["bf16", "fp16", "fp8_e4m3"])
    for i, (batch, (heads, kv), sq, skv, hd, causal, dtype) in enumerate(grid):
        op: dict[str, Any] = {"kind": "attention", "batch": batch, "heads": heads, "kv_heads": kv, "seq_q": sq,
                              "seq_kv": skv, "head_dim": hd, "causal": causal, "dtype": dtype}
        pass_ = passes[i % len(passes)]
        if pass_ is not None:
            op["pass"] = pass_
        out.append(op)
    return out


def _spy_backward(monkeypatch: pytest.MonkeyPatch, seen: list[int]) -> None:
    """Count ``attention_cost._backward`` calls into ``seen``."""
    real = attention_cost._backward

    def spy(*args: Any) -> Any:
        seen.append(1)
        return real(*args)

    monkeypatch.setattr(attention_cost, "_backward", spy)


def _both(device: str, ops: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch,
          seen: list[int]) -> tuple[perfmodel.CostBatch, perfmodel.CostBatch]:
    _spy_backward(monkeypatch, seen)
    with call_memo.not_kept():
        got = perfmodel.predict_many(device, ops)
        monkeypatch.setattr(attention_cost, "SKIP_UNUSED_BACKWARD", False)
        want = perfmodel.predict_many(device, ops)
    monkeypatch.setattr(attention_cost, "SKIP_UNUSED_BACKWARD", True)
    return got, want


def _same(got: perfmodel.CostBatch, want: perfmodel.CostBatch) -> None:
    assert got.to_dicts() == want.to_dicts()
    for name in ("time_s", "overhead_s", "compulsory_bytes", "utilization", "uncalibrated_interval_s"):
        assert getattr(got, name).tobytes() == getattr(want, name).tobytes(), name
    for group in ("time_s_by_engine", "time_s_by_level", "bytes_by_level", "flops_by_engine", "schedule"):
        mine, theirs = getattr(got, group), getattr(want, group)
        assert mine.keys() == theirs.keys()
        for key in mine:
            assert np.asarray(mine[key]).tobytes() == np.asarray(theirs[key]).tobytes(), (group, key)
    assert got.bound.tolist() == want.bound.tolist()
    assert got.notes == want.notes


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("passes", [[None], ["forward"]], ids=["no pass", "forward"])
def test_forward_only_batches_skip_the_backward_with_the_same_answers(device: str, passes: list[str | None],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    ops = _attention(passes)
    got, want = _both(device, ops, monkeypatch, seen)
    _same(got, want)
    assert len(seen) >= 1  # the reference computed it; the skipping path (first) did not: all calls after it
    assert np.isfinite(got.time_s).all()


def test_a_batch_with_backward_rows_computes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    got, want = _both("nvidia-h100-sxm5-80gb", _attention(["forward", "backward", "forward_backward", None]),
                      monkeypatch, seen)
    _same(got, want)
    assert len(seen) >= 2  # both runs computed the backward


def test_the_forward_only_path_does_not_compute_the_backward(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    _spy_backward(monkeypatch, seen)
    with call_memo.not_kept():
        perfmodel.predict_many("nvidia-h100-sxm5-80gb", _attention([None]))
    assert not seen
