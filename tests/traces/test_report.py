"""``perfmodel trace``: a trace read offline, its ops predicted and grouped, its unmodelled kernels listed."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from trace_builders import DATA, KinetoTrace
from typer.testing import CliRunner

import perfmodel
from perfmodel.calibration import fit_calibration
from perfmodel.cli import app
from perfmodel.ops import make_op
from perfmodel.traces import match_runs, parse_trace
from perfmodel.traces.report import format_trace_report, trace_report

A100 = "nvidia-a100-sxm4-80gb"
HTA = DATA / "negative_queue_length_values_check__rank0.json.gz"


@pytest.fixture(scope="module")
def hta() -> tuple[perfmodel.Hardware, object, object]:
    parsed = parse_trace(HTA)
    return perfmodel.load_hardware(A100), parsed, match_runs(parsed)


def test_report_sums_agree_with_an_independent_prediction(hta: tuple[perfmodel.Hardware, object, object]) -> None:
    hw, parsed, matched = hta
    report = trace_report(hw, parsed, matched)  # type: ignore[arg-type]
    runs = matched.runs  # type: ignore[attr-defined]
    accepted = [r for r in runs if _builds(r.op)]
    predicted = perfmodel.predict_many(A100, [r.op for r in accepted], timing="kernel").time_s
    by_kind: dict[str, list[float]] = defaultdict(list)
    for run, p in zip(accepted, predicted, strict=True):
        by_kind[run.op["kind"]].append(p)
    assert {k.kind: k.calls for k in report.kinds} == {kind: len(v) for kind, v in by_kind.items()}
    for k in report.kinds:
        assert k.predicted_s == pytest.approx(sum(by_kind[k.kind]))
    assert sum(r.calls for r in report.ops) == len(accepted)
    assert sum(r.measured_s for r in report.ops) == pytest.approx(sum(r.measured_time_s for r in accepted))
    assert sum(r.predicted_s for r in report.ops) == pytest.approx(float(np.sum(predicted)))
    assert [r.measured_s for r in report.ops] == sorted((r.measured_s for r in report.ops), reverse=True)
    assert report.unmodelled_share == pytest.approx(matched.unmodelled_time_share)  # type: ignore[attr-defined]
    assert sum(report.rejected.values()) == len(runs) - len(accepted)


def _builds(op: dict[str, object]) -> bool:
    try:
        make_op(op)
    except ValueError:
        return False
    return True


def test_calibrated_report_gives_intervals(hta: tuple[perfmodel.Hardware, object, object]) -> None:
    hw, parsed, matched = hta
    runs = matched.runs  # type: ignore[attr-defined]
    # fitted on the runs with framework shapes (as many as before kernel-first matching: the fit's cost grows with
    # the runs); the report still predicts every run, the grid/block and memcpy ones included
    calibration = fit_calibration(A100, [(r.op, r.measured_time_s) for r in runs
                                         if r.source == "framework shapes" and _builds(r.op)])
    plain = trace_report(hw, parsed, matched)  # type: ignore[arg-type]
    calibrated = trace_report(hw, parsed, matched, calibration, "7")  # type: ignore[arg-type]
    assert all(r.interval_s is not None and r.interval_s[0] <= r.interval_s[1] for r in calibrated.ops)
    assert all(r.interval_s is None for r in plain.ops)
    elementwise = {k.kind: k for k in calibrated.kinds}["elementwise"]
    assert elementwise.median_abs_error_pct < {k.kind: k for k in plain.kinds}["elementwise"].median_abs_error_pct
    text = format_trace_report(calibrated, top=3)
    assert "Predictions: calibration 7." in text and "10-90 % interval of one call" in text


def test_text_lists_top_ops_and_unmodelled_kernels_and_groups_alarms(
        hta: tuple[perfmodel.Hardware, object, object]) -> None:
    hw, parsed, matched = hta
    report = trace_report(hw, parsed, matched)  # type: ignore[arg-type]
    text = format_trace_report(report, top=4)
    assert f"{len(parsed.kernels):,} device activities" in text  # type: ignore[attr-defined]
    assert "matched by source: " in text and "unmodelled by reason: " in text
    assert f"top 4 of {len(report.ops)} ops" in text
    assert report.ops[0].op_name in text
    assert report.unmodelled[0].reason[:40] in text
    assert len(report.alarms) > 4
    alarm_lines = [line for line in text.splitlines() if "its roof:" in line]
    assert 1 <= len(alarm_lines) <= 4
    assert sum(int(line.split("x", 1)[0]) for line in alarm_lines) <= len(report.alarms)


def test_hostile_kernel_name_stays_on_one_line() -> None:
    trace = KinetoTrace()
    trace.kernel("evil\nkernel<script>alert(1)</script>\r\x1b[2J\x9b" + "x" * 5000, 1.0, 5.0, 10.0)
    parsed = parse_trace(trace.to_bytes())
    report = trace_report(perfmodel.load_hardware(A100), parsed, match_runs(parsed))
    text = format_trace_report(report)
    line = next(line for line in text.splitlines() if "evil" in line)
    assert "kernel<script>" in line and len(line) < 300 and "\x1b" not in text and "\x9b" not in text
    assert "launch geometry" in text  # sized by its launch alone


def test_cli_reads_stores_once_and_refuses_bad_input(db: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["trace", str(HTA), "--hardware", A100, "--top", "2", "--store"])
    assert first.exit_code == 0, first.output
    assert "top 2 of" in first.output and "stored as trace upload 1" in first.output
    again = runner.invoke(app, ["trace", str(HTA), "--hardware", A100, "--store"])
    assert "already stored as trace upload 1" in again.output
    not_a_trace = db / "notes.txt"
    not_a_trace.write_text("hello\nworld\n")
    bad = runner.invoke(app, ["trace", str(not_a_trace), "--hardware", A100])
    assert bad.exit_code == 2 and "expected a PyTorch profiler" in bad.output
    missing = runner.invoke(app, ["trace", str(db / "nope.json"), "--hardware", A100])
    assert missing.exit_code == 2 and "no such file" in missing.output
    no_cal = runner.invoke(app, ["trace", str(HTA), "--hardware", A100, "--calibration", "latest"])
    assert no_cal.exit_code == 2 and "no calibration 'latest'" in no_cal.output
    unknown = runner.invoke(app, ["trace", str(HTA), "--hardware", "no-such-gpu"])
    assert unknown.exit_code == 2 and "unknown hardware" in unknown.output


def test_an_op_the_device_cannot_run_is_counted_not_fatal() -> None:
    """fp64 on a TPU v4 (no fp64 engine): that call is listed as rejected with the reason, the rest predicted."""
    trace = KinetoTrace()
    for i, dtype in enumerate(("double", "float")):
        external = trace.op("aten::mm", 100.0 * i, 50.0, dims=[[64, 32], [32, 16]], types=[dtype, dtype])
        trace.kernel(f"gemm_{dtype}", 100.0 * i + 10.0, 100.0 * i + 60.0, 5.0, external=external)
    parsed = parse_trace(trace.to_bytes())
    report = trace_report(perfmodel.load_hardware("google-tpu-v4"), parsed, match_runs(parsed))
    assert [(r.op["dtype"], r.calls) for r in report.ops] == [("fp32", 1)]
    (reason, count), = report.rejected.items()
    assert count == 1 and "fp64 is not supported on google-tpu-v4" in reason
    assert "1 matched calls the model rejects" in format_trace_report(report)


def test_cli_json_lists_every_op_unless_limited(db: Path) -> None:
    runner = CliRunner()
    full = runner.invoke(app, ["trace", str(HTA), "--hardware", A100, "--json"])
    assert full.exit_code == 0, full.output
    data = json.loads(full.output)
    parsed = parse_trace(HTA)
    report = trace_report(perfmodel.load_hardware(A100), parsed, match_runs(parsed))
    assert len(data["ops"]) == len(report.ops) > 15 and data["upload"] is None
    assert data["kernels"] == len(parsed.kernels) and data["unmodelled_share"] == pytest.approx(report.unmodelled_share)
    assert sum(k["calls"] for k in data["kinds"]) == sum(r["calls"] for r in data["ops"])
    limited = json.loads(runner.invoke(app, ["trace", str(HTA), "--hardware", A100, "--json", "--top", "3"]).output)
    assert len(limited["ops"]) == 3 and len(limited["unmodelled"]) == 3 and len(limited["kinds"]) == len(data["kinds"])
