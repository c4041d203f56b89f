"""`perfmodel --help` (issue 25): plain click help that does not import rich (~0.2 s CPU of a 0.4 s start), each
command listed with its whole first paragraph."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from perfmodel import cli

PROBE = ("import sys; from perfmodel.cli import app; from typer.main import get_command\n"
         "try:\n    get_command(app)(['--help'], prog_name='perfmodel')\nexcept SystemExit:\n    pass\n"
         "print('RICH', sorted(m for m in sys.modules if m == 'rich' or m.startswith('rich.'))[:3])")


def test_help_lists_whole_first_paragraphs() -> None:
    result = CliRunner().invoke(cli.app, ["--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "predict Predict one op, e.g. `perfmodel predict nvidia-h100-sxm5-80gb matmul m=4096" in text
    assert "hardware The hardware library." in text and "╭" not in result.stdout


def test_help_does_not_import_rich() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert "Usage: perfmodel" in out and "RICH []" in out
