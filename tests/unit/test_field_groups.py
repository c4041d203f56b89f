"""``field_rows``' one-group read (branch speed31): dicts all as long as the first are read by its keys; a dict of
that length with another key falls back to grouping by key order and raises ``make_op``'s error; key sets in other
orders, optional fields and shapes as lists give ``make_op``'s values, through ``from_dicts`` too."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from perfmodel.ops import OpError, make_op, op_class
from perfmodel.ops import field_rows as rows
from perfmodel.ops.columns import from_dicts, row_op


def _matmuls(count: int) -> list[dict[str, Any]]:
    return [{"kind": "matmul", "m": 64 + i, "n": 64, "k": 64, "dtype": "bf16"} for i in range(count)]


@pytest.mark.parametrize("swap", [("m", "mm"), ("dtype", "dtypes"), ("k", "kind_")])
def test_same_length_other_key_raises_make_ops_error(swap: tuple[str, str]) -> None:
    group = _matmuls(12)
    old, new = swap
    group[5] = {new if key == old else key: value for key, value in group[5].items()}  # the same length
    with pytest.raises(OpError) as expected:
        [make_op(d) for d in group]
    for build in (lambda: rows.build_ops(op_class("matmul"), group), lambda: from_dicts(op_class("matmul"), group)):
        with pytest.raises(OpError) as got:
            build()
        assert str(got.value) == str(expected.value)


def test_key_orders_optional_fields_and_shape_lists_give_make_ops_ops() -> None:
    attention = [{"kind": "attention", "batch": 1 + i, "heads": 32, "kv_heads": 8, "seq_q": 128, "seq_kv": 512,
                  "head_dim": 64, "causal": True, "dtype": "bf16"} for i in range(10)]
    attention[3] = dict(reversed(list(attention[3].items())))  # the same keys in another order
    attention[6]["kv_heads"] = None  # an optional field unset in one row: value by value
    norms = [{"kind": "rmsnorm", "shape": [1 + i, 4096] if i % 3 else [2, 1 + i, 4096], "dtype": "bf16"}
             for i in range(9)]
    for group in (attention, attention[:6], norms):
        cls = op_class(group[0]["kind"])
        assert rows.build_ops(cls, group) == [make_op(d) for d in group]
        assert rows.field_rows(cls, group) == [cls.field_values(d) for d in group]
        cols = from_dicts(cls, group)
        assert [row_op(cols, i) for i in range(cols.n)] == [make_op(d) for d in group]


def test_the_one_group_read_equals_grouping_by_key_order(monkeypatch: pytest.MonkeyPatch) -> None:
    group = [{"kind": "elementwise", "shape": [1 + i, 256], "inputs": 2, "dtype": "fp32"} for i in range(8)]
    group[2] = dict(reversed(list(group[2].items())))
    cls = op_class("elementwise")
    fast = from_dicts(cls, group)
    monkeypatch.setattr(rows, "ONE_GROUP_BY_LENGTH", False)
    slow = from_dicts(cls, group)
    assert fast.values.keys() == slow.values.keys()
    for name in fast.values:
        np.testing.assert_array_equal(fast.values[name], slow.values[name], err_msg=name)
