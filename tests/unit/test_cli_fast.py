"""The ``perfmodel`` entry point's fast path (issue 25): plain ``hardware list`` and ``predict`` run without
typer and print exactly what the typer app prints; everything else goes to the typer app."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_probe import probe_script
from typer.testing import CliRunner

from perfmodel.cli import app
from perfmodel.cli_fast import run

ROOT = Path(__file__).resolve().parents[2]
H100 = "nvidia-h100-sxm5-80gb"
MATMUL = ["matmul", "m=4096", "n=4096", "k=4096", "dtype=bf16"]

SAME = [
    ["hardware", "list"],
    ["hardware", "list", "--json"],
    ["hardware", "list", "--vendor", "amd"],
    ["hardware", "list", "--kind", "tpu", "--json"],
    ["hardware", "list", "--vendor", "nvidia", "--kind", "cpu"],  # none: the header only
    ["hardware", "list", "--json", "--vendor", "nobody"],
    ["predict", H100, *MATMUL],
    ["predict", H100, *MATMUL, "--json"],
    ["predict", "--json", H100, "matmul", "--timing", "host", "m=16", "n=8192", "k=8192", "dtype=bf16"],
    ["predict", H100, *MATMUL, "--warm-cache", "--timing", "kernel", "--no-warm-cache"],
    ["predict", "amd-mi300x", "rmsnorm", "shape=16384,8192", "dtype=bf16", "--warm-cache"],
    ["predict", "google-tpu-v5p", "attention", "batch=1", "heads=8", "seq_q=128", "seq_kv=128", "head_dim=64",
     "dtype=bf16", "causal=true"],
    ["predict", H100, "allreduce", "bytes=1e8", "devices=8"],
    ["predict", H100, "matmul"],                      # errors: a missing field
    ["predict", H100, "matmul", "m"],                 # not key=value
    ["predict", H100, "nosuchop", "m=1"],             # unknown kind
    ["predict", "nosuchdevice", *MATMUL],             # unknown device (the store is asked)
    ["predict", H100, *MATMUL, "--timing", "wall"],  # bad --timing
    ["predict", H100, *MATMUL, "--calibration", "latest"],  # none stored
]


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(autouse=True)
def _data_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # an unknown device is looked up in the service's store: an empty one of the test's own
    monkeypatch.setenv("PERFMODEL_DATA_DIR", str(tmp_path_factory.getbasetemp() / "cli-fast-data"))
    monkeypatch.delenv("PERFMODEL_DATABASE_URL", raising=False)


@pytest.mark.parametrize("argv", SAME, ids=" ".join)
def test_fast_path_prints_what_the_typer_app_prints(argv: list[str], runner: CliRunner,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    status = run(argv)
    fast = capsys.readouterr()
    assert status is not None, "the fast path should handle this"
    slow = runner.invoke(app, argv)
    assert (status, fast.out, fast.err) == (slow.exit_code, slow.stdout, slow.stderr)
    assert fast.out or fast.err


@pytest.mark.parametrize("argv", [
    [], ["--help"], ["hardware"], ["hardware", "show", H100], ["hardware", "list", "--help"],
    ["hardware", "list", "--vendor=amd"], ["hardware", "list", "--vendor"], ["hardware", "list", "extra"],
    ["hardware", "list", "--vendor", "--json"], ["predict"], ["predict", H100], ["predict", H100, "matmul", "-h"],
    ["predict", H100, *MATMUL, "--bogus"], ["predict", H100, "--", "matmul", "m=-1"], ["predict", "--help"],
    ["predict", H100, *MATMUL, "--timing"], ["predict", H100, *MATMUL, "--calibration=latest"], ["demo"],
    ["search", H100, *MATMUL],
], ids=lambda argv: " ".join(argv) or "(none)")
def test_anything_else_goes_to_the_typer_app(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(argv) is None
    assert capsys.readouterr() == ("", "")


PROBE = probe_script(
    'heavy = ("typer", "click", "pydantic", "yaml", "numpy", "scipy", "sqlalchemy", "fastapi", "plotly", "rich",'
    ' "api")\n'
    'print("LOADED", sorted({m.split(".")[0] for m in sys.modules} & set(heavy)))\n')


@pytest.mark.parametrize(("argv", "loaded"), [
    (["hardware", "list"], []),
    (["hardware", "list", "--json", "--vendor", "amd"], []),
    (["predict", H100, *MATMUL], ["numpy"]),  # the device's plain copy (perfmodel.spec_cache) once written
])
def test_entry_point_imports_no_more_than_the_command_needs(argv: list[str], loaded: list[str]) -> None:
    for _ in range(2):  # the second run: predict's pickle written by the first
        out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True,
                             cwd=ROOT).stdout
    assert f"LOADED {loaded}" in out


def test_the_console_script_is_the_fast_entry_point() -> None:
    match = re.search(r'^perfmodel\s*=\s*"([\w.]+:\w+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert match is not None and match.group(1) == "perfmodel.cli_fast:main"


def test_python_m_perfmodel_runs_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m perfmodel`` (perfmodel/__main__.py) is the same command as the console script."""
    argv = ["hardware", "list", "--kind", "tpu"]
    assert run(argv) == 0
    expected = capsys.readouterr().out
    out = subprocess.run([sys.executable, "-m", "perfmodel", *argv], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert out == expected and "google-tpu-v5p" in out
