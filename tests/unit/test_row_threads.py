"""Row ops name the threads of the block that handles a row (``threads_per_row``): PyTorch's vectorized layer
norm runs a 32 x 4 block (aten/src/ATen/native/cuda/layer_norm_kernel.cu), vLLM's rms_norm up to 1024 threads.
Fewer threads keep fewer loads in flight (Little's law), so a short batch of rows is slower."""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel.ops import OpError, make_op, norm
from perfmodel.ops.norm import LayerNorm

A100 = "nvidia-a100-sxm4-80gb"


def test_threads_are_rows_times_the_smaller_of_the_block_and_the_row_accesses() -> None:
    ops = [make_op({"kind": "layernorm", "shape": [16, 2560], "dtype": "fp16", "threads_per_row": 128}),
           make_op({"kind": "layernorm", "shape": [16, 2560], "dtype": "fp16"}),
           make_op({"kind": "layernorm", "shape": [16, 256], "dtype": "fp16", "threads_per_row": 128})]
    work = LayerNorm.work(ops)  # type: ignore[arg-type]
    assert work.threads.tolist() == [16 * 128, 16 * 640, 16 * 64]  # 2560 / 4 = 640 accesses; 256 / 4 = 64


def test_a_128_thread_block_per_row_is_latency_bound_on_a_short_batch() -> None:
    """16 rows of 2560 fp16 (164 kB): 2,048 threads x 16 B in flight against 10,240 with 640 threads a row; the
    stream after the first round trip takes 5x as many round trips, so the narrow block is slower."""
    narrow = perfmodel.predict(A100, {"kind": "layernorm", "shape": [16, 2560], "dtype": "fp16",
                                      "threads_per_row": 128})
    wide = perfmodel.predict(A100, {"kind": "layernorm", "shape": [16, 2560], "dtype": "fp16"})
    assert narrow.time_s > wide.time_s
    # large batches fill the GPU either way: the same stream within a few per cent (the 128-thread block, PyTorch's
    # kernel, also pays its Welford update between its loads: tests/unit/test_layernorm_welford.py)
    big = {"kind": "layernorm", "shape": [8192, 2560], "dtype": "fp16"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(norm, "LAYER_NORM_WELFORD_BETWEEN_LOADS", False)
        assert perfmodel.predict(A100, {**big, "threads_per_row": 128}).time_s == pytest.approx(
            perfmodel.predict(A100, big).time_s, rel=0.05)


def test_threads_per_row_must_be_positive() -> None:
    with pytest.raises(OpError):
        make_op({"kind": "rmsnorm", "shape": [4, 4096], "dtype": "fp16", "threads_per_row": 0})
