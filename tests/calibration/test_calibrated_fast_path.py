"""``predict_calibrated``'s fast path (issue 27, docs/accuracy.md twelfth pass calfit14) against the reference on the
dev data (Vidur's A100 runs): the same answers to the bit as ``apply_calibration`` of ``predict_many``, the trees'
fields read only where a tree splits as op by op (``op_fields``), and ``distinct_ops`` / ``by_type`` as the plain
dict loops they replace."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from benchmark_module import load_benchmark

import perfmodel
from perfmodel.calibration import Calibration, apply_calibration, predict_calibrated
from perfmodel.calibration.fields import op_fields
from perfmodel.calibration.model import distinct_ops
from perfmodel.calibration.op_groups import by_type
from perfmodel.ops import Op, make_op

HW = "nvidia-a100-sxm4-80gb"


@pytest.fixture(scope="module")
def tables() -> dict[str, list[Op]]:
    """``benchmarks/calibrated_speed.py``'s two tables (1,200 ops each: one fp16 with half its rows in a fitted class,
    three rows repeated), plus rows repeated and shuffled."""
    speed = load_benchmark("calibrated_speed", "calibrated_speed")
    out: dict[str, list[Op]] = speed.tables(1200)
    order = np.random.default_rng(1).permutation(900)
    fitted = out["fitted classes"]
    out["repeated"] = [fitted[int(i) % 300] for i in order]
    return out


def _assert_same(fast: Any, reference: Any) -> None:
    for name in ("time_s", "overhead_s", "interval_s", "in_calibrated_range", "utilization"):
        a, b = np.asarray(getattr(fast, name)), np.asarray(getattr(reference, name))
        assert a.shape == b.shape and a.dtype == b.dtype, name
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), name  # the same bits (nan, -0.0 included)
    assert fast.notes == reference.notes and (fast.bound == reference.bound).all()
    assert fast.uncalibrated_interval_s is None


@pytest.mark.parametrize("table", ["no op repeated", "fitted classes", "repeated"])
def test_predict_calibrated_equals_apply_calibration_of_predict_many(vidur: Calibration,
                                                                     tables: dict[str, list[Op]], table: str) -> None:
    ops = tables[table]
    fast = predict_calibrated(HW, ops, vidur)
    timing = "host" if vidur.timing == "host" else "kernel"
    reference = apply_calibration(vidur, perfmodel.predict_many(HW, ops, timing=timing, space=vidur.space))
    assert reference.uncalibrated_interval_s is None  # replaced by the calibrated interval on both paths
    _assert_same(fast, reference)
    assert np.isfinite(fast.time_s).all() and (fast.time_s > 0).all()


def test_the_trees_read_only_split_fields_and_answer_as_op_by_op(vidur: Calibration,
                                                                 tables: dict[str, list[Op]]) -> None:
    from perfmodel.calibration import curve

    trees = vidur.residual_trees
    assert trees is not None
    ops = tables["fitted classes"]
    batch = perfmodel.predict_many(HW, ops, space=vidur.space)
    f = curve.features(batch)
    keys = [str(k) for k in np.asarray(sorted({*trees.classes, "gemm:bf16"}))]  # a key the trees never saw too
    index = np.random.default_rng(2).integers(0, len(keys), len(ops))
    curve_s = batch.time_s * 1.1
    split = trees.log_factor(f, batch.time_s, ops, keys, curve_s, key_index=index)
    each = trees.log_factor(f, batch.time_s, ops, [keys[int(i)] for i in index], curve_s,
                            per_op=[op_fields(op) for op in ops])
    assert np.array_equal(split.view(np.int64), each.view(np.int64))
    skipped = sum(name == "" for name in trees._split_fields)
    assert 0 < skipped < len(trees.fields)  # fields no tree splits on exist here, and are left unread


def _reference_distinct(ops: list[Any]) -> tuple[list[Any], list[int]]:
    index: dict[Any, int] = {}
    rows = [index.setdefault(op, len(index)) for op in ops]
    return list(index), rows


class _SameHash:
    """Equal when ``value`` is; every one hashes alike (what tells ops apart is ``==``, not the hash)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SameHash) and other.value == self.value

    def __hash__(self) -> int:
        return 7


