"""``field_rows`` / ``build_ops`` (column-checked dict → op) give ``make_op``'s ops, values and errors."""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pytest

from perfmodel.ops import OpError, make_op, op_class
from perfmodel.ops.field_rows import build_ops, field_rows


def _mix(count: int, seed: int) -> list[dict[str, Any]]:
    """Distinct dicts of several kinds (columnar and not, embedding's renamed fields, an optional pass)."""
    rng = random.Random(seed)
    kinds: list[Callable[[int], dict[str, Any]]] = [
        lambda i: {"kind": "matmul", "m": 1 + i, "n": 64, "k": rng.choice([64, 128.0]), "dtype": "bf16"},
        lambda i: {"kind": "attention", "batch": 1 + i, "heads": 8, "kv_heads": 8, "seq_q": 128, "seq_kv": 512,
                   "head_dim": 64, "causal": rng.random() < 0.5, "dtype": "fp16"},
        lambda i: {"kind": "conv2d", "batch": 1 + i, "in_channels": 8, "out_channels": 16, "height": 14,
                   "width": 14, "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp16", "pass": "backward"},
        lambda i: {"kind": "elementwise", "shape": [1 + i, 256], "inputs": 2, "dtype": "fp32"},
        lambda i: {"kind": "embedding", "num_embeddings": 1000, "embedding_dim": 64, "num_indices": 1 + i,
                   "dtype": "bf16"},
        lambda i: {"kind": "allreduce", "bytes": 1e4 + i, "devices": 8},
        lambda i: {"kind": "rmsnorm", "shape": [1 + i, 4096], "dtype": "bf16"},
    ]
    return [rng.choice(kinds)(i) for i in range(count)]


def _by_kind(dicts: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for d in dicts:
        groups.setdefault(d["kind"], []).append(d)
    return groups


def test_same_ops_and_values_as_row_by_row() -> None:
    dicts = _mix(700, seed=3)
    dicts[5] = {k: dicts[5][k] for k in reversed(list(dicts[5]))}  # another key order: another group
    for kind, group in _by_kind(dicts).items():
        cls = op_class(kind)
        assert build_ops(cls, group) == [make_op(d) for d in group]
        if kind != "embedding":  # embedding renames its fields in _build, before field_values
            assert field_rows(cls, group) == [cls.field_values(d) for d in group]


def test_mixed_value_types_convert_as_make_op() -> None:
    group: list[Any] = [{"kind": "matmul", "m": 64, "n": 64.0, "k": "128", "dtype": "bf16"},
                        OrderedDict(kind="matmul", m=2, n=3, k=4, dtype="fp16"),
                        {"kind": "matmul", "m": 8, "n": 8, "k": 8, "dtype": "bfloat16", "pass": "backward"}]
    assert build_ops(op_class("matmul"), group) == [make_op(dict(d)) for d in group]


@pytest.mark.parametrize("bad", [{"m": -1}, {"m": 1.5}, {"dtype": "fp7"}, {"mm": 3}, {"m": None}, {"m": True}])
def test_bad_row_raises_make_ops_error(bad: dict[str, Any]) -> None:
    group = [{"kind": "matmul", "m": 64 + i, "n": 64, "k": 64, "dtype": "bf16"} for i in range(20)]
    group[7].update(bad)
    with pytest.raises(OpError) as expected:
        for d in group:
            make_op(d)
    with pytest.raises(OpError) as got:
        build_ops(op_class("matmul"), group)
    assert str(got.value) == str(expected.value)


def test_missing_required_field_named() -> None:
    full = {"kind": "conv2d", "batch": 1, "in_channels": 8, "out_channels": 8, "height": 8, "width": 8,
            "kernel_h": 3, "kernel_w": 3, "dtype": "fp16"}
    group = [dict(full, batch=1 + i) for i in range(4)]
    del group[2]["out_channels"]
    with pytest.raises(OpError) as expected:
        [make_op(d) for d in group]
    with pytest.raises(OpError) as got:
        build_ops(op_class("conv2d"), group)
    assert str(got.value) == str(expected.value)
    assert "out_channels" in str(got.value)
    assert build_ops(op_class("conv2d"), [full]) == [make_op(full)]
