"""Applying a calibration to many ops at once: the column versions of the per-op Python (class keys, shape numbers,
the trees' raw fields) give the per-op answers to the bit, and the compiled local correction and distance band give
numpy's answers up to round-off (docs/accuracy.md, eleventh pass calpred12)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from perfmodel.calibration import shape
from perfmodel.calibration.classes import class_codes, class_key
from perfmodel.calibration.distance import DistanceScale
from perfmodel.calibration.fields import field_matrix, op_fields
from perfmodel.calibration.local import LocalCorrection, _compiled_smooth
from perfmodel.ops import Op, make_op

OPS: list[dict[str, Any]] = [
    {"kind": "matmul", "m": 1, "n": 4096, "k": 4096, "dtype": "fp16"},
    {"kind": "matmul", "m": 333, "n": 8, "k": 17, "dtype": "bf16", "transpose_a": True, "pass": "backward"},
    {"kind": "matmul", "m": 64, "n": 64, "k": 64, "batch": 12, "dtype": "fp32"},
    {"kind": "conv2d", "batch": 2, "in_channels": 3, "out_channels": 64, "height": 224, "width": 223, "kernel_h": 7,
     "kernel_w": 5, "stride": 2, "stride_w": 3, "padding": 3, "padding_w": 1, "dtype": "fp16"},
    {"kind": "conv2d", "batch": 8, "in_channels": 64, "out_channels": 64, "height": 56, "width": 56, "kernel_h": 3,
     "kernel_w": 3, "padding": 1, "groups": 64, "dtype": "bf16"},
    {"kind": "attention", "batch": 4, "heads": 32, "kv_heads": 8, "seq_q": 1, "seq_kv": 8192, "head_dim": 128,
     "causal": True, "dtype": "bf16"},
    {"kind": "rmsnorm", "shape": [4096, 4096], "dtype": "fp16"},
    {"kind": "layernorm", "shape": [8, 32, 4095], "dtype": "fp32"},
    {"kind": "softmax", "shape": [7], "dtype": "fp16"},
    {"kind": "reduce", "shape": [64, 128], "op": "mean", "axes": [1], "dtype": "bf16"},
    {"kind": "elementwise", "shape": [1024, 4096], "inputs": 3, "transcendentals_per_element": 1.0, "dtype": "fp16"},
    {"kind": "elementwise", "shape": [3, 5], "inputs": 2, "dtype": "bf16"},
    {"kind": "embedding", "num_embeddings": 128256, "embedding_dim": 4096, "num_indices": 77, "dtype": "bf16"},
    {"kind": "gather", "table_shape": [1000, 64, 3], "num_indices": 5, "dtype": "fp16"},
    {"kind": "allreduce", "bytes": 1e8, "devices": 16, "dtype": "bf16"},
    {"kind": "allgather", "bytes": 4e6, "devices": 16, "devices_per_node": 16, "dtype": "fp16"},
    {"kind": "alltoall", "bytes": 1e6, "devices": 4, "dtype": "fp16"},
]


def _ops() -> list[Op]:
    """``OPS`` and variants of each (sizes grown, so that most ops differ), in a shuffled order."""
    out = []
    for grow in range(6):
        for d in OPS:
            d = dict(d)
            for key in ("m", "num_indices", "batch", "devices"):
                if key in d and key != "devices":
                    d[key] = d[key] + grow
                    break
            else:
                if "shape" in d:
                    d["shape"] = [d["shape"][0] + grow, *d["shape"][1:]]
            out.append(make_op(d))
    order = np.random.default_rng(0).permutation(len(out))
    return [out[int(i)] for i in order]


def _odd(op: Op, field: str, value: Any) -> Op:
    """``op`` with ``field`` set to ``value`` past its checks (a float where an int is expected)."""
    object.__setattr__(op, field, value)
    return op


def test_field_matrix_equals_op_fields_to_the_bit() -> None:
    ops = _ops()
    ops += [_odd(make_op(OPS[2]), "m", 64.0), _odd(make_op(OPS[11]), "inputs", True),
            _odd(make_op(OPS[6]), "shape", (4096, 4096.0))]  # 64 and 64.0, 2 and True: equal, converted apart
    fields = [*sorted({name for op in ops for name in op_fields(op)}), "matmul.nothing"]
    column = {name: j for j, name in enumerate(fields)}
    expected = np.full((len(ops), len(fields)), np.nan)
    for i, op in enumerate(ops):
        for name, value in op_fields(op).items():
            expected[i, column[name]] = value
    got = field_matrix(ops, fields)
    np.testing.assert_array_equal(got.view(np.int64), expected.view(np.int64))
    assert got[-3, column["matmul.m"]] == 64.0 and got[-2, column["elementwise.inputs"]] == 1.0
    assert np.isnan(got[-1, column["rmsnorm.shape.last"]])  # a shape with a float: no numbers, as op_fields
    some = fields[::3]
    np.testing.assert_array_equal(field_matrix(ops, some).view(np.int64),
                                  expected[:, [column[n] for n in some]].view(np.int64))


@pytest.mark.parametrize("per_node", [8, None, 4])
def test_class_codes_equal_class_key_per_op(per_node: int | None) -> None:
    ops = [*_ops(), _odd(make_op(OPS[11]), "inputs", 2.0)]  # formats as 2.0in1out: its own key
    names, code = class_codes(ops, per_node)
    expected, inverse = np.unique(np.array([class_key(op, per_node) for op in ops], dtype=str), return_inverse=True)
    assert names.tolist() == expected.tolist() and code.tolist() == inverse.reshape(-1).tolist()
    assert "elementwise/2.0in1out:bf16" in names.tolist()
    assert class_codes([], per_node)[0].size == 0


def test_shape_numbers_in_columns_equal_the_per_op_arithmetic() -> None:
    ops = _ops()
    got = shape.shape_matrix(ops)
    each = np.vstack([shape.shape_matrix([op]) for op in ops])
    np.testing.assert_array_equal(got.view(np.int64), each.view(np.int64))
    convs = [op for op in ops if op.kind == "conv2d"]
    out_h, out_w = shape._out_hw(convs)  # type: ignore[arg-type]
    assert out_h.tolist() == [float(c.out_h) for c in convs]  # type: ignore[attr-defined]
    assert out_w.tolist() == [float(c.out_w) for c in convs]  # type: ignore[attr-defined]
    for kind in ("rmsnorm", "layernorm", "softmax", "elementwise", "embedding", "gather", "reduce"):
        rows = [op for op in ops if op.kind == kind]
        row_len, count = shape._row_columns(rows)
        assert list(zip(row_len.tolist(), count.tolist(), strict=True)) == [shape._row_dims(op) for op in rows], kind
    odd = [_odd(make_op(OPS[6]), "shape", (4096, 4096.0)), make_op(OPS[6])]
    assert list(zip(*(a.tolist() for a in shape._row_columns(odd)), strict=True)) == [shape._row_dims(o) for o in odd]


def _correction(rng: np.random.Generator, points: int, bandwidth: float) -> LocalCorrection:
    x = np.column_stack([rng.uniform(3, 12, points), rng.uniform(3, 10, points), rng.normal(0, 1, (points, 8))])
    return LocalCorrection(x, rng.normal(0, 0.3, points), rng.integers(1, 5, points).astype(float), bandwidth, 0.3,
                           1.0, np.zeros(0))


def _features(rng: np.random.Generator, correction: LocalCorrection, rows: int) -> Any:
    """Rows near the correction's points (within a few bandwidths), and three far from all of them."""
    from perfmodel.calibration.curve import Features

    near = correction.points[rng.integers(0, len(correction.points), rows)]
    near = near + rng.normal(0, 1.5 * correction.bandwidth, near.shape)
    near[-3:-1, 0] = [-5.0, 30.0]
    near[-1, 0] = 60.0
    return Features(np.zeros(rows), np.ones(rows), np.full(rows, 0.5), near[:, 0], near[:, 1],
                    np.ones(rows, dtype=bool), near[:, 2:] / correction.shape_scale)


