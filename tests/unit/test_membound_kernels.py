"""Memory-bound kernels as PyTorch runs them: small index_select, long softmax rows (docs/model.md)."""

from __future__ import annotations

import perfmodel
from perfmodel.machine import tables
from perfmodel.ops.indexing import SMALL_INDEX_MAX_ROWS
from perfmodel.ops.norm import PERSISTENT_SOFTMAX_MAX_COLS
from perfmodel.roofline import resolve_hardware

HW = "nvidia-a100-sxm4-80gb"


def _embedding_s(rows: int) -> float:
    op = {"kind": "embedding", "num_embeddings": 50_000, "embedding_dim": 4096, "num_indices": rows, "dtype": "fp16"}
    return float(perfmodel.predict_many(HW, [op]).time_s[0])


def test_small_gather_pays_one_round_trip_per_row() -> None:
    t = tables(resolve_hardware(HW))
    latency_s = t.latency_s(t.dram)
    # 8 more rows in the serial loop: 8 more round trips
    assert abs(_embedding_s(16) - _embedding_s(8) - 8 * latency_s) < 0.05 * 8 * latency_s


def test_large_gather_is_not_serial() -> None:
    # past the threshold the parallel kernel runs: more rows take less time than the serial 16
    assert _embedding_s(SMALL_INDEX_MAX_ROWS + 8) < _embedding_s(SMALL_INDEX_MAX_ROWS)


def _softmax_s(cols: int) -> float:
    op = {"kind": "softmax", "shape": [(1 << 24) // cols, cols], "dtype": "fp16"}
    return float(perfmodel.predict_many(HW, [op]).time_s[0])


def test_long_softmax_rows_read_x_three_times() -> None:
    # same bytes (32 MiB of x): the block softmax's three reads + one write against one read + one write
    ratio = _softmax_s(4 * PERSISTENT_SOFTMAX_MAX_COLS) / _softmax_s(PERSISTENT_SOFTMAX_MAX_COLS)
    assert 1.6 < ratio < 2.2
