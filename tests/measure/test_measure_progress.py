"""``perfmodel measure`` progress: rewritten in place on a terminal, a line per 10 % step in a log."""

from __future__ import annotations

import pytest

from perfmodel.measure.command import StderrProgress


def _drive(progress: StderrProgress) -> None:
    for stage in ("sweep", "suite"):
        for i in range(201):
            progress(stage, i / 200)
        progress.end()


def test_a_log_gets_one_line_per_step_and_stage(capsys: pytest.CaptureFixture[str]) -> None:
    _drive(StderrProgress(terminal=False))
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert lines[0] == "sweep:   0%" and lines[-1] == "suite: 100%"
    assert len(lines) == 2 * 11  # 0 %, 10 %, ..., 100 % per stage, no blank lines
    assert [line.split()[-1] for line in lines[:11]] == [f"{10 * i}%" for i in range(11)]


def test_a_terminal_gets_one_rewritten_line_per_stage(capsys: pytest.CaptureFixture[str]) -> None:
    _drive(StderrProgress(terminal=True))
    err = capsys.readouterr().err
    assert err.count("\r") == 2 * 201
    assert err.count("\n") == 2  # each stage's line closed once
    assert err.rstrip().endswith("suite: 100%")
