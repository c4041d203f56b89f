"""Batch prediction from columns and dicts gives predict_many's answers and make_op's errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.columnar import predict_columns, predict_dicts
from perfmodel.ops import OpError, make_op

DEVICES = ["nvidia-h100-sxm5-80gb", "google-tpu-v5p", "generic-npu", "intel-xeon-platinum-8480"]
OPS: list[dict[str, Any]] = [
    {"kind": "matmul", "m": 4096, "n": 1024, "k": 512, "dtype": "bf16"},
    {"kind": "matmul", "m": 7, "n": 9, "k": 11, "dtype": "int8", "compute_dtype": "fp16", "pass": "backward"},
    {"kind": "matmul", "m": 64, "n": 128, "k": 256, "dtype": "fp16", "weight_dtype": "int4", "bias": True,
     "b_batched": False, "batch": 3, "out_dtype": "fp32", "pass": "forward_backward"},
    {"kind": "rmsnorm", "shape": [1, 4096], "dtype": "bf16"},
    {"kind": "layernorm", "shape": [8, 512, 1024], "dtype": "fp32", "vector_width": 1, "pass": "backward"},
    {"kind": "batchnorm", "shape": [32, 56, 56, 64], "dtype": "fp16", "training": True},
    {"kind": "softmax", "shape": [2048, 2048], "dtype": "float16"},
    {"kind": "elementwise", "shape": [1024, 4096], "inputs": 2, "dtype": "bf16"},
    {"kind": "allreduce", "bytes": 1e6, "devices": 8},
]
FIELDS = ("time_s", "overhead_s", "utilization", "compulsory_bytes", "uncalibrated_interval_s")


def _same(a: perfmodel.CostBatch, b: perfmodel.CostBatch) -> None:
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.bound.tolist() == b.bound.tolist()
    assert a.notes == b.notes
    assert [c.to_dict() for c in a] == [c.to_dict() for c in b]


@pytest.mark.parametrize("device", DEVICES)
def test_dicts_give_predict_many(device: str) -> None:
    ops = OPS * 3  # repeated dicts are predicted once; Op objects take predict_many's per-op path
    _same(predict_dicts(device, ops), perfmodel.predict_many(device, [make_op(d) for d in ops]))
    _same(perfmodel.predict_many(device, ops), perfmodel.predict_many(device, [make_op(d) for d in ops]))


@pytest.mark.parametrize("device", DEVICES)
def test_columns_give_predict_many(device: str) -> None:
    rng = np.random.default_rng(1)
    n = 200
    kinds = rng.choice(["matmul", "rmsnorm", "softmax", "allreduce"], n)
    m, k = rng.integers(1, 9000, n), rng.integers(1, 9000, n)
    dtypes = rng.choice(["bf16", "fp16", "fp32", "fp8_e4m3"], n)
    columns = {"kind": kinds, "m": m, "n": m[::-1], "k": k, "dtype": dtypes, "shape": np.stack([k, m], axis=1),
               "bytes": np.full(n, 1e6), "devices": np.full(n, 8)}
    dicts: list[dict[str, Any]] = []
    for i in range(n):
        if kinds[i] == "matmul":
            dicts.append({"kind": "matmul", "m": int(m[i]), "n": int(m[::-1][i]), "k": int(k[i]),
                          "dtype": str(dtypes[i])})
        elif kinds[i] == "allreduce":
            dicts.append({"kind": "allreduce", "bytes": 1e6, "devices": 8, "dtype": str(dtypes[i])})
        else:
            dicts.append({"kind": str(kinds[i]), "shape": [int(k[i]), int(m[i])], "dtype": str(dtypes[i])})
    _same(predict_columns(device, columns), perfmodel.predict_many(device, dicts))


@pytest.mark.parametrize("bad", [
    {"kind": "matmul", "m": 0, "n": 4, "k": 4, "dtype": "bf16"},
    {"kind": "matmul", "m": 4, "n": 4, "k": 4, "dtype": "bf17"},
    {"kind": "matmul", "m": 4, "n": 4, "k": 4, "dtype": "bf16", "pass": "sideways"},
    {"kind": "matmul", "m": 4, "n": 4, "dtype": "bf16"},
    {"kind": "matmul", "m": 4, "n": 4, "k": 4, "dtype": "bf16", "colour": "red"},
    {"kind": "rmsnorm", "shape": [4, -1], "dtype": "bf16"},
    {"kind": "reshuffle", "shape": [4], "dtype": "bf16"},
])
def test_a_bad_dict_raises_make_ops_error(bad: dict[str, Any]) -> None:
    with pytest.raises(OpError) as expected:
        make_op(bad)
    with pytest.raises(OpError) as got:
        predict_dicts("nvidia-h100-sxm5-80gb", [*OPS, bad])
    assert str(got.value) == str(expected.value)


def test_a_bad_column_names_the_field() -> None:
    base = {"kind": np.array(["matmul"] * 3), "m": np.array([4, 0, 4]), "n": np.array([4, 4, 4]),
            "k": np.array([4, 4, 4]), "dtype": np.array(["bf16"] * 3)}
    with pytest.raises(OpError, match="field 'm': must be > 0, got 0"):
        predict_columns("nvidia-h100-sxm5-80gb", base)
    with pytest.raises(OpError, match="field 'k': missing required field"):
        predict_columns("nvidia-h100-sxm5-80gb", {k: v for k, v in base.items() if k != "k"})
    with pytest.raises(OpError, match=r"field 'm': expected an integer, got 4\.5"):
        predict_columns("nvidia-h100-sxm5-80gb", {**base, "m": np.array([4, 4.5, 4])})
    with pytest.raises(OpError, match="unknown op kind"):
        predict_columns("nvidia-h100-sxm5-80gb", {**base, "kind": np.array(["matmul", "mtamul", "matmul"])})
