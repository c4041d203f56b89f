"""Repeated rows predicted once: ``row_keys.distinct_rows`` groups rows equal bit for bit (and finds a hash
collision), and the merged paths (``predict_columns`` of a repeating table, ``predict_many`` of repeated dicts)
give the per-op ``predict``'s answers to the last bit on every op kind and dtype."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel import columnar, row_keys
from perfmodel.ops import OpError, make_op, op_class
from tests.unit.test_columnar_chunks import _identical
from tests.unit.test_ops import EXAMPLES

DEVICES = ["nvidia-h100-sxm5-80gb", "google-tpu-v5p", "intel-xeon-platinum-8480"]
DTYPES = ["fp32", "fp16", "bf16", "fp8_e4m3", "int8"]


def _groups(values: list[tuple[Any, ...]]) -> list[int]:
    """Each row's number in order of first appearance (the reference: Python tuples of exact values)."""
    seen: dict[tuple[Any, ...], int] = {}
    return [seen.setdefault(v, len(seen)) for v in values]


def test_rows_equal_bit_for_bit_are_merged_and_no_others() -> None:
    rng = np.random.default_rng(3)
    n = 5000
    small = np.array([16.0, 64.0, 0.0, -0.0, np.nan, 1e300])
    columns = {"kind": rng.choice(["matmul", "mm", "a", "rmsnorm_long_name"], n),
               "m": rng.choice(small, n), "n": rng.choice(small, n),  # (16, 64) and (64, 16) must differ
               "i32": rng.integers(0, 3, n).astype(np.int32), "f32": rng.choice([0.5, -0.0, 0.0], n).astype(np.float32),
               "flag": rng.random(n) < 0.5, "shape": np.stack([rng.choice(small, n), np.full(n, 7.0)], axis=1),
               "same": np.broadcast_to(np.array(3.0), n)}
    found = row_keys.distinct_rows(columns, n)
    assert found is not None
    first, inverse = found

    def key(i: int) -> tuple[Any, ...]:
        return tuple(np.asarray(v[i]).tobytes() for v in columns.values())

    expected = _groups([key(i) for i in range(n)])
    assert inverse.tolist() == expected
    assert first.tolist() == [expected.index(c) for c in range(len(first))]
    for values in columns.values():
        assert np.asarray(values[first][inverse]).tobytes() == np.asarray(values).tobytes()


def test_a_hash_collision_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    columns = {"m": np.array([1.0, 2.0, 1.0, 3.0])}
    assert row_keys.distinct_rows(columns, 4) is not None
    monkeypatch.setattr(row_keys, "row_hashes", lambda columns: np.zeros(4, dtype=np.uint64))
    assert row_keys.distinct_rows(columns, 4) is None  # every row one hash: rows 0 and 1 differ


def test_columns_without_raw_bytes_and_mostly_distinct_rows_are_not_merged() -> None:
    assert row_keys.distinct_rows({"x": np.array([None, None], dtype=object)}, 2) is None
    assert row_keys.distinct_rows({"x": np.arange(100.0)}, 100, most_distinct=0.5) is None
    empty = row_keys.distinct_rows({"x": np.zeros(0)}, 0)
    assert empty is not None and empty[0].size == 0 and empty[1].size == 0


def _every_kind_and_dtype() -> list[dict[str, Any]]:
    """Each kind's example op in every dtype it accepts (and its other dtype fields left as given)."""
    out: list[dict[str, Any]] = []
    for kind, example in sorted(EXAMPLES.items()):
        variants = [{**example, "dtype": d} for d in DTYPES] if "dtype" in op_class(kind).__dataclass_fields__ \
            else [example]
        for d in variants:
            try:
                make_op(d)
            except (OpError, ValueError, TypeError):
                continue
            out.append(d)
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_repeated_dicts_give_the_per_op_answers(device: str) -> None:
    ops = [d for d in _every_kind_and_dtype() if _runs(device, d)]
    assert len({d["kind"] for d in ops}) == len(EXAMPLES)
    rng = np.random.default_rng(0)
    rows = [ops[i] for i in rng.permutation(np.repeat(np.arange(len(ops)), 3))]
    batch = perfmodel.predict_many(device, [dict(d) for d in rows])
    single = {id(d): perfmodel.predict(device, d, space="compact").to_dict() for d in ops}
    assert [c.to_dict() for c in batch] == [single[id(d)] for d in rows]


def _runs(device: str, op: dict[str, Any]) -> bool:
    try:
        perfmodel.predict(device, op, space="compact")
    except ValueError:
        return False  # a dtype the device cannot run
    return True


@pytest.mark.parametrize("device", DEVICES)
def test_a_repeating_table_gives_the_per_op_and_chunked_answers(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(len(device))
    n = 3000
    dims = np.array([1, 16, 128, 4096])
    kinds = ["matmul", "rmsnorm", "layernorm", "softmax", "batchnorm", "elementwise", "allreduce"]
    dtypes = [d for d in DTYPES if _runs(device, {"kind": "rmsnorm", "shape": [2, 8], "dtype": d})]
    table = {"kind": rng.choice(kinds, n), "m": rng.choice(dims, n), "n": rng.choice(dims, n),
             "k": rng.choice(dims, n), "dtype": rng.choice(dtypes, n), "shape": rng.choice(dims, (n, 2)),
             "bytes": rng.choice([1e4, 1e6], n), "devices": np.full(n, 8), "inputs": np.full(n, 2)}
    monkeypatch.setattr(columnar, "CHUNK_ROWS", 256)
    taken: list[bool] = []
    real = columnar._predict_distinct

    def spy(*args: Any) -> perfmodel.CostBatch | None:
        batch = real(*args)
        taken.append(batch is not None)
        return batch

    monkeypatch.setattr(columnar, "_predict_distinct", spy)
    merged = columnar.predict_columns(device, table)
    assert taken == [True] and len(merged.ops) == n
    monkeypatch.setattr(columnar, "MOST_DISTINCT", 0.0)
    _identical(merged, columnar.predict_columns(device, table))  # chunk by chunk, every row predicted
    cells = [merged.ops[i] for i in range(0, n, 7)]
    assert [merged[i].to_dict() for i in range(0, n, 7)] == [
        perfmodel.predict(device, op, space="compact").to_dict() for op in cells]


def test_a_bad_row_in_a_repeating_table_raises_the_one_piece_error(monkeypatch: pytest.MonkeyPatch) -> None:
    table = {"kind": np.array(["matmul"] * 600), "m": np.tile([4, 8, 16], 200), "n": np.full(600, 8),
             "k": np.full(600, 8), "dtype": np.array(["bf16"] * 600)}
    table["k"][450] = 0
    monkeypatch.setattr(columnar, "CHUNK_ROWS", 128)
    with pytest.raises(OpError) as merged:
        columnar.predict_columns("nvidia-h100-sxm5-80gb", table)
    with pytest.raises(OpError) as expected:
        make_op({"kind": "matmul", "m": 4, "n": 8, "k": 0, "dtype": "bf16"})
    assert str(merged.value) == str(expected.value)
