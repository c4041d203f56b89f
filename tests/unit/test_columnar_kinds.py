"""A table of distinct rows is predicted chunk by chunk, kind by kind (``columnar._kind_order``: one stable
partition, each chunk one kind, answers scattered back to their rows): the answers of ``predict_many`` of the rows'
``Op`` objects, to the last bit. And the unicode factorizer's name-by-name path equals the binary search."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel import columnar
from perfmodel.ops import columns as op_columns
from perfmodel.ops import op_kinds
from tests.unit.test_row_keys import DEVICES, DTYPES, _runs


def test_the_name_by_name_factorizer_equals_the_binary_search() -> None:
    rng = np.random.default_rng(11)
    names = op_kinds()
    n = 50_000
    cases = [rng.choice(["matmul", "rmsnorm"], n),  # two names
             rng.choice(["matmul", "rmsnorm", "softmax", "conv2d", "gelu", "layernorm", "embedding"], n),  # many
             rng.choice(["matmul", "not_a_kind", ""], n)]  # an unknown name and an empty one
    missed = rng.choice(["matmul", "rmsnorm"], n).astype("<U12")
    missed[[1, 7, n - 2]] = ["softmax", "no", "layernorm"]  # rows the spread sample does not read
    cases.append(missed)
    cases.append(np.array(["matmul"] * n, dtype="<U3"))  # every name longer than the column's width
    for values in cases:
        got = op_columns.factorize(values, names)
        expected = op_columns._search_unicode(values, names)
        assert got.dtype == expected.dtype and got.tolist() == expected.tolist()
    assert set(op_columns.factorize(missed, names)[[1, 7, n - 2]].tolist()) == {
        names.index("softmax"), -1, names.index("layernorm")}


def test_kind_order_is_a_stable_partition() -> None:
    rng = np.random.default_rng(12)
    kinds = rng.choice(["softmax", "matmul", "rmsnorm", "allreduce"], 10_000)
    split = columnar._kind_order({"kind": kinds})
    assert split is not None
    order, spans = split
    assert sorted(order.tolist()) == list(range(kinds.size))
    for kind, lo, hi in spans:
        assert order[lo:hi].tolist() == np.flatnonzero(kinds == kind).tolist()  # table order within a kind
    assert [kind for kind, _, _ in spans] == [k for k in op_kinds() if k in set(kinds.tolist())]
    assert columnar._kind_order({"kind": np.array(["matmul", "nope"])}) is None


def _distinct_table(device: str, n: int) -> dict[str, Any]:
    """Rows of seven kinds (one not columnar: allreduce), every row different from every other."""
    rng = np.random.default_rng(len(device))
    dims = np.array([1, 16, 128, 4096])
    dtypes = [d for d in DTYPES if _runs(device, {"kind": "rmsnorm", "shape": [2, 8], "dtype": d})]
    grow = np.arange(n)  # one size of row i grown by i: no two rows equal
    kinds = ["matmul", "rmsnorm", "layernorm", "softmax", "batchnorm", "elementwise", "allreduce"]
    return {"kind": rng.choice(kinds, n), "m": rng.choice(dims, n) + grow, "n": rng.choice(dims, n),
            "k": rng.choice(dims, n), "dtype": rng.choice(dtypes, n),
            "shape": np.stack([rng.choice(dims, n) + grow, rng.choice(dims, n)], axis=1),
            "bytes": rng.choice([1e4, 1e6], n) + grow, "devices": np.full(n, 8), "inputs": np.full(n, 2)}


@pytest.mark.parametrize(("device", "passes"), [*((d, False) for d in DEVICES), (DEVICES[0], True)])
def test_a_table_of_distinct_rows_gives_the_op_objects_answers(device: str, passes: bool,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a ``pass_`` column (every row's is the default, read once) and with one of all three passes."""
    n = 1500
    table = _distinct_table(device, n)
    if passes:
        table["pass_"] = np.random.default_rng(4).choice(["forward", "backward", "forward_backward"], n)
    monkeypatch.setattr(columnar, "CHUNK_ROWS", 128)  # several chunks per kind, the last of each short
    fallbacks: list[int] = []
    real = columnar._predict_table_chunks

    def spy(*args: Any) -> perfmodel.CostBatch | None:
        fallbacks.append(1)
        return real(*args)

    monkeypatch.setattr(columnar, "_predict_table_chunks", spy)
    got = columnar.predict_columns(device, table)
    assert not fallbacks  # the kind-by-kind chunks stacked
    ops = [columnar._cell_op(str(table["kind"][i]), table, i) for i in range(n)]  # built from the cells
    expected = perfmodel.predict_many(device, ops)
    assert list(got.ops) == ops
    assert got.to_dicts() == expected.to_dicts()
    for name in ("time_s", "overhead_s", "compulsory_bytes", "utilization", "uncalibrated_interval_s"):
        assert getattr(got, name).tobytes() == getattr(expected, name).tobytes(), name
    assert got.notes == expected.notes


def test_the_choice_memo_steps_aside_for_new_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once most rows looked up were new, the memo searches without looking up or keeping: the same answers."""
    import dataclasses

    from perfmodel.search import choice_memo
    from perfmodel.search.gemm_cost import GemmChoice
    from tests.unit.test_labels_memo import _fake_best, _rows

    monkeypatch.setattr(choice_memo, "PAYS_FROM_ROWS", 100)
    searched: list[int] = []
    best = _fake_best(searched)
    memo, tables, space = choice_memo.ChoiceMemo(), object(), object()
    calls = [_rows(80, seed) for seed in (1, 2, 3)]  # mostly new rows each time
    got = [memo.search(tables, space, columns, best) for columns in calls]
    assert searched[0] == 80 and searched[1] < 80 and searched[2] == 80  # the third: every row, no look-up
    for choice, columns in zip(got, calls, strict=True):
        want = _fake_best([])(*columns)
        for f in dataclasses.fields(GemmChoice):
            np.testing.assert_array_equal(getattr(choice, f.name), getattr(want, f.name), err_msg=f.name)
    repeated = choice_memo.ChoiceMemo()
    for _ in range(3):  # the same rows again and again: found, kept in use
        repeated.search(tables, space, calls[0], best)
    assert searched[3:] == [80]
