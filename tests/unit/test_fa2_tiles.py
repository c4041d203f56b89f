"""FlashAttention-2's own tiles (perfmodel/search/fa2_tiles.py) and the fourteenth-pass fa15 experiments, all off by
default: the tile table as the launch templates state it, and that each switch changes what it says and nothing
else."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from perfmodel.dtypes import DType
from perfmodel.ops.attention import Attention
from perfmodel.roofline import predict, predict_many
from perfmodel.search import call_memo
from perfmodel.specs import load_hardware
from perfmodel.training.attention_kernel import fa2_device

ft = importlib.import_module("perfmodel.search.fa2_tiles")  # ``perfmodel.search`` is also a function's name

KB = 1024.0
A100, H100, SM86 = 164 * KB, 228 * KB, 100 * KB  # shared memory per SM (CUDA C++ Programming Guide)


@pytest.fixture
def switches() -> Iterator[None]:
    """Restore the switches (and forget memoised calls) whatever a test sets."""
    saved = ft.LIBRARY_TILES, ft.FORWARD_OVERLAP, ft.MMA_SYNC_SHARE
    call_memo.clear()
    yield
    ft.LIBRARY_TILES, ft.FORWARD_OVERLAP, ft.MMA_SYNC_SHARE = saved
    call_memo.clear()


def test_every_experiment_is_off_by_default() -> None:
    assert ft.LIBRARY_TILES is False and ft.FORWARD_OVERLAP is False and ft.MMA_SYNC_SHARE is None


@pytest.mark.parametrize(("d", "causal", "smem", "tile"), [
    (64, 0, H100, (128, 128, 4)), (128, 0, H100, (128, 64, 4)), (128, 1, A100, (128, 64, 4)),
    (128, 0, SM86, (128, 32, 4)), (128, 1, SM86, (64, 64, 4)), (96, 1, SM86, (64, 64, 4)),
    (96, 0, A100, (128, 64, 4)), (160, 0, H100, (128, 64, 8)), (256, 1, A100, (128, 64, 8)),
    (256, 1, H100, (64, 64, 4)), (256, 0, SM86, (64, 64, 4)), (40, 0, H100, (128, 128, 4)),
])
def test_forward_tiles_follow_the_launch_template(d: int, causal: int, smem: float, tile: tuple[int, int, int]) -> None:
    """run_mha_fwd_hdim*: d 256 runs 128 x 64 with 8 warps only where a block may take 128 KB and an SM holds less
    than 192 KB (A100), else 64 x 64 (two CTAs per H100 SM); sm86 / sm89 (100 KB) take 64 x 64 causal, 128 x 32
    otherwise at d 128; head dims round up to the next compiled one (40 -> 64, 160 -> 192)."""
    bq, bkv, warps = ft.forward_tiles(np.array([d], float), np.array([causal], float), smem)
    assert (bq[0], bkv[0], warps[0]) == tile


@pytest.mark.parametrize(("d", "smem", "tile"), [
    (32, SM86, (128, 128)), (64, H100, (128, 128)), (64, SM86, (64, 128)), (96, A100, (64, 128)),
    (128, A100, (64, 128)), (128, SM86, (64, 64)), (192, H100, (64, 64)), (256, A100, (64, 64)), (256, SM86, (64, 32)),
])
def test_backward_tiles_follow_the_launch_template(d: int, smem: float, tile: tuple[int, int]) -> None:
    """run_mha_bwd_hdim*: 144 KB per block (A100 163 KB, H100 227 KB) decides d 64, 128 and 256."""
    bq, bkv = ft.backward_tiles(np.array([d], float), smem)
    assert (bq[0], bkv[0]) == tile


def test_allowed_picks_one_tile_per_op_and_split() -> None:
    """Forward rows: the forward tile unsplit, the split-KV kernel's 64-row tile split; backward rows: their tile,
    never split."""
    bq = np.array([[128.0, 128.0, 64.0, 64.0]])
    bkv = np.array([[64.0, 64.0, 128.0, 128.0]])
    split = np.array([[1.0, 4.0, 4.0, 1.0]])
    d, causal = np.array([[128.0], [128.0]]), np.array([[0.0], [0.0]])
    ok = ft.allowed(d, causal, np.array([[0.0], [1.0]]), H100, bq, bkv, split)
    assert ok.tolist() == [[True, False, True, False], [False, False, False, True]]


def _h100_fa2() -> Any:
    return fa2_device(load_hardware("nvidia-h100-sxm5-80gb"))


def test_library_tiles_restrict_the_fa2_forward(switches: None) -> None:
    """On the mma.sync device the search keeps FA2's 128 x 64 at d 128 (it chose 128 x 128 before); FA3 (wgmma)
    is untouched."""
    op = Attention(batch=2, heads=16, seq_q=8192, seq_kv=8192, head_dim=128, dtype=DType.BF16)
    h100 = load_hardware("nvidia-h100-sxm5-80gb")
    before, native = predict(_h100_fa2(), op), predict(h100, op)
    assert before.schedule is not None and before.schedule["tile_n"] == 128.0
    ft.LIBRARY_TILES = True
    call_memo.clear()
    after = predict(_h100_fa2(), op)
    assert after.schedule is not None and (after.schedule["tile_m"], after.schedule["tile_n"]) == (128.0, 64.0)
    assert after.time_s > before.time_s
    assert predict(h100, op).time_s == native.time_s


def test_forward_overlap_hides_part_of_the_fa2_softmax(switches: None) -> None:
    """FA3's exposed share (0.675) in place of the whole softmax: the A100's FA2 forward gets faster, its backward
    (barriers between the phases of one CTA) does not move."""
    a100 = load_hardware("nvidia-a100-sxm4-80gb")
    ops = [Attention(batch=1, heads=16, seq_q=16384, seq_kv=16384, head_dim=128, dtype=DType.BF16, pass_=p)
           for p in ("forward", "backward")]
    before = [c.time_s for c in predict_many(a100, ops)]
    ft.FORWARD_OVERLAP = True
    call_memo.clear()
    after = [c.time_s for c in predict_many(a100, ops)]
    assert after[0] < before[0] * 0.9
    assert after[1] == before[1]


def test_mma_sync_share_scales_only_an_asynchronous_mma_device(switches: None) -> None:
    """The H100's FA2 device gets the share of its wgmma peak; an A100 (mma.sync already) keeps its own."""
    h100 = load_hardware("nvidia-h100-sxm5-80gb")
    peak = next(e for e in h100.engines if e.mma_scope).peak_flops_per_s[DType.BF16]
    ft.MMA_SYNC_SHARE = 0.5
    variant = fa2_device(h100)
    engine = next(e for e in variant.engines if e.mma_scope)
    assert engine.mma_scope == "warp" and engine.peak_flops_per_s[DType.BF16] == pytest.approx(0.5 * peak)
    a100 = load_hardware("nvidia-a100-sxm4-80gb")
    engines: list[dict[str, Any]] = a100.model_dump(mode="json")["engines"]
    before = [dict(e) for e in engines]
    ft.mma_sync_engines(engines)
    assert [e.get("peak_flops_per_s") for e in engines] == [e.get("peak_flops_per_s") for e in before]
