"""Softmax as PyTorch's CUDA/ROCm kernels run it: passes over the row, block size, fp32 work per element, and the
block kernel's re-reads served by the L2 where the resident blocks' rows fit (docs/model.md, "Softmax passes")."""

from __future__ import annotations

import numpy as np
import pytest

from perfmodel.dtypes import DType
from perfmodel.machine import tables
from perfmodel.ops.base import DTYPE_INDEX
from perfmodel.ops.norm import PERSISTENT_SOFTMAX_MAX_COLS, Softmax
from perfmodel.roofline import reread_hit_share
from perfmodel.specs import load_hardware

A100 = "nvidia-a100-sxm4-80gb"  # 108 SMs, 40 MiB L2
MI210 = "amd-mi210"  # 104 CUs, 8 MiB L2


def _work(rows: int, cols: int, dtype: str = "fp16") -> Softmax:
    return Softmax(shape=(rows, cols), dtype=DType(dtype))


def test_passes_by_row_length() -> None:
    # x read once by the persistent warp softmax (<= 1024 columns), three times by the block softmax beyond
    for cols, reads in ((256, 1.0), (PERSISTENT_SOFTMAX_MAX_COLS, 1.0), (PERSISTENT_SOFTMAX_MAX_COLS + 8, 3.0),
                        (4096, 3.0), (32768, 3.0)):
        op = _work(4096, cols)
        work = Softmax.work([op])
        tensor = 4096 * cols * 2
        assert work.bytes_by_role["activations_in"][0] == pytest.approx(reads * tensor)
        assert work.bytes_by_role["activations_out"][0] == pytest.approx(tensor)
        assert work.reread_bytes[0] == pytest.approx((reads - 1.0) * tensor)


def test_fp32_work_per_element() -> None:
    # persistent: 17 fp32 slots (34 FLOPs) and 3 transcendental ops (2 exp2 of expf, 1 reciprocal) per element;
    # block: exp twice, 28 slots (56 FLOPs) and 5 ops; both counted against the fp32 vector peak
    work = Softmax.work([_work(4096, 1024), _work(4096, 4096), _work(64, 4096, "fp64")])
    elements = np.array([4096 * 1024, 4096 * 4096, 64 * 4096])
    assert list(work.flops_vector / elements) == pytest.approx([34.0, 56.0, 56.0])
    assert list(work.flops_special / elements) == pytest.approx([3.0, 5.0, 5.0])
    assert list(work.vector_dtype) == [DTYPE_INDEX[DType.FP32], DTYPE_INDEX[DType.FP32], DTYPE_INDEX[DType.FP64]]


def test_block_threads_follow_pytorch() -> None:
    # SoftMax_getBlockSize: power of two >= min(cols / ILP, 1024) / 2, ILP = 16 B / element
    cols = [2048, 4096, 8192, 32768, 4096, 1280]
    dtypes = ["fp16", "fp16", "fp16", "fp16", "fp32", "fp32"]
    work = Softmax.work([_work(64, c, d) for c, d in zip(cols, dtypes, strict=True)])
    assert list(work.reread_block_threads) == [128.0, 256.0, 512.0, 512.0, 512.0, 256.0]
    assert Softmax.work([_work(64, 1024)]).reread_block_threads[0] == 0.0  # persistent kernel: no re-reads


def _share(hw: str, rows: int, cols: int) -> float:
    t = tables(load_hardware(hw))
    llc = load_hardware(hw).level_capacity_bytes(t.llc)
    return float(reread_hit_share(Softmax.work([_work(rows, cols)]), t, llc)[0])


def test_rereads_hit_the_l2_where_the_resident_rows_fit() -> None:
    # 4096 fp16 columns, 256-thread blocks, 8 a unit: the A100 holds 864 blocks x 16 KiB (row + output) = 14.2 MB
    # within half its 40 MiB L2; the MI210's 832 x 16 KiB = 13.6 MB against half of 8 MiB keeps 4.19 / 13.63
    assert _share(A100, 4096, 4096) == pytest.approx(1.0)
    assert _share(MI210, 4096, 4096) == pytest.approx(0.5 * 8388608 / (832 * 2 * 4096 * 2), rel=1e-9)
    # 64 KiB rows: 512-thread blocks, 4 a unit: 432 x 128 KiB = 56.6 MB on the A100
    assert _share(A100, 4096, 32768) == pytest.approx(0.5 * 41943040 / (432 * 2 * 32768 * 2), rel=1e-9)
    # fewer rows than resident blocks: only the rows held (64 x 16 KiB fit the MI210's half L2)
    assert _share(MI210, 64, 4096) == pytest.approx(1.0)
    # the persistent kernel re-reads nothing
    assert _share(A100, 4096, 1024) == 0.0