@pytest.mark.parametrize("bandwidth", [0.05, 0.1, 0.5])
def test_compiled_local_correction_equals_numpy_up_to_round_off(bandwidth: float,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``near_jit.smooth`` over the points within ``reach`` against numpy over every point, and against a direct
    sum over every point (what both approximate; numpy's |x|² + |p|² − 2 x·p cancels, and loses more)."""
    from perfmodel.search import gemm_kernel

    rng = np.random.default_rng(int(bandwidth * 100))
    correction = _correction(rng, 700, bandwidth)
    f = _features(rng, correction, 900)
    assert gemm_kernel.load() and _compiled_smooth(1) is not None
    compiled = correction.log_factor(f)
    monkeypatch.setenv("PERFMODEL_NO_JIT", "1")
    assert _compiled_smooth(1) is None
    reference = correction.log_factor(f)
    x = np.column_stack([f.log10_flops, f.log10_bytes, f.shape * correction.shape_scale])
    weight = np.exp(-0.5 / bandwidth ** 2 * ((x[:, None, :] - correction.points[None]) ** 2).sum(axis=2))
    weight *= correction.runs
    direct = weight @ correction.residuals / (correction.shrink + weight.sum(axis=1))
    np.testing.assert_allclose(compiled, direct, rtol=0, atol=1e-15)
    np.testing.assert_allclose(compiled, reference, rtol=0, atol=1e-11)
    assert compiled[-3:].tolist() == [0.0, 0.0, 0.0] and np.abs(compiled).max() > 0.05
    assert 0 < correction.reach < 12 * bandwidth


def test_compiled_nearest_point_equals_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    from perfmodel.search import gemm_kernel

    rng = np.random.default_rng(3)
    points = np.column_stack([rng.uniform(3, 12, 900), rng.normal(0, 1, (900, 9))])
    points[100:110, 0] = 5.0  # ties along the first coordinate
    scale = DistanceScale(points, 0.4, 0.7, 0.2, 3.0)
    x = np.vstack([np.column_stack([rng.uniform(0, 15, 600), rng.normal(0, 1, (600, 9))]), points[:5]])
    assert gemm_kernel.load()
    compiled = scale.factor(x)
    monkeypatch.setenv("PERFMODEL_NO_JIT", "1")
    np.testing.assert_allclose(compiled, scale.factor(x), rtol=1e-12)
    brute = np.sqrt(((x[:, None, :] - points[None]) ** 2).sum(axis=2).min(axis=1))
    np.testing.assert_allclose(compiled, scale.spread(brute / scale.typical), rtol=1e-14)


def test_a_class_whose_ops_agree_in_value_not_type_keeps_its_keys_apart() -> None:
    """One op class whose key fields all hold one value (``_one_key_tuple``: one key for the class, no tuple per op),
    and the same with one op's ``inputs`` 2.0 beside 2: equal, formatted apart (its own key)."""
    same = [make_op(OPS[11]) for _ in range(5)]
    names, code = class_codes(same, 8)
    assert names.tolist() == [class_key(same[0], 8)] and code.tolist() == [0] * 5
    odd = [*same[:3], _odd(make_op(OPS[11]), "inputs", 2.0), same[3]]
    names, code = class_codes(odd, 8)
    expected, inverse = np.unique(np.array([class_key(op, 8) for op in odd], dtype=str), return_inverse=True)
    assert names.tolist() == expected.tolist() and code.tolist() == inverse.reshape(-1).tolist()
    assert len(names) == 2
