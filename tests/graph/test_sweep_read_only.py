"""``perfmodel sweep`` under PERFMODEL_READ_ONLY=1 (qa17): it stored its results (the service refuses every write in
that mode); now it exits 2 before any work unless ``--no-store``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfmodel.cli import app
from perfmodel.cli_common import open_store

ARGS = [
    "sweep",
    "--hardware",
    "nvidia-h100-sxm5-80gb",
    "--model",
    "llama-3-8b",
    "--vary",
    "levels.dram.bandwidth_bytes_per_s=x1,x2",
]


def test_read_only_refuses_a_stored_sweep_and_runs_one_not_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERFMODEL_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("PERFMODEL_DATABASE_URL", raising=False)
    monkeypatch.setenv("PERFMODEL_READ_ONLY", "1")
    refused = CliRunner().invoke(app, ARGS)
    assert refused.exit_code == 2 and "PERFMODEL_READ_ONLY=1" in refused.stderr, refused.output
    kept = CliRunner().invoke(app, [*ARGS, "--no-store"])
    assert kept.exit_code == 0 and "stored as sweep" not in kept.output, kept.output
    monkeypatch.delenv("PERFMODEL_READ_ONLY")
    assert open_store().list_sweeps() == []
