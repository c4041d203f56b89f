"""``perfmodel trace FILE --store --tag key=value``: the tags on the stored upload and its runs; bad ones refused."""

from __future__ import annotations

from pathlib import Path

from trace_builders import DATA
from typer.testing import CliRunner

from perfmodel.cli import app
from perfmodel.cli_common import open_store

A100 = "nvidia-a100-sxm4-80gb"
TRACE = DATA / "timeline_analysis__sampled_rank-0.json.gz"


def test_trace_store_with_tags(db: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["trace", str(TRACE), "--hardware", A100, "--store", "--tag", "commit=3f2a9c1",
                               "--tag", "environment=Emulator,cuda=12.4"])
    assert done.exit_code == 0, done.output
    (upload,) = open_store().list_trace_uploads()
    assert upload.tags == {"commit": "3f2a9c1", "environment": "emulator", "cuda": "12.4"}
    runs, total = open_store().list_runs(tags={"commit": "3f2a9c1"}, limit=5)
    assert total > 0 and runs[0].tags["environment"] == "emulator"


def test_bad_tags_are_refused(db: Path) -> None:
    runner = CliRunner()
    for args, message in ((["--store", "--tag", "environment=cloud"], "expected one of silicon"),
                          (["--tag", "commit=x"], "add --store")):
        done = runner.invoke(app, ["trace", str(TRACE), "--hardware", A100, *args])
        assert done.exit_code != 0 and message in done.output, done.output
