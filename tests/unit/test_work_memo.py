"""The Work kept across searches (``perfmodel.search.work_memo``): the same arrays as a fresh ``work_of``, read-only,
bounded, and the same search answers with it kept as without (every bundled device family x GEMM shapes x dtypes,
split-K, batched, int4 weights, fp8, conv, attention, layernorm)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.ops import make_op
from perfmodel.roofline import work_of
from perfmodel.search import work_memo

DEVICES = ("nvidia-h100-sxm5-80gb", "nvidia-t4", "amd-mi300x", "google-tpu-v5p", "generic-npu", "intel-gaudi2",
           "intel-xeon-platinum-8480", "aws-trainium2")
OPS: list[dict[str, Any]] = [
    {"kind": "matmul", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"},
    {"kind": "matmul", "m": 1, "n": 4096, "k": 4096, "dtype": "fp16"},
    {"kind": "matmul", "m": 128, "n": 128, "k": 1 << 20, "dtype": "bf16"},  # split-K wins
    {"kind": "matmul", "m": 333, "n": 777, "k": 1999, "dtype": "fp32"},
    {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "fp8_e4m3"},
    {"kind": "matmul", "m": 16, "n": 4096, "k": 4096, "dtype": "bf16", "weight_dtype": "int4"},
    {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16", "pass": "backward"},
    {"kind": "matmul", "batch": 32, "m": 512, "n": 512, "k": 128, "dtype": "bf16"},
    {"kind": "conv2d", "batch": 8, "in_channels": 64, "out_channels": 128, "height": 56, "width": 56,
     "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp32"},
    {"kind": "attention", "batch": 2, "heads": 16, "kv_heads": 4, "seq_q": 1024, "seq_kv": 1024, "head_dim": 128,
     "causal": True, "dtype": "bf16"},
    {"kind": "layernorm", "shape": [4096, 4096], "dtype": "bf16"},
]


def _answer(hw: Any, op: dict[str, Any], **kw: Any) -> str:
    try:
        out = perfmodel.search(hw, op, cache=False, **kw).to_dict()
    except Exception as error:  # a dtype the device lacks: the same error either way
        return f"error {type(error).__name__}: {error}"
    out.pop("search_time_s")
    return repr(out)  # repr: values and types (1 and 1.0 differ)


@pytest.mark.parametrize("device", DEVICES)
def test_kept_work_gives_the_same_searches(device: str) -> None:
    hw = perfmodel.load_hardware(device)
    for op in OPS:
        for kw in ({}, {"top_k": 1}, {"budget": 300}):
            work_memo.clear()
            fresh = _answer(hw, op, **kw)  # Work built in this search
            kept = _answer(hw, op, **kw)  # Work kept from the search before
            assert kept == fresh, (device, op, kw)


@pytest.mark.parametrize("op", OPS, ids=lambda op: str(op["kind"]))
def test_kept_work_equals_work_of_and_is_read_only(op: dict[str, Any]) -> None:
    built = make_op(op)
    work_memo.clear()
    kept = work_memo.work_of_one(built, 32.0)
    assert work_memo.work_of_one(make_op(dict(op)), 32.0) is kept  # an equal op finds it
    assert work_memo.work_of_one(built, 64.0) is not kept  # the granularity is part of the key
    fresh = work_of([built], 32.0)
    assert kept.__dict__.keys() == fresh.__dict__.keys()
    for name, value in fresh.__dict__.items():
        if isinstance(value, np.ndarray):
            got = getattr(kept, name)
            assert got.dtype == value.dtype and np.array_equal(got, value), name
            assert not got.flags.writeable, name
    assert kept.bytes_by_role.keys() == fresh.bytes_by_role.keys()
    for role, value in fresh.bytes_by_role.items():
        assert np.array_equal(kept.bytes_by_role[role], value)
        assert not kept.bytes_by_role[role].flags.writeable
    with pytest.raises(ValueError):
        kept.flops_matrix[0] = 1.0


def test_kept_works_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(work_memo, "MAX_ENTRIES", 3)
    work_memo.clear()
    ops = [make_op({"kind": "matmul", "m": 64 * (i + 1), "n": 64, "k": 64, "dtype": "bf16"}) for i in range(5)]
    first = work_memo.work_of_one(ops[0], 32.0)
    for op in ops[1:]:
        work_memo.work_of_one(op, 32.0)
    assert len(work_memo._MEMO) == 3
    assert work_memo.work_of_one(ops[0], 32.0) is not first  # the least recently used went first
    assert work_memo.work_of_one(ops[4], 32.0) is work_memo.work_of_one(ops[4], 32.0)
