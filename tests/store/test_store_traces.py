"""Trace uploads and calibrations: the basic round trip the next issues build on."""

from __future__ import annotations

import numpy as np
import pytest

import perfmodel
from perfmodel.calibration import Calibration, fit_calibration, predict_calibrated
from perfmodel.store import NotFound, Store, StoreError


def test_trace_uploads(store: Store) -> None:
    big = 5 * 2**30  # BigInteger: more than 2**31 bytes
    first = store.add_trace_upload("h100", "run.nsys-rep", "nsys", big, "a" * 64)
    second = store.add_trace_upload("mi300x", "trace.json", "chrome", 10, "b" * 64, status="failed",
                                    error="line 3: bad JSON")
    row = store.get_trace_upload(first)
    assert row is not None
    assert (row.hardware_id, row.filename, row.format, row.size_bytes, row.sha256) == (
        "h100", "run.nsys-rep", "nsys", big, "a" * 64)
    assert (row.status, row.error, row.kernel_count) == ("received", None, None)
    assert row.created_at.utcoffset() is not None
    assert [u.id for u in store.list_trace_uploads()] == [first, second]
    assert [u.id for u in store.list_trace_uploads("mi300x")] == [second]
    assert store.get_trace_upload(second).error == "line 3: bad JSON"  # type: ignore[union-attr]
    store.update_trace_upload(first, "parsed", kernel_count=812)
    updated = store.get_trace_upload(first)
    assert updated is not None and (updated.status, updated.kernel_count) == ("parsed", 812)
    assert store.get_trace_upload(999) is None
    with pytest.raises(NotFound):
        store.update_trace_upload(999, "parsed")
    with pytest.raises(StoreError):
        store.add_trace_upload("h100", "x", "nsys", -1, "a" * 64)
    with pytest.raises(StoreError):
        store.add_trace_upload("h100", "x" * 256, "nsys", 1, "a" * 64)
    assert len(store.list_trace_uploads()) == 2


def test_calibrations(store: Store) -> None:
    params = {"launch_overhead_s": 4.1e-6, "efficiency": {"matmul": [0.81, 0.93]}}
    report = {"mape": 0.071, "n": 412, "folds": [0.06, 0.08]}
    a1 = store.add_calibration("h100", params, report)
    b1 = store.add_calibration("mi300x", {"x": 1}, {"mape": 0.2}, notes="first try")
    a2 = store.add_calibration("h100", {**params, "launch_overhead_s": 3.9e-6}, report, notes="refit")
    row = store.get_calibration(a1)
    assert row is not None and (row.hardware_id, row.params, row.fit_report, row.notes) == (
        "h100", params, report, None)
    assert row.created_at.utcoffset() is not None
    latest = store.latest_calibration("h100")
    assert latest is not None and latest.id == a2 and latest.notes == "refit"
    assert store.latest_calibration("tpu-v5e") is None
    assert [c.id for c in store.list_calibrations()] == [a1, b1, a2]
    assert [c.id for c in store.list_calibrations("h100")] == [a1, a2]
    assert store.get_calibration(999) is None
    with pytest.raises(StoreError):
        store.add_calibration("h100", {"bad": float("inf")}, report)
    with pytest.raises(StoreError):
        store.add_calibration("", params, report)
    assert len(store.list_calibrations()) == 3


def test_a_calibration_with_residual_trees_round_trips(store: Store) -> None:
    """~1 MB of trees in the params JSON: stored and read back on each backend, the same predictions."""
    rng = np.random.default_rng(3)
    ops = [{"kind": "matmul", "m": int(2 ** rng.uniform(7, 13)), "n": int(rng.choice([64, 96, 128, 192, 256])),
            "k": int(2 ** rng.uniform(7, 13)), "dtype": "fp16"} for _ in range(160)]
    measured = perfmodel.predict_many("nvidia-a100-sxm4-80gb", ops).time_s * np.array(
        [1.8 if op["n"] == 96 else 1.0 for op in ops])
    fitted = fit_calibration("nvidia-a100-sxm4-80gb", list(zip(ops, measured.tolist(), strict=True)))
    assert fitted.residual_trees is not None
    row = store.get_calibration(store.add_calibration("nvidia-a100-sxm4-80gb", fitted.params, fitted.report))
    assert row is not None
    again = Calibration.from_params(row.params)
    assert again.residual_trees is not None
    np.testing.assert_allclose(predict_calibrated("nvidia-a100-sxm4-80gb", ops[:40], again).time_s,
                               predict_calibrated("nvidia-a100-sxm4-80gb", ops[:40], fitted).time_s, rtol=1e-12)
