"""Calibration from a real trace matched kernel-first, end to end: upload -> runs -> calibration -> better
predictions (the PyTorch 1.9 ResNet-50 trace on a V100: its convolutions get their strides from the fwd/bwd link,
its backward convolutions and batch norms from the cuDNN ops' shapes)."""

from __future__ import annotations

import json
from pathlib import Path

from trace_builders import DATA
from typer.testing import CliRunner

from perfmodel.cli import app

V100 = "nvidia-v100-sxm2-32gb"
RESNET = DATA / "kineto_resnet50_num_workers_0__worker0.1623143566756.pt.trace.json.gz"


def test_a_real_trace_calibrates_its_device_and_the_calibration_predicts_better(db: Path) -> None:
    runner = CliRunner()
    stored = runner.invoke(app, ["trace", str(RESNET), "--hardware", V100, "--store", "--json"])
    assert stored.exit_code == 0, stored.output
    fitted = runner.invoke(app, ["calibrate", "--hardware", V100, "--trace", "1", "--json"])
    assert fitted.exit_code == 0, fitted.output
    report = json.loads(fitted.stdout)["report"]
    assert report["runs_used"] > 1000
    convs = [c for name, c in report["classes"].items() if name.startswith("conv")]
    # held-out folds: a class's correction is never worse than the uncalibrated model on runs it was not fitted to
    # (a class the model already fits, V100 forward convolutions at 5.3 %, keeps form 'none'), and it beats the
    # model on at least one convolution class (the backward ones)
    assert len(convs) == 2
    assert all(c["cv"]["median_abs_pct"] <= c["uncalibrated"]["median_abs_pct"] for c in convs)
    assert any(c["cv"]["median_abs_pct"] < c["uncalibrated"]["median_abs_pct"] for c in convs)
    calibrated = runner.invoke(app, ["trace", str(RESNET), "--hardware", V100, "--calibration", "latest", "--json"])
    uncalibrated = runner.invoke(app, ["trace", str(RESNET), "--hardware", V100, "--json"])
    errors = [{k["kind"]: k["median_abs_error_pct"] for k in json.loads(r.stdout)["kinds"]}
              for r in (uncalibrated, calibrated)]
    assert errors[1]["conv2d"] < errors[0]["conv2d"]
