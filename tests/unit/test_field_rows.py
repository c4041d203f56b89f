"""``field_rows`` / ``build_ops`` (column-checked dict → op) give ``make_op``'s ops, values and errors."""

from __future__ import annotations

import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from perfmodel.ops import OpError, make_op, op_class
from perfmodel.ops.field_rows import build_ops, field_rows

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from predict_speed import _distinct_mix, mixed_ops


def _by_kind(dicts: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for d in dicts:
        groups.setdefault(d["kind"], []).append(d)
    return groups


def test_same_ops_and_values_as_row_by_row() -> None:
    dicts = _distinct_mix(mixed_ops(800, seed=3))
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
    group = [{"kind": "conv2d", "batch": 1, "in_channels": 8, "out_channels": 8, "height": 8, "width": 8}] * 3
    group = [*group, {"kind": "conv2d", "batch": 1, "in_channels": 8, "height": 8, "width": 8}]
    with pytest.raises(OpError) as expected:
        [make_op(d) for d in group]
    with pytest.raises(OpError) as got:
        build_ops(op_class("conv2d"), group)
    assert str(got.value) == str(expected.value)