def test_distinct_ops_equals_a_dict_of_the_ops() -> None:
    rng = np.random.default_rng(3)
    pool = [make_op({"kind": "matmul", "m": int(m), "n": 64, "k": 64, "dtype": "fp16"}) for m in range(1, 40)]
    for ops in ([make_op(dict(pool[int(i)].to_dict())) for i in rng.integers(0, 39, 200)], pool, pool[:1], [],
                [_SameHash(int(v)) for v in rng.integers(0, 5, 30)] + pool[:3] + [_SameHash(9)]):
        distinct, rows = distinct_ops(ops)  # type: ignore[arg-type]
        want, want_rows = _reference_distinct(ops)
        assert rows.tolist() == want_rows
        assert len(distinct) == len(want) and all(a is b for a, b in zip(distinct, want, strict=True))
    unhashable: list[Any] = [[1], [1]]
    distinct, rows = distinct_ops(unhashable)
    assert rows.tolist() == [0, 1] and distinct == unhashable


def test_by_type_groups_each_class_in_order(tables: dict[str, list[Op]]) -> None:
    ops = tables["no op repeated"][:500]
    groups = by_type(ops)
    assert [kind for kind, _, _ in groups] == list(dict.fromkeys(map(type, ops)))
    seen = np.concatenate([rows for _, rows, _ in groups])
    assert sorted(seen.tolist()) == list(range(len(ops)))
    for kind, rows, members in groups:
        assert (np.diff(rows) > 0).all() and all(type(op) is kind for op in members)
        assert all(op is ops[int(i)] for op, i in zip(members, rows, strict=True))
    assert by_type([]) == [] and len(by_type(ops[:1])) == 1


def _same_arrays(a: Any, b: Any, name: str) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys(), name
        for key in a:
            _same_arrays(a[key], b[key], f"{name}.{key}")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)), name
    else:
        assert a == b, name


@pytest.mark.parametrize("table", ["no op repeated", "fitted classes", "one class"])
def test_work_of_given_the_groups_is_the_work_of_the_ops(tables: dict[str, list[Op]], table: str) -> None:
    """``predict_calibrated`` hands ``by_type``'s groups to the model's ``work_of``: the same Work to the bit."""
    import dataclasses

    from perfmodel.roofline import work_of

    mixed = tables["fitted classes"]
    ops = [op for op in mixed if type(op) is type(mixed[0])] if table == "one class" else tables[table]
    groups = by_type(ops)
    assert (len(groups) == 1) == (table == "one class")
    plain, grouped = work_of(ops, 32.0), work_of(ops, 32.0, groups)
    for field in dataclasses.fields(plain):
        _same_arrays(getattr(plain, field.name), getattr(grouped, field.name), field.name)


def test_screened_local_kernel_equals_the_reference_kernel_to_the_bit(vidur: Calibration,
                                                                       tables: dict[str, list[Op]],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``near_jit.smooth_screened`` (a pair rejected on one coordinate before its full distance: issue 27, calfit17)
    against ``near_jit.smooth`` on the inputs ``predict_calibrated`` hands the local corrections of the fitted Vidur
    A100 calibration: the same bits."""
    from perfmodel.calibration import local, near_jit
    from perfmodel.search import gemm_kernel

    assert gemm_kernel.load()
    original = local.LocalCorrection._smoothed
    seen: list[tuple[int, Any, Any]] = []

    plain: Callable[..., None] = near_jit.smooth

    def reference(*args: Any) -> None:
        plain(*args[:9], args[10])  # the same arguments less ``screen``

    def both(self: local.LocalCorrection, x: Any, smooth: Any) -> Any:
        assert smooth is near_jit.smooth_screened
        screened = original(self, x, smooth)
        seen.append((self.screen, screened, original(self, x, reference)))
        return screened

    monkeypatch.setattr(local.LocalCorrection, "_smoothed", both)
    for table in ("fitted classes", "no op repeated"):
        predict_calibrated(HW, tables[table], vidur)
    assert len(seen) >= 4 and {screen for screen, _, _ in seen} >= {1, 3}  # both columns screened on
    for _, screened, expected in seen:
        assert np.array_equal(screened.view(np.uint8), expected.view(np.uint8))
    assert max(np.abs(screened).max() for _, screened, _ in seen) > 0.01
