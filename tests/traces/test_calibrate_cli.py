"""``perfmodel calibrate``: a stored trace's runs fitted into a new calibration, the kernel engineer's loop offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trace_builders import KinetoTrace
from typer.testing import CliRunner

import perfmodel
from perfmodel.cli import app
from perfmodel.cli_common import open_store

A100 = "nvidia-a100-sxm4-80gb"
SLOWER = 1.3  # the "silicon" runs every GEMM 1.3x slower than the uncalibrated model says


def _gemm_trace(path: Path) -> None:
    """24 distinct fp32 GEMMs, each kernel SLOWER x the model's time."""
    shapes = [(m, n, 1024) for m in (256, 512, 1024, 2048, 4096, 8192) for n in (256, 1024, 2048, 4096)]
    model_s = perfmodel.predict_many(A100, [{"kind": "matmul", "m": m, "n": n, "k": k, "dtype": "fp32"}
                                            for m, n, k in shapes]).time_s
    trace = KinetoTrace()
    t = 0.0
    for (m, n, k), seconds in zip(shapes, model_s, strict=True):
        dur_us = float(seconds) * SLOWER * 1e6
        external = trace.op("aten::mm", t, dur_us + 20.0, dims=[[m, k], [k, n]], types=["float", "float"])
        trace.kernel("ampere_sgemm_128x64_nn", t + 1.0, t + 10.0, dur_us, external=external)
        t += dur_us + 50.0
    path.write_bytes(trace.to_bytes())


def test_store_calibrate_then_predict_with_the_latest(db: Path) -> None:
    runner = CliRunner()
    trace = db / "gemms.pt.trace.json"
    _gemm_trace(trace)
    stored = runner.invoke(app, ["trace", str(trace), "--hardware", A100, "--store"])
    assert stored.exit_code == 0 and "stored as trace upload 1" in stored.output, stored.output
    fitted = runner.invoke(app, ["calibrate", "--hardware", A100, "--trace", "1", "--notes", "test"])
    assert fitted.exit_code == 0, fitted.output
    assert "calibration 1 of 'nvidia-a100-sxm4-80gb' stored" in fitted.output
    # progress on stderr (a log here, not a terminal): each stage once, a line per 10 % step, in order
    stages = [line.rsplit(":", 1)[0] for line in fitted.stderr.splitlines() if line.endswith("%")]
    assert stages[0] == "loading runs" and stages[-2:] == ["done", "storing"], fitted.stderr
    assert {"model", "hardware", "classes"} <= set(stages)
    fractions = [int(line.rsplit(" ", 1)[1][:-1]) for line in fitted.stderr.splitlines() if line.endswith("%")]
    assert fractions == sorted(fractions) and fractions[-1] == 100
    assert "loading runs" not in fitted.stdout  # stdout keeps the report alone
    assert "residual trees over the fitted classes (24 distinct ops): not kept: fewer than 50" in fitted.output
    jobs = open_store().list_jobs(kind="calibration")  # the command's fit is a job, as the API's
    assert [(j.status, j.result_id, j.request["filter"]) for j in jobs] == [("succeeded", 1, {"trace_upload_id": 1})]
    gemm_line = next(line for line in fitted.output.splitlines() if line.startswith("gemm:fp32"))
    assert gemm_line.split()[1] == "24" and "fitted" in gemm_line
    report = json.loads(runner.invoke(app, ["calibrate", "--hardware", A100, "--trace", "1", "--json"]).stdout)
    assert report["id"] == 2 and report["report"]["runs_used"] == 24
    assert report["report"]["filter"] == {"trace_upload_id": 1}
    gemm = report["report"]["classes"]["gemm:fp32"]
    assert gemm["uncalibrated"]["median_abs_pct"] == pytest.approx(100 * (1 - 1 / SLOWER), abs=0.5)
    assert gemm["cv"]["median_abs_pct"] < 2.0  # a plain 1.3x is learnt and carries to held-out folds
    predicted = runner.invoke(app, ["predict", A100, "matmul", "m=3000", "n=3000", "k=1024", "dtype=fp32",
                                    "--calibration", "latest", "--json"])
    assert predicted.exit_code == 0, predicted.output
    model_s = perfmodel.predict(A100, {"kind": "matmul", "m": 3000, "n": 3000, "k": 1024, "dtype": "fp32"}).time_s
    assert json.loads(predicted.output)["time_s"] == pytest.approx(model_s * SLOWER, rel=0.05)


def test_calibrate_refuses_what_it_cannot_fit(db: Path) -> None:
    runner = CliRunner()
    none = runner.invoke(app, ["calibrate", "--hardware", A100])
    assert none.exit_code == 2 and "no stored runs of 'nvidia-a100-sxm4-80gb' match" in none.output
    unknown = runner.invoke(app, ["calibrate", "--hardware", "no-such-gpu"])
    assert unknown.exit_code == 2 and "unknown hardware" in unknown.output
    base = runner.invoke(app, ["calibrate", "--hardware", A100, "--base", "99"])
    assert base.exit_code == 2 and "no calibration 99" in base.output
    failed = [(j.status, j.error) for j in open_store().list_jobs(kind="calibration")]
    assert failed == [("failed", "no calibration 99"), ("failed", f"filter: no stored runs of {A100!r} match; store "
                      "runs or upload a trace first, or seed from a related device with a base calibration")]


@pytest.mark.parametrize("args", [["calibrate", "--hardware", A100], ["measure", "--quick"],
                                  ["token", "create", "--name", "ci"], ["token", "revoke", "--name", "ci"]])
def test_read_only_refuses_the_commands_that_write(db: Path, monkeypatch: pytest.MonkeyPatch,
                                                   args: list[str]) -> None:
    """PERFMODEL_READ_ONLY=1 (the service refuses every write) is honoured by the commands that write to the same
    store: exit 2 before any work, nothing stored."""
    monkeypatch.setenv("PERFMODEL_READ_ONLY", "1")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "PERFMODEL_READ_ONLY=1" in result.stderr, result.output
    monkeypatch.delenv("PERFMODEL_READ_ONLY")
    store = open_store()
    assert store.list_jobs(kind="calibration") == [] and store.list_tokens() == []


def test_read_only_refuses_trace_store_but_reads_offline(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = db / "gemms.pt.trace.json"
    _gemm_trace(trace)
    monkeypatch.setenv("PERFMODEL_READ_ONLY", "1")
    runner = CliRunner()
    refused = runner.invoke(app, ["trace", str(trace), "--hardware", A100, "--store"])
    assert refused.exit_code == 2 and "PERFMODEL_READ_ONLY=1" in refused.stderr, refused.output
    offline = runner.invoke(app, ["trace", str(trace), "--hardware", A100])  # a read: still works
    assert offline.exit_code == 0, offline.output
    monkeypatch.delenv("PERFMODEL_READ_ONLY")
    assert open_store().list_trace_uploads() == []
