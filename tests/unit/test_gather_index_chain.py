"""indexSelectLargeIndex's index -> row chain: a cold index sector (a DRAM round trip) before each iteration's row
loads, its round trips at the first-byte latency, unlifted (docs/model.md section 3)."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel.ops import make_op
from perfmodel.ops.indexing import SMALL_INDEX_MAX_ROWS

A100 = "nvidia-a100-sxm4-80gb"


def embedding(rows: int, dim: int, indices: int, index_dtype: str = "int64") -> dict[str, object]:
    return {"kind": "embedding", "num_embeddings": rows, "embedding_dim": dim, "num_indices": indices,
            "dtype": "fp16", "index_dtype": index_dtype}


def test_the_a100_embedding_is_two_round_trips_an_iteration() -> None:
    # 4,096 x 4,096 fp16, 4,096 int64 indices on the A100: 108 SMs x 1,024 threads (8 blocks of 128) = 110,592
    # elements in flight, 4 B each (read + write); one 32 B sector of int64 indices covers 4 rows = 16,384 elements,
    # so every iteration needs a cold sector: 2 round trips of 2 x 0.341 us (gpu-benches ramp x dram_latency_scale)
    first_byte_s = 2 * 0.341e-6
    in_flight_b = 108 * 1024 * 4
    dram_b = 4096 * 4096 * 2 * 2 + 4096 * 8
    expected_s = 2e-6 + 2 * first_byte_s + (dram_b - in_flight_b) / (in_flight_b / (2 * first_byte_s))
    got = perfmodel.predict_many(A100, [embedding(4096, 4096, 4096)]).time_s[0]
    assert got == pytest.approx(expected_s, rel=1e-9)
    assert 200e-6 < got < 215e-6  # Vidur measured 201 and 206 us (a100, Llama-2-7B at TP 8)


def test_the_chain_is_on_large_index_gathers_only() -> None:
    small, large = make_op(embedding(32000, 4096, SMALL_INDEX_MAX_ROWS)), make_op(embedding(32000, 4096, 17))
    w = type(large).work([small, large], 32.0)
    assert w.index_sector_elements.tolist() == [0.0, 4 * 4096.0]
    scatter = make_op({"kind": "scatter", "table_shape": [32000, 4096], "num_indices": 4096, "dtype": "fp16"})
    assert not type(scatter).work([scatter], 32.0).index_sector_elements.any()


def test_a_sector_covering_more_than_the_grid_is_cold_in_part() -> None:
    # rows so wide that one sector's indices cover more elements than the grid has in flight: a cold sector every
    # few iterations, so the same bytes take less time than with narrow rows (every iteration cold)
    wide = embedding(1024, 1 << 18, 64)  # 4 x 262,144 elements a sector > 110,592 in flight
    narrow = embedding(1024, 4096, 4096)  # the same 32 MiB of rows
    t = perfmodel.predict_many(A100, [wide, narrow]).time_s
    assert t[0] < 0.75 * t[1]


def test_int32_indices_share_a_sector_among_more_rows() -> None:
    # 8 int32 indices a sector: with 16,384-column rows, 8 x 16,384 > 110,592 elements in flight, so not every
    # iteration waits on a cold sector (int64: 4 x 16,384 < 110,592, every one does)
    t = perfmodel.predict_many(A100, [embedding(8192, 16384, 4096, "int64"),
                                      embedding(8192, 16384, 4096, "int32")]).time_s
    assert t[1] < 0.95 * t[0]
    np.testing.assert_array_less(0.0, t)


def test_cpus_and_tpus_have_no_chain() -> None:
    # CPUs and TPUs run other gathers: their time is the stream's (no index sector round trip); a small one, whose
    # time is its latency
    op = embedding(32000, 64, 32)
    for device in ("intel-xeon-platinum-8480", "google-tpu-v5p"):
        work = type(make_op(op)).work([make_op(op)], 32.0)
        work.index_sector_elements = np.zeros(1)
        plain = perfmodel.roofline.evaluate(work, [make_op(op)], perfmodel.specs.load_hardware(device))
        assert perfmodel.predict_many(device, [op]).time_s[0] == pytest.approx(plain.time_s[0], rel=1e-12)
