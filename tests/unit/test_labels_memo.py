"""``Labels`` (CostBatch.bound as 1-byte codes) reads like the unicode column it replaced, and the GEMM choice memo
of a chunked ``predict_columns`` gives the answers of the one-piece, memo-less path, searching each shape once."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel import columnar
from perfmodel.labels import Labels
from perfmodel.search import choice_memo
from perfmodel.search.gemm_cost import GemmChoice


def test_labels_read_like_the_unicode_array() -> None:
    strings = ["HBM3", "L2", "tensor", "L2", "latency", "tensor"]
    labels = Labels.from_codes(np.array([0, 1, 2, 1, 3, 4]), ["HBM3", "L2", "tensor", "latency", "tensor"])
    assert labels.names == ("HBM3", "L2", "tensor", "latency")  # a repeated name is one code
    assert labels.codes.dtype == np.uint8 and labels.codes.nbytes == len(strings)
    array = np.array(strings)
    assert labels.tolist() == strings and list(labels) == strings and len(labels) == 6
    assert np.asarray(labels).dtype == array.dtype and (np.asarray(labels) == array).all()
    assert labels[2] == "tensor" and isinstance(labels[np.int64(2)], str)
    assert labels[np.array([5, 0])].tolist() == ["tensor", "HBM3"]
    assert ((labels == "L2") == (array == "L2")).all() and ((labels != "L2") == (array != "L2")).all()
    assert (labels == "absent").sum() == 0 and (labels == array).all()
    copy = labels.copy()
    copy[np.array([True, False, False, False, False, True])] = "none"  # a label not in the table yet
    assert copy.tolist() == ["none", "L2", "tensor", "L2", "latency", "none"] and labels.tolist() == strings
    assert Labels.from_strings(array).tolist() == strings and labels.tobytes() == array.tobytes()


def _rows(n: int, seed: int) -> tuple[np.ndarray[Any, Any], ...]:
    rng = np.random.default_rng(seed)
    return tuple(rng.choice([1.0, 2.0, 3.0], n) for _ in range(7))


def _fake_best(searched: list[int]) -> Any:
    def best(*columns: np.ndarray[Any, Any]) -> GemmChoice:
        searched.append(columns[0].size)
        value = np.zeros(columns[0].size)
        for j, c in enumerate(columns):
            value = value + c * 10.0**j  # a different answer for each row
        return GemmChoice(value.astype(np.intp), *([value] * (len(dataclasses.fields(GemmChoice)) - 1)))
    return best


def test_the_memo_searches_each_row_once_and_answers_as_a_search() -> None:
    searched: list[int] = []
    best = _fake_best(searched)
    memo, tables, space = choice_memo.ChoiceMemo(), object(), object()
    first, second = _rows(50, 1), _rows(80, 2)
    a = memo.search(tables, space, first, best)
    b = memo.search(tables, space, second, best)
    again = memo.search(tables, space, first, best)
    for got, columns in ((a, first), (b, second), (again, first)):
        want = _fake_best([])(*columns)
        for f in dataclasses.fields(GemmChoice):
            np.testing.assert_array_equal(getattr(got, f.name), getattr(want, f.name), err_msg=f.name)
    seen = {tuple(r) for r in np.stack(first, axis=1).tolist()}
    unseen = sum(tuple(r) not in seen for r in np.stack(second, axis=1).tolist())
    assert 0 < unseen < 80 and searched == [50, unseen]  # `second` searched its unseen rows only; `again` none
    other = memo.search(object(), space, first, best)  # other tables: searched again
    assert len(searched) == 3 and other.index.tolist() == a.index.tolist()


@pytest.mark.parametrize("device", ["nvidia-h100-sxm5-80gb", "amd-mi300x"])
def test_chunked_with_memo_gives_the_op_path(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same ops through ``predict_many`` of Op objects (one piece, no memo) and a chunked table (memo on):
    identical times, labels and schedules."""
    rng = np.random.default_rng(7)
    n = 1000
    dims = np.array([16, 512, 4096])
    table = {"kind": rng.choice(["matmul", "rmsnorm"], n), "m": rng.choice(dims, n), "n": rng.choice(dims, n),
             "k": rng.choice(dims, n), "dtype": rng.choice(["bf16", "fp8_e4m3", "fp32"], n),
             "shape": np.stack([rng.choice(dims, n), np.full(n, 4096)], axis=1)}
    dicts = [{"kind": "matmul", "m": int(table["m"][i]), "n": int(table["n"][i]), "k": int(table["k"][i]),
              "dtype": str(table["dtype"][i])} if table["kind"][i] == "matmul" else
             {"kind": "rmsnorm", "shape": table["shape"][i].tolist(), "dtype": str(table["dtype"][i])}
             for i in range(n)]
    plain = perfmodel.predict_many(device, [perfmodel.make_op(d) for d in dicts])
    monkeypatch.setattr(columnar, "CHUNK_ROWS", 200)  # ~100 GEMMs a chunk, shapes repeated
    monkeypatch.setattr(columnar, "MOST_DISTINCT", 0.0)  # chunk by chunk, repeated rows not merged
    searched: list[int] = []
    real = choice_memo.ChoiceMemo.search

    def counting(self: choice_memo.ChoiceMemo, *args: Any) -> GemmChoice:
        searched.append(1)
        return real(self, *args)

    monkeypatch.setattr(choice_memo.ChoiceMemo, "search", counting)
    chunked = columnar.predict_columns(device, table)
    assert searched  # the memo was used
    assert chunked.time_s.tobytes() == plain.time_s.tobytes()
    assert chunked.bound.tolist() == plain.bound.tolist()
    for key, values in plain.schedule.items():
        assert chunked.schedule[key].tobytes() == values.tobytes(), key


def test_unicode_factorize_matches_the_string_search() -> None:
    """The fixed-width byte comparison gives the unicode comparison's codes: names longer than the column, repeated
    names (the first wins), an empty cell and a cell no name matches included."""
    from perfmodel.ops.columns import factorize

    names = ["rmsnorm", "matmul", "matmul_long_name", "mat", "matmul", "softmax"]
    values = np.array(["matmul", "mat", "", "rmsnorm", "nope", "softmax", "matmu"])
    got = factorize(values, names)
    assert got.tolist() == [1, 3, -1, 0, -1, 5, -1]
    assert got.tolist() == factorize(values.astype(object), names).tolist()  # the generic path
