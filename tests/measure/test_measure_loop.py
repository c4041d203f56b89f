"""`perfmodel measure --quick` end to end: spec registered, trace uploaded, calibration stored and used."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfmodel.cli import app
from perfmodel.store import Store


def test_measure_registers_uploads_and_calibrates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFMODEL_DATA_DIR", str(tmp_path / "var"))
    monkeypatch.delenv("PERFMODEL_DATABASE_URL", raising=False)
    runner = CliRunner()
    result = runner.invoke(app, ["measure", "--quick", "--out", str(tmp_path / "measure")])
    assert result.exit_code == 0, result.output
    assert "all scored shapes" in result.output and "is now the latest of 'host'" in result.output
    calibrating = result.stderr.split("uploading the trace and calibrating ...", 1)[1].splitlines()
    stages = [line.rsplit(":", 1)[0] for line in calibrating if line.endswith("%")]
    assert stages[0] == "uploading" and stages[-1] == "storing"
    assert "split fit: classes" in stages and "fit: classes" in stages  # the two fits' stages, in the bar
    store = Store(f"sqlite:///{tmp_path / 'var' / 'perfmodel.sqlite3'}")
    try:
        host = store.get_hardware("host")
        assert host is not None and host.spec["kind"] == "cpu"
        assert "measured by perfmodel measure" in host.spec["source"]
        (upload,) = store.list_trace_uploads("host")
        assert upload.status == "parsed" and upload.format == "pytorch_kineto"
        runs, total = store.list_runs(hardware_id="host", trace_upload_id=upload.id)
        assert total > 20 and {r.op_kind for r in runs} >= {"matmul", "elementwise", "softmax"}
        calibration = store.latest_calibration("host")
        assert calibration is not None and calibration.fit_report["runs_used"] == total
        assert calibration.fit_report["held_out_median_abs_pct"] > 0
        # the stored calibration was fitted as a job (as perfmodel calibrate's), listed with its result
        (job,) = store.list_jobs(kind="calibration")
        assert job.status == "succeeded" and job.result_id == calibration.id and job.progress == 1.0
        assert job.request["filter"] == {"trace_upload_id": upload.id} and job.request["space"] == "full"
    finally:
        store.dispose()
    plain = runner.invoke(app, ["predict", "host", "matmul", "m=512", "n=512", "k=512", "dtype=fp32", "--json"])
    calibrated = runner.invoke(app, ["predict", "host", "matmul", "m=512", "n=512", "k=512", "dtype=fp32", "--json",
                                     "--calibration", "latest"])
    assert plain.exit_code == 0 and calibrated.exit_code == 0, calibrated.output
    assert '"interval_s": null' in plain.output and '"interval_s": null' not in calibrated.output
