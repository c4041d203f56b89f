"""``Stitch.add`` copies a chunk whose rows are consecutive ascending as one slice (``cost_stitch._as_slice``)
instead of scattering it: every array, group, label, note and dict equals the scatter's, to the bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from perfmodel import columnar, cost_stitch
from perfmodel.cost import CostBatch
from tests.benchmark_module import load_benchmark
from tests.unit.test_columnar_chunks import _identical


def test_only_consecutive_ascending_rows_become_a_slice() -> None:
    def rows(values: list[int]) -> np.ndarray[Any, np.dtype[np.intp]]:
        return np.array(values, dtype=np.intp)

    assert cost_stitch._as_slice(rows([5, 6, 7, 8])) == slice(5, 9)
    assert cost_stitch._as_slice(rows([0])) == slice(0, 1)
    for kept in ([5, 7, 6, 8], [8, 7, 6, 5], [5, 6, 8], [-2, -1, 0], [3, 3, 4, 6], []):
        got = cost_stitch._as_slice(rows(kept))
        assert isinstance(got, np.ndarray) and got.tolist() == kept


def _same(got: CostBatch, want: CostBatch) -> None:
    _identical(got, want)  # every array, group, note, op and dict
    assert got.bound.names == want.bound.names and got.bound.codes.tobytes() == want.bound.codes.tobytes()


@pytest.mark.parametrize("device", ["nvidia-h100-sxm5-80gb", "amd-mi210"])
@pytest.mark.parametrize("sort_kinds", [True, False])
def test_slices_give_the_scatters_answers(device: str, sort_kinds: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    table = load_benchmark("predict_speed", "predict_speed_for_stitch").distinct_table(3000)
    if sort_kinds:  # each kind's rows one block: its chunks' rows are consecutive
        order = np.argsort(table["kind"], kind="stable")
        table = {k: v[order] for k, v in table.items()}
    monkeypatch.setattr(columnar, "CHUNK_ROWS", 256)  # several chunks per kind, the last of each short
    sliced: list[bool] = []
    real = cost_stitch._as_slice

    def spy(rows: np.ndarray[Any, np.dtype[np.intp]]) -> Any:
        out = real(rows)
        sliced.append(isinstance(out, slice))
        return out

    monkeypatch.setattr(cost_stitch, "_as_slice", spy)
    got = columnar.predict_columns(device, table)
    assert any(sliced) == sort_kinds and len(sliced) > 2
    monkeypatch.setattr(cost_stitch, "_as_slice", lambda rows: rows)  # the reference: every chunk scattered
    _same(got, columnar.predict_columns(device, table))
