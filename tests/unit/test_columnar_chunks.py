"""predict_columns chunk by chunk (cost_stitch) gives the one-piece answers bit for bit, on every bundled device:
every array (dtype and shape included), the notes, the ops, and the one-piece path's error for a bad table."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from perfmodel import columnar
from perfmodel.cost import CostBatch
from perfmodel.cost_stitch import Stitch
from perfmodel.ops import OpError
from perfmodel.specs import list_hardware

ARRAYS = ("time_s", "bound", "overhead_s", "compulsory_bytes", "utilization", "interval_s", "in_calibrated_range",
          "uncalibrated_interval_s")
GROUPS = ("flops_by_engine", "bytes_by_level", "time_s_by_level", "time_s_by_engine", "schedule")


def _table(n: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    dims = np.array([1, 7, 16, 64, 128, 512, 1024, 4096, 8192])
    m, k = rng.choice(dims, n), rng.choice(dims, n)
    return {"kind": rng.choice(["matmul", "rmsnorm", "softmax", "matmul", "layernorm"], n), "m": m,
            "n": rng.choice(dims, n), "k": k, "dtype": rng.choice(["bf16", "fp16", "fp32", "fp8_e4m3"], n),
            "shape": np.stack([m, k], axis=1)}


def _identical(a: CostBatch, b: CostBatch) -> None:
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name
    for name in GROUPS:
        x, y = getattr(a, name), getattr(b, name)
        assert list(x) == list(y), name
        for key in x:
            assert x[key].dtype == y[key].dtype and x[key].tobytes() == y[key].tobytes(), (name, key)
    assert a.notes == b.notes and sorted(a.notes) == sorted(b.notes)
    assert list(a.ops) == list(b.ops)
    assert a.to_dicts() == b.to_dicts()


@pytest.mark.parametrize("device", list_hardware())
def test_chunks_give_the_one_piece_answers(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    columns = _table(700, seed=len(device))
    whole = columnar.predict_columns(device, columns)  # every bundled device runs some of these dtypes
    monkeypatch.setattr(columnar, "CHUNK_ROWS", 128)  # six chunks, the last one short
    monkeypatch.setattr(columnar, "MOST_DISTINCT", 0.0)  # chunk by chunk, repeated rows not merged
    _identical(columnar.predict_columns(device, columns), whole)


def test_chunks_that_do_not_stack_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk whose batch has other keys than the first's does not stack: the kind-by-kind chunks give way to the
    chunks in table order, and those to the whole table."""
    columns = _table(300, seed=5)
    whole = columnar.predict_columns("nvidia-h100-sxm5-80gb", columns)
    first = columnar.predict_columns("nvidia-h100-sxm5-80gb", {k: v[:100] for k, v in columns.items()})
    other = columnar.predict_columns("nvidia-h100-sxm5-80gb", {k: v[100:200] for k, v in columns.items()})
    other.schedule["extra"] = np.zeros(len(other))
    stitch = Stitch(200)
    assert stitch.add(0, first) and not stitch.add(100, other)
    calls: list[int | str] = []
    add = Stitch.add

    def refuse_second(self: Stitch, start: Any, batch: CostBatch) -> bool:
        calls.append(start if isinstance(start, int) else "rows")
        first = not getattr(self, "seen", False)
        self.seen = True  # type: ignore[attr-defined]
        return first and add(self, start, batch)

    monkeypatch.setattr(columnar, "CHUNK_ROWS", 100)
    monkeypatch.setattr(Stitch, "add", refuse_second)
    _identical(columnar.predict_columns("nvidia-h100-sxm5-80gb", columns), whole)
    assert calls == ["rows", "rows", 0, 100]


def test_a_bad_row_in_a_later_chunk_raises_the_one_piece_error(monkeypatch: pytest.MonkeyPatch) -> None:
    columns = _table(300, seed=6)
    columns["kind"][:] = "matmul"
    columns["m"][250], columns["k"][20] = 0, -3  # two bad rows: the one-piece path names the first of 'm'
    with pytest.raises(OpError) as expected:
        columnar.predict_columns("nvidia-h100-sxm5-80gb", columns)
    monkeypatch.setattr(columnar, "CHUNK_ROWS", 100)
    with pytest.raises(OpError) as got:
        columnar.predict_columns("nvidia-h100-sxm5-80gb", columns)
    assert str(got.value) == str(expected.value)
