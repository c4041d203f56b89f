"""Stored traces compared by id keep their kernel names, so a changed cuDNN algorithm is *kernels changed* (as
from the files), not a regression: the ResNet-50 noise-only pair (V100, profiled twice) gates clean either way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfmodel.cli import app
from tests.compare.conftest import RESNET_0, RESNET_4, trace_path

runner = CliRunner()
V100 = "nvidia-v100-sxm2-32gb"


def _switched(data: dict[str, object]) -> list[dict[str, object]]:
    groups = data["groups"]
    assert isinstance(groups, list)
    return [g for g in groups if g["name"] == "aten::cudnn_convolution_backward" and g["change_pct"] > 20
            and g["base_calls"] >= 10]


def test_stored_noise_pair_has_kernel_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base, new = trace_path(RESNET_0), trace_path(RESNET_4)
    files = runner.invoke(app, ["compare", str(base), str(new), "--hardware", V100, "--json"])
    assert files.exit_code == 0, files.output
    monkeypatch.setenv("PERFMODEL_DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite3'}")
    for path in (base, new):
        stored = runner.invoke(app, ["trace", str(path), "--hardware", V100, "--store"])
        assert stored.exit_code == 0, stored.output
    result = runner.invoke(app, ["compare", "trace:1", "trace:2", "--json", "--fail-on-regression", "5%"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["regressions"] == 0
    for answer in (json.loads(files.output), data):
        switched = _switched(answer)
        assert len(switched) == 1 and switched[0]["verdict"] == "kernels changed", switched
        assert switched[0]["kernel_names"] and switched[0]["new_kernel_names"]
    named = [g for g in data["groups"] if g["kernel_names"]]
    assert len(named) > 0.9 * len(data["groups"])


def test_little_overlap_is_a_warning(tmp_path: Path) -> None:
    """ResNet-50 (V100) against AlexNet (A100): one 256-byte copy in common, 0.0 % of either side's time: the
    answer says so in the table, the JSON and the Markdown. The HTA ranks of one job (54 % / 51 %) do not warn."""
    from tests.compare.conftest import HTA_0, HTA_1

    alexnet = "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
    args = ["compare", str(trace_path(RESNET_0)), str(trace_path(alexnet)), "--hardware", V100,
            "--new-hardware", "nvidia-a100-sxm4-80gb"]
    md = tmp_path / "c.md"
    text = runner.invoke(app, [*args, "--markdown", str(md)])
    assert text.exit_code == 0, text.output
    assert "warning: only 0.0% of" in text.output and "same workload?" in md.read_text()
    data = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert any(w.startswith("only 0.0% of") for w in data["warnings"])
    ranks = json.loads(runner.invoke(app, ["compare", str(trace_path(HTA_0)), str(trace_path(HTA_1)),
                                           "--json"]).output)
    assert not any("same workload" in w for w in ranks["warnings"])


def test_junit_names_tell_the_groups_apart(tmp_path: Path) -> None:
    """One JUnit testcase per group with a name of its own (a CI system merges equal names: 225 groups of the
    ResNet-50 pair were 25 names), the op's parameters also in the table and the Markdown."""
    from xml.etree import ElementTree as ET

    junit, md = tmp_path / "c.xml", tmp_path / "c.md"
    result = runner.invoke(app, ["compare", str(trace_path(RESNET_0)), str(trace_path(RESNET_4)), "--hardware",
                                 V100, "--junit", str(junit), "--markdown", str(md)])
    assert result.exit_code == 0, result.output
    cases = ET.fromstring(junit.read_bytes()).findall("testcase")
    names = {(c.get("classname"), c.get("name")) for c in cases}
    assert len(cases) > 200 and len(names) == len(cases)
    assert any((c.get("name") or "").startswith("aten::conv2d [batch=32 in_channels=") for c in cases)
    assert "| shape |" in md.read_text() and "in_channels=" in result.output
