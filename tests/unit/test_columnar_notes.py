"""roofline_labels.row_notes (rows coded with numpy, lists built from a table of distinct notes) gives the notes of the
per-row loop it replaced: the same rows, texts, order within a row and order of rows, on every bundled device."""

from __future__ import annotations

import contextlib
import gc
from typing import Any

import numpy as np
import pytest

from perfmodel import roofline_labels
from perfmodel.columnar import predict_columns
from perfmodel.machine import MachineTables, tables
from perfmodel.ops import Work
from perfmodel.specs import list_hardware, load_hardware


def _loop_notes(t: MachineTables, work: Work, resident: np.ndarray[Any, np.dtype[np.bool_]],
                has_llc: bool) -> dict[int, list[str]]:
    """The per-row loop of roofline_labels.row_notes before it was coded (commit 30e5a53), kept as the reference."""
    notes: dict[int, list[str]] = {}
    matrix_texts = [p.note for p in t.matrix_paths]
    matrix_noted = np.array([bool(text) for text in matrix_texts])[work.matrix_dtype]
    rows = np.nonzero((work.flops_matrix > 0) & matrix_noted)[0]
    for i, code in zip(rows.tolist(), work.matrix_dtype[rows].tolist(), strict=True):
        notes.setdefault(i, []).append(matrix_texts[code])
    vector_texts = [p.note for p in t.vector_paths]
    vector_noted = np.array([bool(text) for text in vector_texts])[work.vector_dtype]
    rows = np.nonzero((work.flops_matrix == 0) & (work.flops_vector > 0) & vector_noted)[0]
    for i, code in zip(rows.tolist(), work.vector_dtype[rows].tolist(), strict=True):
        notes.setdefault(i, []).append(vector_texts[code])
    if has_llc and t.llc is not None:
        text = f"working set fits {t.llc.name}: served from it"
        for i in np.nonzero(resident & (work.dram_bytes > 0))[0].tolist():
            notes.setdefault(i, []).append(text)
    return notes


def _table(n: int) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    kinds = rng.choice(["matmul", "rmsnorm", "softmax", "layernorm", "elementwise"], n)
    m, k = rng.integers(1, 5000, n), rng.integers(1, 5000, n)
    return {"kind": kinds, "m": m, "n": m[::-1], "k": k,
            "dtype": rng.choice(["bf16", "fp16", "fp32", "fp8_e4m3", "fp64", "int8"], n),
            "shape": np.stack([rng.integers(1, 300, n), k], axis=1)}


def _supported_rows(device: str, columns: dict[str, Any]) -> dict[str, Any]:
    """The rows the device runs (a dtype it cannot run raises for the whole table)."""
    keep = []
    for i in range(len(columns["kind"])):
        with contextlib.suppress(ValueError):  # a dtype the device cannot run: the row is left out
            predict_columns(device, {k: v[i:i + 1] for k, v in columns.items()})
            keep.append(i)
    return {k: v[keep] for k, v in columns.items()}


@pytest.mark.parametrize("device", list_hardware())
def test_coded_notes_equal_the_loop(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    columns = _supported_rows(device, _table(120))
    seen: list[tuple[dict[int, list[str]], dict[int, list[str]]]] = []
    coded = roofline_labels.row_notes

    def both(t: MachineTables, work: Work, resident: np.ndarray[Any, np.dtype[np.bool_]],
             has_llc: bool) -> dict[int, list[str]]:
        got = coded(t, work, resident, has_llc)
        seen.append((got, _loop_notes(t, work, resident, has_llc)))
        return got

    monkeypatch.setattr(roofline_labels, "row_notes", both)
    for warm in (False, True):
        batch = predict_columns(device, columns, warm_cache=warm)
        got, want = seen[-1]
        assert got == want
        assert list(got) == list(want)  # rows in the same order
        assert len({id(texts) for texts in got.values()}) == len(got)  # a list of its own per row
        assert batch.notes is got
        assert gc.isenabled()  # row_notes holds the collector only while it builds the lists


def test_every_kind_of_note_is_exercised() -> None:
    """The comparison above covers matrix notes, vector notes and resident-cache notes on some device."""
    kinds: set[str] = set()
    for device in list_hardware():
        t = tables(load_hardware(device))
        columns = _supported_rows(device, _table(60))
        notes = predict_columns(device, columns, warm_cache=True).notes
        texts = {text for row in notes.values() for text in row}
        kinds |= {"matrix"} & {"matrix" for p in t.matrix_paths if p.note in texts}
        kinds |= {"vector"} & {"vector" for p in t.vector_paths if p.note in texts}
        kinds |= {"llc"} & {"llc" for text in texts if text.startswith("working set fits")}
    assert kinds == {"matrix", "vector", "llc"}


@pytest.mark.parametrize("seed", range(6))
def test_top_is_vstack_max_and_argmax(seed: int) -> None:
    """roofline_labels.top_bound (column by column) gives what np.vstack(...).max / .argmax gave, bit for bit:
    ties keep the first column, signed zeros and infinities as they were, a NaN as argmax places it."""
    rng = np.random.default_rng(seed)
    n = 5000
    pool = np.array([0.0, -0.0, 1e-6, 2e-6, np.inf, 3.5e-5])
    columns = [rng.choice(pool, n) if j % 2 else rng.random(n) * 1e-5 for j in range(7)]
    if seed >= 4:
        columns[seed - 1][rng.integers(0, n, 20)] = np.nan
    top, which = roofline_labels.top_bound(columns)
    stack = np.vstack(columns)
    np.testing.assert_array_equal(top.view(np.int64), stack.max(axis=0).view(np.int64))
    np.testing.assert_array_equal(which, stack.argmax(axis=0))
    assert which.dtype == stack.argmax(axis=0).dtype

