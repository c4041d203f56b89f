"""predict_many of JSON dicts over ``DICT_CHUNK_ROWS`` rows is predicted chunk by chunk
(``columnar._predict_part_chunks``, issue 27's <= 300 B per op) and gives the one-piece answers bit for bit:
every array, the notes, the ops; chunks that do not stack fall back to the one piece."""

from __future__ import annotations

from typing import Any

import pytest

from perfmodel import columnar, predict_many
from perfmodel.ops import make_op, op_class
from perfmodel.ops.columns import from_dicts
from tests.benchmark_module import load_benchmark
from tests.unit.test_columnar_chunks import _identical

speed = load_benchmark("predict_speed", "predict_speed_for_dict_chunks")


def _dicts(n: int, seed: int) -> list[dict[str, Any]]:
    """The benchmark's mix (eight kinds) with no two dicts alike: every row predicted, nothing merged."""
    mix: list[dict[str, Any]] = speed._distinct_mix(speed.mixed_ops(n, seed))
    return mix


@pytest.mark.parametrize("device", ["nvidia-h100-sxm5-80gb", "amd-mi300x", "google-tpu-v5p", "generic-npu"])
def test_dict_chunks_give_the_one_piece_answers(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    dicts = _dicts(700, seed=len(device))
    if device == "google-tpu-v5p":  # no fp8 on a TPU: those rows would fail the whole batch either way
        dicts = [d for d in dicts if d.get("dtype") != "fp8_e4m3"]
    whole = predict_many(device, dicts)
    calls: list[int] = []
    predict = columnar._predict

    def spy(hardware: Any, parts: Any, n: int, *args: Any) -> Any:
        calls.append(n)
        return predict(hardware, parts, n, *args)

    monkeypatch.setattr(columnar, "_predict", spy)
    monkeypatch.setattr(columnar, "DICT_CHUNK_ROWS", 128)  # six chunks, the last one short
    chunked = predict_many(device, dicts)
    assert len(calls) == -(-len(dicts) // 128) and max(calls) == 128 and sum(calls) == len(dicts)
    _identical(chunked, whole)


def test_dict_chunks_that_do_not_stack_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk of matmuls alone, then one of attentions alone (other schedule keys): the whole batch in one piece."""
    dicts: list[dict[str, Any]] = [{"kind": "matmul", "m": 16 + i, "n": 512, "k": 512, "dtype": "bf16"}
                                   for i in range(128)]
    dicts += [{"kind": "attention", "batch": 1, "heads": 32, "kv_heads": 8, "seq_q": 128 + i, "seq_kv": 2048,
               "head_dim": 128, "causal": True, "dtype": "bf16"} for i in range(128)]
    whole = predict_many("nvidia-h100-sxm5-80gb", dicts)
    answers: list[object] = []
    chunks = columnar._predict_part_chunks

    def spy(*args: Any) -> Any:
        answers.append(chunks(*args))
        return answers[-1]

    monkeypatch.setattr(columnar, "_predict_part_chunks", spy)
    monkeypatch.setattr(columnar, "DICT_CHUNK_ROWS", 128)
    _identical(predict_many("nvidia-h100-sxm5-80gb", dicts), whole)
    assert answers == [None]


@pytest.mark.parametrize("device", ["nvidia-h100-sxm5-80gb", "google-tpu-v5p"])
def test_fields_no_dict_gives_are_views_with_the_row_by_row_answers(device: str) -> None:
    """A field no dict of a kind gives is its default seen n times (no bytes per row), and the batch is the one of
    ``make_op``'s ``Op`` objects to the last bit."""
    dicts = [d for d in _dicts(600, seed=3) if device != "google-tpu-v5p" or d.get("dtype") != "fp8_e4m3"]
    matmuls = [d for d in dicts if d["kind"] == "matmul"]
    read = from_dicts(op_class("matmul"), matmuls)
    given = {key for d in matmuls for key in d} - {"kind"}
    assert given == {"m", "n", "k", "dtype"}
    for name, values in read.values.items():
        viewed = values.strides[0] == 0 and not values.flags.writeable
        assert viewed == (name not in given), name
    _identical(predict_many(device, dicts), predict_many(device, [make_op(d) for d in dicts]))
