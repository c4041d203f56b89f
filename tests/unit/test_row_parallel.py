"""Elementwise kernels that run one thread block per row (vLLM's activations): their loads in flight."""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel.ops import OpError, make_op
from perfmodel.ops.elementwise import Elementwise

A100 = "nvidia-a100-sxm4-80gb"


def _silu_and_mul(tokens: int, **extra: object) -> dict[str, object]:
    return {"kind": "elementwise", "shape": [tokens, 14336], "inputs": 2, "outputs": 1, "dtype": "fp16",
            "vector_width": 1, **extra}


def test_one_block_per_row_sets_threads_blocks_and_bytes_per_access() -> None:
    rowwise = make_op(_silu_and_mul(3, threads_per_row=1024))
    stream = make_op(_silu_and_mul(3))
    assert isinstance(rowwise, Elementwise) and isinstance(stream, Elementwise)
    work = Elementwise.work([rowwise, stream])
    assert list(work.threads) == [3 * 1024, 3 * 14336]  # capped per row; one per element otherwise
    assert work.parallel_items[0] == 3  # one block per row
    assert work.bytes_per_thread[0] == 1 * 2 * 3  # one fp16 access of each of 3 tensors in flight
    assert work.bytes_per_thread[1] == pytest.approx(3 * 14336 * 2 * 3 / (3 * 14336))
    assert rowwise.bytes == stream.bytes and rowwise.flops == stream.flops  # same work, other geometry


def test_few_rows_are_latency_bound_and_many_rows_reach_the_stream() -> None:
    few = perfmodel.predict_many(A100, [_silu_and_mul(1, threads_per_row=1024), _silu_and_mul(1)]).time_s
    assert few[0] > 2.0 * few[1]  # 1,024 threads with one load each cannot fill the DRAM pipe
    many = perfmodel.predict_many(A100, [_silu_and_mul(8192, threads_per_row=1024), _silu_and_mul(8192)]).time_s
    assert many[0] == pytest.approx(many[1], rel=0.05)  # 8,192 blocks keep as many loads in flight as needed


@pytest.mark.parametrize("bad", [0, -4])
def test_threads_per_row_must_be_positive(bad: int) -> None:
    with pytest.raises(OpError, match="threads_per_row"):
        make_op(_silu_and_mul(2, threads_per_row=bad))
