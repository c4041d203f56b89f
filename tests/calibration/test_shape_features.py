"""Shape numbers of the calibration: golden values, a shape effect recovered on unseen shapes, the
model kept where it is already right, and calibrations stored before shape numbers still load."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import perfmodel
from perfmodel.calibration import Calibration, curve, fit_calibration, predict_calibrated
from perfmodel.calibration.classes import class_key
from perfmodel.calibration.shape import FAMILY_FEATURES, N_SHAPE, family, op_features
from perfmodel.ops import make_op

HW = "nvidia-a100-sxm4-80gb"


@pytest.mark.parametrize(("op", "expected"), [
    # min(M, N) = 8 is 4 halvings below 128 and 2 below 32; K / sqrt(M N) = 500000 / 64 -> log2 = 12.93 -> clipped
    ({"kind": "matmul", "m": 512, "n": 8, "k": 500000, "dtype": "fp16"}, (4.0, 8.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0)),
    # transposed A on a skinny GEMM: N = 16 is 3 halvings below 128 and 1 below 32; A is the wide operand: 3
    ({"kind": "matmul", "m": 7680, "n": 16, "k": 2560, "dtype": "fp16", "transpose_a": True},
     (3.0, np.log2(2560) - 0.5 * (np.log2(7680) + 4.0), 0.0, 1.0, 0.0, 0.0, 1.0, 3.0)),
    # M = 35 is the narrow side: the wide operand is B, so a transposed A (35 x K) is not the number's case ...
    ({"kind": "matmul", "m": 35, "n": 8457, "k": 2560, "dtype": "fp16", "transpose_a": True},
     (7.0 - np.log2(35), np.log2(2560) - 0.5 * (np.log2(35) + np.log2(8457)), 2.0, 1.0, 0.0, 0.0, 0.0, 0.0)),
    # ... a transposed B is: M = 16 is 3 halvings below 128, 1 below 32
    ({"kind": "matmul", "m": 16, "n": 4096, "k": 1024, "dtype": "fp16", "transpose_b": True},
     (3.0, 10.0 - 0.5 * (4.0 + 12.0), 0.0, 0.0, 1.0, 0.0, 1.0, 3.0)),
    # square and aligned: nothing to correct
    ({"kind": "matmul", "m": 4096, "n": 4096, "k": 4096, "dtype": "fp16", "transpose_b": True},
     (0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)),  # K = sqrt(M N): not deep either
    # 35 and 8457 are not multiples of 8; min(M, N) = 35 -> 7 - log2 35
    ({"kind": "matmul", "m": 35, "n": 8457, "k": 1760, "dtype": "fp32", "batch": 4},
     (7.0 - np.log2(35), np.log2(1760) - 0.5 * (np.log2(35) + np.log2(8457)), 2.0, 0.0, 0.0, 2.0, 0.0, 0.0)),
    # first conv layer: C = 3 (thin, unaligned), 7x7 taps, stride 2; M = 1 * 112 * 112, N = 64, K = 3 * 49
    ({"kind": "conv2d", "batch": 1, "in_channels": 3, "out_channels": 64, "height": 224, "width": 224,
      "kernel_h": 7, "kernel_w": 7, "stride": 2, "padding": 3, "dtype": "fp32"},
     (1.0, np.log2(147) - 0.5 * (np.log2(112 * 112) + 6.0), 1.0, np.log2(49), 1.0, 4.0 - np.log2(3), 0.0, 0.0)),
    # either Winograd the library ran (fused, non-fused) sets the winograd number; N = 64: one halving narrow
    ({"kind": "conv2d", "batch": 8, "in_channels": 64, "out_channels": 64, "height": 56, "width": 56,
      "kernel_h": 3, "kernel_w": 3, "padding": 1, "dtype": "fp32", "algorithm": "winograd_nonfused"},
     (1.0, np.log2(576) - 0.5 * (np.log2(8 * 56 * 56) + 6.0), 0.0, np.log2(9), 0.0, 0.0, 1.0, 0.0)),
    # rows of 4096 = 2^12 elements, 2^6 rows
    ({"kind": "rmsnorm", "shape": [64, 4096], "dtype": "fp16"}, (2.0, -4.0, 0.0, 0.5, 1.0, 1.0, 0.0, 0.0)),
    ({"kind": "embedding", "table_shape": [32000, 1000], "num_indices": 1024, "dtype": "fp16"},  # 1000 = 125 x 8
     (np.log2(1000) - 10.0, 0.0, 0.0, (np.log2(1000) - 10.0) ** 2 / 8.0, 0.0, 0.0, 0.0, 0.0)),
    ({"kind": "allreduce", "bytes": 2 ** 20, "devices": 8, "dtype": "fp16"}, (3.0, 2.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)),
    ({"kind": "attention", "batch": 1, "heads": 8, "seq_q": 1, "seq_kv": 4096, "head_dim": 128, "dtype": "fp16",
      "causal": True}, (1.0, 1.0, -12.0, 0.0, 0.0, 0.0, 0.0, 0.0)),
])
def test_golden_shape_numbers(op: dict[str, Any], expected: tuple[float, ...]) -> None:
    got = op_features(make_op(op))
    assert len(got) == N_SHAPE
    assert got == pytest.approx(expected, abs=1e-9)
    assert family(make_op(op)) in FAMILY_FEATURES


def _skinny_times(ops: list[dict[str, Any]]) -> np.ndarray:
    """A kernel library's GEMV problem: the kernel body 30 % slower per halving of min(M, N) below 128."""
    f = curve.features(perfmodel.predict_many(HW, ops))
    narrow = np.array([op_features(make_op(op))[0] for op in ops])
    out: np.ndarray = f.overhead_s + f.body_s * np.exp(0.3 * narrow)
    return out


