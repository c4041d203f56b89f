"""The labels of a roofline batch's rows: which time bounds each op (``top_bound``, ``bound_names``) and the
notes each row carries (``row_notes``), computed as columns from the machine tables and the ops' ``Work``."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np

from perfmodel.labels import Labels
from perfmodel.machine import MachineTables, derived
from perfmodel.ops import Work
from perfmodel.ops.base import FloatArray


def top_bound(columns: list[FloatArray]) -> tuple[FloatArray, np.ndarray[Any, np.dtype[np.intp]]]:
    """Per row, the largest of ``columns`` and the first column holding it: ``np.vstack(columns).max(axis=0)``
    and ``.argmax(axis=0)`` bit for bit (the max reduces the rows in the same order), one column at a time
    (no columns x ops copy, no strided argmax). A NaN anywhere leaves the index to ``argmax`` (NaN wins there)."""
    top = columns[0]
    which = np.zeros(top.size, dtype=np.intp)
    for j, values in enumerate(columns[1:], start=1):
        which[values > top] = j  # strictly: a tie keeps the first column, as argmax does
        top = np.maximum(top, values)
    if np.isnan(top).any():
        which = np.vstack(columns).argmax(axis=0)
    return top, which


def bound_names(t: MachineTables, work: Work, which: np.ndarray[Any, np.dtype[np.intp]], labels: list[str],
                latency: np.ndarray[Any, np.dtype[np.bool_]],
                idle: np.ndarray[Any, np.dtype[np.bool_]]) -> Labels:
    """What bounds each op: ``labels[which]``, an engine class replaced by the engine running it, 'latency'
    where the fixed overhead dominates, 'none' for an op without kernels (integer codes, kept as 1-byte ``Labels``)."""
    _, named, (distinct, remap) = _bound_table(t, tuple(labels))
    matrix_at, vector_at = len(labels), len(labels) + len(t.matrix_paths)
    special_at = vector_at + len(t.vector_paths)
    code = which.astype(np.intp)
    # in turn, as string replacement would: an engine named 'vector' that ran matrix work becomes the vector engine
    for is_cls, replacement in zip(named, (matrix_at + work.matrix_dtype, vector_at + work.vector_dtype,
                                           np.full(code.size, special_at)), strict=True):
        code = np.where(is_cls[code], replacement, code)
    code[latency] = special_at + 1
    code[idle] = special_at + 2
    return Labels(remap[code], distinct)  # Labels.from_codes(code, names), its coder kept


_BoundTable = tuple[list[str], tuple[np.ndarray[Any, np.dtype[np.bool_]], ...],
                    tuple[tuple[str, ...], np.ndarray[Any, Any]]]


def _bound_table(t: MachineTables, labels: tuple[str, ...]) -> _BoundTable:
    """The bound names of ``bound_names`` (labels, matrix paths' engines, vector paths', special, latency, none) and,
    for 'matrix', 'vector' and 'special' in turn, which of them bear that name, and ``Labels.coder`` of the names;
    kept per (tables, labels)."""
    def build(t: MachineTables) -> _BoundTable:
        names = [*labels, *(p.engine for p in t.matrix_paths), *(p.engine for p in t.vector_paths), t.special_engine,
                 "latency", "none"]
        named = tuple(np.array([name == cls for name in names]) for cls in ("matrix", "vector", "special"))
        return names, named, Labels.coder(names)

    return derived(t, "bound_table " + "|".join(labels), build)


def row_notes(t: MachineTables, work: Work, resident: np.ndarray[Any, np.dtype[np.bool_]],
              has_llc: bool) -> dict[int, list[str]]:
    """Each noted row's notes: its matrix path's note (matrix flops), else its vector path's (vector flops only),
    then the LLC's when its working set is resident. The notes of a row are set by one small integer (matrix
    note code, vector note code, resident flag), so the rows are coded with numpy and the dict is built from a
    table of the distinct codes' texts (one new list per row, as before; rows in the same order: matrix-noted,
    vector-noted, then resident only)."""
    matrix_texts = [p.note for p in t.matrix_paths]  # by dtype code
    vector_texts = [p.note for p in t.vector_paths]
    matrix_noted = derived(t, "matrix_noted", lambda t: np.array([bool(p.note) for p in t.matrix_paths])
                           )[work.matrix_dtype]  # only ops with a note
    vector_noted = derived(t, "vector_noted", lambda t: np.array([bool(p.note) for p in t.vector_paths])
                           )[work.vector_dtype]
    on_matrix = (work.flops_matrix > 0) & matrix_noted
    on_vector = (work.flops_matrix == 0) & (work.flops_vector > 0) & vector_noted
    llc_text = f"working set fits {t.llc.name}: served from it" if has_llc and t.llc is not None else None
    served = resident & (work.dram_bytes > 0) if llc_text is not None else np.zeros(work.n, dtype=bool)
    # code = (matrix code + 1 or 0) x (vectors + 1) x 2 + (vector code + 1 or 0) x 2 + resident
    stride = 2 * (len(vector_texts) + 1)
    code = (np.where(on_matrix, work.matrix_dtype + 1, 0) * stride + np.where(on_vector, work.vector_dtype + 1, 0) * 2
            + served)
    rows = np.flatnonzero(code)
    if rows.size == 0:
        return {}
    codes = code[rows]
    # the order the rows were added in before: matrix-noted rows, vector-noted rows, then the resident only
    group = np.where(codes >= stride, 0, np.where(codes >= 2, 1, 2)).astype(np.int8)
    if (group[1:] < group[:-1]).any():
        order = np.argsort(group, kind="stable")
        rows, codes = rows[order], codes[order]
    table: list[tuple[str, ...]] = [()] * (int(codes.max()) + 1)
    for c in np.flatnonzero(np.bincount(codes)).tolist():
        matrix, rest = divmod(c, stride)
        vector, llc = divmod(rest, 2)
        table[c] = (*((matrix_texts[matrix - 1],) if matrix else ()), *((vector_texts[vector - 1],) if vector else ()),
                    *((llc_text,) if llc and llc_text is not None else ()))
    # the collector would scan the heap again and again while the lists are made (3-5x their cost at 1M rows);
    # they hold strings only (no cycle), so it waits until they are built
    collecting = gc.isenabled()
    gc.disable()
    try:
        return dict(zip(rows.tolist(), map(list, map(table.__getitem__, codes.tolist())), strict=True))
    finally:
        if collecting:
            gc.enable()
