"""Progress on stderr (``perfmodel measure``, ``perfmodel calibrate``): a bar on a terminal, a line per 10 % step
in a log."""

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


def test_a_terminal_gets_a_bar_with_the_stage(capsys: pytest.CaptureFixture[str]) -> None:
    _drive(StderrProgress(terminal=True))
    err = capsys.readouterr().err
    assert "━" in err  # rich's bar
    assert "sweep" in err and "suite" in err and "100%" in err
    assert err.count("\n") <= 4  # redrawn in place: one bar per stage left on screen, not a line per update