def _gemms(rng: np.random.Generator, n: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        m = int(2 ** rng.integers(8, 14))
        narrow = int(2 ** rng.integers(0, 11))
        k = int(2 ** rng.integers(9, 14))
        out.append({"kind": "matmul", "m": m, "n": narrow, "k": k, "dtype": "fp16"})
    return out


def test_a_shape_effect_is_learnt_and_carries_to_unseen_shapes() -> None:
    """Runs slowed by a narrow-N effect: the size-only forms cannot express it, the shape form can, and
    the fit carries to shapes it never saw (held-out median error a few %)."""
    rng = np.random.default_rng(3)
    fit_ops, test_ops = _gemms(rng, 160), _gemms(rng, 80)
    model = perfmodel.predict_many(HW, fit_ops + test_ops).time_s
    truth = _skinny_times(fit_ops + test_ops) * np.exp(0.02 * rng.standard_normal(model.size))
    n = len(fit_ops)
    cal = fit_calibration(HW, list(zip(fit_ops, truth[:n].tolist(), strict=True)))
    assert cal.report["classes"]["gemm:fp16"]["form"].endswith("+shape")
    predicted = predict_calibrated(HW, test_ops, cal).time_s
    held_out = np.abs(predicted / truth[n:] - 1.0)
    uncalibrated = np.abs(model[n:] / truth[n:] - 1.0)
    assert np.median(held_out) < 0.04
    assert np.percentile(held_out, 90) < 0.10
    assert np.median(uncalibrated) > 0.15 and np.percentile(uncalibrated, 90) > 0.5  # a large effect: this can fail
    narrow_coefficient = cal.classes["gemm:fp16"].theta[curve.N_CURVE]
    assert narrow_coefficient == pytest.approx(0.3, abs=0.05)


def test_the_model_is_kept_where_it_is_already_right() -> None:
    """Runs at the model's own times (2 % noise): the calibration changes predictions by < 3 %."""
    rng = np.random.default_rng(5)
    ops = _gemms(rng, 80)
    model = perfmodel.predict_many(HW, ops).time_s
    measured = model * np.exp(0.02 * rng.standard_normal(model.size))
    cal = fit_calibration(HW, list(zip(ops, measured.tolist(), strict=True)))
    fresh = _gemms(rng, 40)
    ratio = predict_calibrated(HW, fresh, cal).time_s / perfmodel.predict_many(HW, fresh).time_s
    assert np.max(np.abs(ratio - 1.0)) < 0.03


def test_parameters_stored_before_shape_numbers_still_load(clean_params: dict[str, Any]) -> None:
    cal = Calibration.from_params(clean_params)
    for entry in (*cal.classes.values(), cal.hardware_level):
        assert entry.theta.shape == (curve.N_PARAMS,)
        assert np.all(entry.theta[curve.N_CURVE:] == 0.0)


@pytest.fixture()
def clean_params() -> dict[str, Any]:
    """A format-1 calibration as stored before shape numbers existed: nine curve parameters per entry."""
    rng = np.random.default_rng(9)
    ops = _gemms(rng, 30)
    measured = perfmodel.predict_many(HW, ops).time_s * 1.2
    params = fit_calibration(HW, list(zip(ops, measured.tolist(), strict=True))).params
    for entry in (*params["classes"].values(), params["hardware_level"]):
        entry["params"] = {k: v for k, v in entry["params"].items() if not k.startswith("shape_")}
    return params


def test_reductions_are_split_by_their_combining_op() -> None:
    key = class_key(make_op({"kind": "reduce", "shape": [64, 64], "axes": [1], "op": "mean", "dtype": "bf16"}))
    assert key == "reduce/mean:bf16"


@pytest.mark.parametrize(("op", "expected"), [
    ({"kind": "allreduce", "bytes": 2**20, "devices": 8, "dtype": "fp16"}, "collective_allreduce:fp16"),
    ({"kind": "allreduce", "bytes": 2**20, "devices": 8, "devices_per_node": 8, "dtype": "fp16"},
     "collective_allreduce:fp16"),
    ({"kind": "allreduce", "bytes": 2**20, "devices": 8, "devices_per_node": 4, "dtype": "fp16"},
     "collective_allreduce_multinode:fp16"),
    ({"kind": "allgather", "bytes": 2**20, "devices": 2, "devices_per_node": 1, "dtype": "bf16"},
     "collective_allgather_multinode:bf16"),
])
def test_collectives_across_nodes_are_their_own_class(op: dict[str, Any], expected: str) -> None:
    """NCCL over the network runs at another fabric's efficiency than within a node: one fit for both
    mixed Vidur's 2x1 (5.9 GB/s) and 2x2 (NVLink) all-reduces and missed both by 2-3x."""
    assert class_key(make_op(op)) == expected


def test_a_collective_without_devices_per_node_takes_the_devices_node() -> None:
    """16 GPUs with no devices_per_node: the model spans two 8-GPU A100 nodes, and so does the class."""
    op = make_op({"kind": "allreduce", "bytes": 2**24, "devices": 16, "dtype": "fp16"})
    assert class_key(op, per_node_default=8) == "collective_allreduce_multinode:fp16"
    assert class_key(op, per_node_default=72) == "collective_allreduce:fp16"  # one NVL72 domain
    runs = [({"kind": "allreduce", "bytes": float(2**i), "devices": 16, "dtype": "fp16"}, 1e-5 * 2 ** (i / 3))
            for i in range(14, 30)]
    cal = fit_calibration(HW, runs)
    assert set(cal.classes) == {"collective_allreduce_multinode:fp16"}
    assert bool(predict_calibrated(HW, [op], cal).in_calibrated_range[0])  # its own fitted class, inside


def test_few_multinode_runs_are_fitted_with_the_single_node_class() -> None:
    """DeepBench's P100 sweep has 4 fitted 16-GPU rows: too few for a class of their own, so they join the
    single-node fit (log2 devices tells them apart) and take it whole; with 6 or more they get their own."""
    sizes = [float(2**i) for i in range(16, 28)]
    single = [({"kind": "allreduce", "bytes": b, "devices": d, "dtype": "fp32"}, 1e-5 + b / 2e9 * d / 4)
              for b in sizes for d in (2, 4, 8)]
    few = [({"kind": "allreduce", "bytes": b, "devices": 16, "dtype": "fp32"}, 1e-4 + b / 3e8) for b in sizes[:4]]
    cal = fit_calibration("nvidia-p100-sxm2-16gb", single + few, timing="host")
    multinode = cal.classes["collective_allreduce_multinode:fp32"]
    assert multinode.source == "class" and multinode.runs == 4 and multinode.weight == 1.0
    assert np.array_equal(multinode.theta, cal.classes["collective_allreduce:fp32"].theta)
    assert cal.classes["collective_allreduce:fp32"].runs == len(single) + 4
    many = [({"kind": "allreduce", "bytes": b, "devices": 16, "dtype": "fp32"}, 1e-4 + b / 3e8) for b in sizes]
    own = fit_calibration("nvidia-p100-sxm2-16gb", single + many, timing="host")
    assert own.classes["collective_allreduce_multinode:fp32"].source == "fitted"
    assert own.classes["collective_allreduce:fp32"].runs == len(single)


def test_calibrations_stored_with_fewer_shape_numbers_load_and_predict_as_before() -> None:
    """A calibration stored when there were 7 shape numbers (GEMMs had no narrow x wide operand transposed): its
    parameters, shape ranges and local-correction points are one number short. It loads, and on GEMMs without a
    transposed wide operand (the newest number 0, as it was for every GEMM then) it predicts exactly what the full
    calibration does."""
    rng = np.random.default_rng(11)
    ops = _gemms(rng, 60)
    bumpy = np.array([1.3 + 0.3 * np.sin(2.0 * np.log2(op["k"] * op["m"])) for op in ops])  # per shape, no trend
    measured = perfmodel.predict_many(HW, ops).time_s * bumpy
    full = fit_calibration(HW, list(zip(ops, measured.tolist(), strict=True)))
    params = full.params
    newest = f"shape_{N_SHAPE - 1}"
    for entry in (*params["classes"].values(), params["hardware_level"]):
        assert entry["params"].pop(newest) == 0.0  # never varied in these runs: not fitted
        if entry.get("shape_range") is not None:
            entry["shape_range"] = [v[:N_SHAPE - 1] for v in entry["shape_range"]]
        if entry.get("local") is not None:
            entry["local"]["points"] = [point[:2 + N_SHAPE - 1] for point in entry["local"]["points"]]
    old = Calibration.from_params(params)
    assert any(e.local is not None for e in old.classes.values())
    np.testing.assert_allclose(predict_calibrated(HW, ops, old).time_s, predict_calibrated(HW, ops, full).time_s,
                               rtol=1e-12)
