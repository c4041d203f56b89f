"""Repeated GEMM shapes are searched once (``distinct_gemms.best_distinct``), kinds factorised by binary search:
both give what the plain per-row forms give."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from perfmodel.machine import tables
from perfmodel.ops.columns import factorize
from perfmodel.search import distinct_gemms
from perfmodel.search.distinct_gemms import DISTINCT_FROM_GEMMS, best_distinct
from perfmodel.search.gemm_cost import GemmChoice, best_gemms
from perfmodel.search.gemm_space import compact_space
from perfmodel.specs import load_hardware


def test_distinct_rows_get_the_per_row_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    t = tables(load_hardware("nvidia-h100-sxm5-80gb"))
    space = compact_space(t)
    rng = np.random.default_rng(0)
    rows = 4 * DISTINCT_FROM_GEMMS
    dims = np.array([16.0, 128.0, 1024.0, 4096.0])
    m, n, k = (rng.choice(dims, rows) for _ in range(3))
    batch, elem = np.ones(rows), rng.choice(np.array([1.0, 2.0]), rows)
    peak = np.where(elem == 1.0, 1.979e15, 0.989e15)
    compulsory = (m * k + k * n + m * n) * elem
    searched: list[int] = []

    def counting(*args: Any) -> GemmChoice:
        searched.append(args[2].size)
        return best_gemms(*args)

    monkeypatch.setattr(distinct_gemms, "best_gemms", counting)
    got = best_distinct(t, space, batch, m, n, k, elem, peak, compulsory)
    distinct = {(a, b, c, e) for a, b, c, e in zip(m.tolist(), n.tolist(), k.tolist(), elem.tolist(), strict=True)}
    assert searched == [len(distinct)] and len(distinct) < rows
    want = best_gemms(t, space, batch, m, n, k, elem, peak, compulsory)
    for f in dataclasses.fields(GemmChoice):
        assert np.array_equal(getattr(got, f.name), getattr(want, f.name)), f.name


def test_factorize_matches_one_comparison_per_name() -> None:
    names = ["softmax", "matmul", "rmsnorm", "attention"]
    values = np.array(["matmul", "rmsnorm", "zzz", "attention", "", "matmul", "aaa", "softmax"])
    expected = np.full(values.size, -1)
    for i, name in enumerate(names):
        expected[values == name] = i
    assert factorize(values, names).tolist() == expected.tolist()
    assert factorize(values[:0], names).size == 0


def test_repeated_dicts_are_predicted_once_with_each_rows_answer() -> None:
    import perfmodel
    from perfmodel.columnar import _distinct
    from perfmodel.ops import OpError, make_op

    a: dict[str, Any] = {"kind": "matmul", "m": 64, "n": 64, "k": 64, "dtype": "bf16", "bias": True}
    b: dict[str, Any] = {"kind": "rmsnorm", "shape": [8, 4096], "dtype": "bf16"}
    rows: list[dict[str, Any]] = [a, b, dict(a), {**a, "m": 64.0}, dict(b), a]
    distinct = _distinct(rows)
    assert distinct is not None and distinct[0] == [0, 1, 3] and distinct[1].tolist() == [0, 1, 0, 2, 1, 0]
    batch = perfmodel.predict_many("nvidia-h100-sxm5-80gb", rows)
    plain = perfmodel.predict_many("nvidia-h100-sxm5-80gb", [make_op(r) for r in rows])
    assert [c.to_dict() for c in batch] == [c.to_dict() for c in plain]
    assert [op.kind for op in batch.ops] == [r["kind"] for r in rows]
    with pytest.raises(OpError, match="expected true/false"):  # 1 is not True for a flag: not merged with a
        perfmodel.predict_many("nvidia-h100-sxm5-80gb", [a, {**a, "bias": 1}])
    assert _distinct([a, {"kind": "matmul", "m": np.int64(4)}]) is None  # not plain JSON values: no dedupe


def test_dicts_that_differ_only_in_a_values_type_or_sign_are_not_merged() -> None:
    """The dedupe key keeps each value's exact type and bits (``marshal`` bytes); a numpy scalar anywhere, whose
    bytes a byte string would share, turns the dedupe off."""
    from perfmodel.columnar import _distinct

    a: dict[str, Any] = {"kind": "allreduce", "bytes": 0.0, "devices": 8}
    rows: list[dict[str, Any]] = [a, {**a, "bytes": -0.0}, {**a, "bytes": 0}, {**a, "bytes": False}, dict(a),
                                  {**a, "devices": 8.0}, {**a, "x": [1, 2]}, {**a, "x": [1, 2.0]}, {**a, "x": [1, 2]}]
    distinct = _distinct(rows)
    assert distinct is not None and distinct[0] == [0, 1, 2, 3, 5, 6, 7] and distinct[1].tolist() == [
        0, 1, 2, 3, 0, 4, 5, 6, 5]
    assert _distinct([a, {**a, "x": [np.int64(1)]}]) is None  # a buffer inside a list
    assert _distinct([a, {**a, "x": [b"\x01\x00\x00\x00\x00\x00\x00\x00"]}]) is None
    assert _distinct([a, {**a, "x": {"y": 1}}]) is None  # a nested dict is not a value of an op field
    assert _distinct([a, {**a, "x": (1, 2)}]) is None
    assert _distinct([a, 3]) is None  # type: ignore[list-item]
