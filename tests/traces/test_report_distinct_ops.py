"""The trace report predicts each distinct op once and tests for roof alarms only the runs that may raise one:
its rows, rejections and alarms equal those of predicting and testing every run (the reference below) on real
traces, on devices where runs alarm and where some ops are rejected."""

from __future__ import annotations

from collections import defaultdict

import pytest
from trace_builders import DATA

import perfmodel
from perfmodel.roofline import predict_valid
from perfmodel.traces import KernelRecord, kernel_alarms, match_runs, parse_trace, roof_alarms, run_alarms
from perfmodel.traces.report import trace_report

TRACES = ["kineto_resnet50_num_workers_0__worker0.1623143566756.pt.trace.json.gz",
          "negative_queue_length_values_check__rank0.json.gz", "triton_example__triton_example.json.gz",
          "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"]
DEVICES = ["nvidia-a100-sxm4-80gb", "nvidia-t4", "google-tpu-v4"]


@pytest.fixture(scope="module", params=TRACES)
def traced(request: pytest.FixtureRequest) -> tuple[object, object]:
    parsed = parse_trace(DATA / request.param)
    return parsed, match_runs(parsed)


@pytest.mark.parametrize("device", DEVICES)
def test_rows_equal_predicting_every_run(traced: tuple[object, object], device: str) -> None:
    parsed, matched = traced
    hw = perfmodel.load_hardware(device)
    report = trace_report(hw, parsed, matched)  # type: ignore[arg-type]
    runs = matched.runs  # type: ignore[attr-defined]
    index, result, errors = predict_valid(
        [r.op for r in runs], lambda ops: perfmodel.predict_many(hw, ops, timing="kernel").time_s)
    rejected: dict[str, int] = defaultdict(int)
    for why in errors.values():
        rejected[why[:300]] += 1
    assert report.rejected == dict(rejected)
    rows: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for i, predicted in zip(index, [] if result is None else result.tolist(), strict=True):
        row = rows[(runs[i].op_name, repr(sorted(runs[i].op.items())))]
        row[0] += 1
        row[1] += runs[i].measured_time_s
        row[2] += predicted
    assert len(report.ops) == len(rows)
    for op_row in report.ops:
        calls, measured, predicted = rows[(op_row.op_name, repr(sorted(op_row.op.items())))]
        assert op_row.calls == calls
        assert op_row.measured_s == pytest.approx(measured, rel=1e-12)
        assert op_row.predicted_s == pytest.approx(predicted, rel=1e-12)


@pytest.mark.parametrize("tolerance", [0.05, -0.5, -0.99])
def test_alarms_equal_testing_every_run(traced: tuple[object, object], tolerance: float) -> None:
    parsed, matched = traced
    hw = perfmodel.load_hardware("nvidia-t4")
    items = [*(k for k in parsed.kernels if k.counters), *matched.runs]  # type: ignore[attr-defined]
    buildable = [i for i in items if isinstance(i, KernelRecord) or _builds(i.op)]
    reference = [a for i in buildable for a in (kernel_alarms(hw, i, tolerance) if isinstance(i, KernelRecord)
                                                else run_alarms(hw, i, tolerance))]
    found = roof_alarms(hw, buildable, tolerance)
    assert found == reference
    assert roof_alarms(hw, buildable, tolerance, limit=3) == reference[:3]
    if tolerance < -0.9 and len(matched.runs) >= 100:  # type: ignore[attr-defined]  # roofs at 1 %: runs alarm
        assert any(a.name in {r.op_name for r in matched.runs} for a in found)  # type: ignore[attr-defined]


def _builds(op: dict[str, object]) -> bool:
    try:
        perfmodel.make_op(op)
    except (ValueError, TypeError):
        return False
    return True
