"""Stage progress of long CLI commands (issue 25): a line per stage on stderr in a log, silent for small inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfmodel import cli
from perfmodel.stage_progress import StageProgress

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "host_cpu_linear_train.pt.trace.json.gz"


def test_stages_report_their_share_done_and_reject_unknown_names(capsys: pytest.CaptureFixture[str]) -> None:
    progress = StageProgress(("parse", "match", "report"))
    progress.stage("parse")
    progress.stage("report")
    with pytest.raises(ValueError, match="not one of"):
        progress.stage("upload")
    progress.end()
    progress.close()  # twice is fine
    assert capsys.readouterr().err.splitlines() == ["parse:   0%", "report:  67%", "done: 100%"]


def test_quiet_progress_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    progress = StageProgress(("parse",), quiet=True)
    progress.stage("parse")
    progress.end()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("big", [False, True])
def test_trace_command_shows_stages_for_big_files(monkeypatch: pytest.MonkeyPatch, big: bool) -> None:
    monkeypatch.setattr(cli, "BIG_TRACE_BYTES", 0 if big else 1 << 40)
    result = CliRunner().invoke(cli.app, ["trace", str(TRACE), "--hardware", "nvidia-a100-sxm4-80gb"])
    assert result.exit_code == 0, result.output
    stages = [line.split(":")[0] for line in result.stderr.splitlines() if line.endswith("%")]
    assert stages == (["parse", "match", "report", "done"] if big else [])
