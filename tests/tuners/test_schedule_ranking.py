"""rank_schedules: explicit schedules costed by the search engine's functions, ranked, with reasons."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.dtypes import DType
from perfmodel.hardware import Hardware
from perfmodel.machine import tables
from perfmodel.ops.base import DTYPES
from perfmodel.search.engine import search
from perfmodel.specs import library
from perfmodel.tuners.candidates import ScheduleError
from perfmodel.tuners.ranking import rank_schedules

H100 = "nvidia-h100-sxm5-80gb"
GEMM = {"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}
ATTENTION = {"kind": "attention", "batch": 4, "heads": 32, "kv_heads": 8, "seq_q": 2048, "seq_kv": 2048,
             "head_dim": 128, "causal": True, "dtype": "bf16"}


def h100() -> Hardware:
    return library()[H100]


def test_the_search_engines_best_schedule_ranks_first_with_the_same_time() -> None:
    best = search(H100, GEMM, top_k=3).top_k
    rows = [*best[1:], best[0]]  # the winner last: the ranking must find it
    cols = {name: [r[key] for r in rows] for name, key in (("tile_m", "tile_m"), ("tile_n", "tile_n"),
                                                           ("tile_k", "tile_k"), ("stages", "stages"),
                                                           ("split_k", "split_k"), ("group_m", "raster_group"))}
    ranking = rank_schedules(H100, GEMM, cols)
    assert ranking.time_s[-1] == pytest.approx(best[0]["time_s"], rel=1e-12)
    assert ranking.time_s[ranking.order[0]] == ranking.time_s[-1]  # nothing ranks faster than the search's best
    assert sorted(ranking.rank.tolist()) == [1, 2, 3]
    assert ranking.family == "gemm" and ranking.problem["k"] == 4096 and ranking.model_version


def test_bad_candidates_get_their_own_reason_and_no_rank() -> None:
    cols: dict[str, list[float]] = {"tile_m": [128, 0, 512, 128, 96, 128], "tile_n": [128, 128, 512, 128, 128, 128],
            "tile_k": [64, 64, 128, 64, 64, 1.5], "stages": [3, 3, 5, 3, 3, 3], "split_k": [1, 1, 1, 16, 1, 1]}
    op = {"kind": "matmul", "m": 4096, "n": 4096, "k": 256, "dtype": "bf16"}
    r = rank_schedules(H100, op, cols)
    assert r.rank.tolist() == [1, 0, 0, 0, 0, 0]
    assert np.isinf(r.time_s[1:]).all()
    assert "tile_m must be a positive integer (got 0)" in r.reasons[1]
    assert "exceeds" in r.reasons[2] and "SMEM" in r.reasons[2]  # (512+512)·128·2 B·5 stages > 228 KiB
    assert "split_k 16" in r.reasons[3] and "shorter than one 64-element K-step" in r.reasons[3]
    assert "not a multiple" in r.reasons[4]  # 96 is not a multiple of the H100's MMA M
    assert "tile_k must be a positive integer (got 1.5)" in r.reasons[5]
    assert r.reasons[0].startswith("bound by") and "1x the best" in r.reasons[0]


def test_warps_bound_threads_registers_and_occupancy() -> None:
    hw = h100()
    cols = {"tile_m": [128, 256, 64, 64], "tile_n": [128, 128, 64, 64], "tile_k": [32, 32, 32, 32],
            "stages": [2, 2, 2, 2], "warps": [1, 64, 1, 32]}
    r = rank_schedules(hw, GEMM, cols)
    # 128x128 fp32 accumulators over 1 warp = 512 registers per thread > 255: spills
    assert r.rank[0] == 0 and "512 registers per thread" in r.reasons[0] and "spill" in r.reasons[0]
    assert r.rank[1] == 0 and "2048 threads" in r.reasons[1]
    # 32 warps = 1024 threads: two such CTAs fill an SM's 2048 threads, one warp leaves room for more
    assert r.resident[3] == 2.0 and r.resident[2] > 2.0


def test_ties_keep_the_input_order_and_repeat_exactly() -> None:
    cols = {"tile_m": [128, 64, 128, 128], "tile_n": [128, 64, 128, 128], "tile_k": [64, 64, 64, 64]}
    first = rank_schedules(H100, GEMM, cols)
    again = rank_schedules(H100, GEMM, cols)
    assert first.rank.tolist() == again.rank.tolist() and first.reasons == again.reasons
    tied = [i for i in (0, 2, 3)]
    assert first.time_s[0] == first.time_s[2] == first.time_s[3]
    assert [int(first.rank[i]) for i in tied] == sorted(int(first.rank[i]) for i in tied)


def test_attention_schedules_rank_with_footprint_reasons() -> None:
    r = rank_schedules(H100, ATTENTION, {"tile_q": [128, 64, 256], "tile_kv": [128, 64, 256],
                                         "stages": [2, 2, 3]})
    assert r.family == "attention" and r.problem["head_dim"] == 128
    assert r.rank[:2].tolist() in ([1, 2], [2, 1]) and r.rank[2] == 0
    assert "exceeds" in r.reasons[2]  # (256·128 + 3·256·256)·2 B > 228 KiB


@pytest.mark.parametrize("cols, field", [
    ({"tile_m": [128], "tile_n": [128]}, "candidates.tile_k"),
    ({"tile_m": [128], "tile_n": [128], "tile_k": [64], "tile_x": [1]}, "candidates.tile_x"),
    ({"tile_m": [128, 64], "tile_n": [128], "tile_k": [64, 64]}, "candidates.tile_n"),
    ({"tile_m": [], "tile_n": [], "tile_k": []}, "candidates"),
    ({"tile_m": ["big"], "tile_n": [128], "tile_k": [64]}, "candidates.tile_m"),
])
def test_malformed_requests_name_the_field(cols: dict[str, list[object]], field: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        rank_schedules(H100, GEMM, cols)  # type: ignore[arg-type]
    assert caught.value.field_name == field


def test_ops_without_a_tiling_and_bad_ops_are_refused() -> None:
    with pytest.raises(ScheduleError, match="no tiled schedule") as caught:
        rank_schedules(H100, {"kind": "layernorm", "shape": [4096, 4096], "dtype": "bf16"}, {"tile_m": [1]})
    assert caught.value.field_name == "op.kind"
    with pytest.raises(ScheduleError) as bad:
        rank_schedules(H100, {"kind": "matmul", "m": -1, "n": 4, "k": 4}, {"tile_m": [1]})
    assert bad.value.field_name == "op"


TILES = st.sampled_from([16, 32, 64, 128, 256])


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 8192), n=st.integers(1, 8192), k=st.integers(1, 8192), bm=TILES, bn=TILES,
       bk=st.sampled_from([16, 32, 64, 128]), stages=st.integers(1, 5), split=st.sampled_from([1, 2, 4]))
def test_a_ranked_time_is_never_below_the_compute_or_dram_roof(m: int, n: int, k: int, bm: int, bn: int, bk: int,
                                                               stages: int, split: int) -> None:
    hw = h100()
    r = rank_schedules(hw, {"kind": "matmul", "m": m, "n": n, "k": k, "dtype": "bf16"},
                       {"tile_m": [bm], "tile_n": [bn], "tile_k": [bk], "stages": [stages], "split_k": [split]})
    if r.rank[0] == 0:
        assert r.reasons[0] and np.isinf(r.time_s[0])
        return
    peak = float(tables(hw).matrix_peak[DTYPES.index(DType.BF16)])
    compulsory = 2.0 * (m * k + k * n + m * n)
    assert r.time_s[0] >= compulsory / tables(hw).bandwidth_bytes_per_s(hw.dram)
    assert r.time_s[0] >= 2.0 * m * n * k / peak
