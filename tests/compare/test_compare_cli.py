"""``perfmodel compare``: exit codes, JSON, JUnit XML and Markdown, as a CI job would use them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from typer.testing import CliRunner

from perfmodel.cli import app
from tests.compare.conftest import HTA_0, HTA_1, trace_path

runner = CliRunner()


def _slowed_copy(src: Path, dst: Path, op_name: str, factor: float) -> None:
    """A Kineto trace with every kernel launched under ``op_name`` slowed by ``factor`` (durations in µs)."""
    data = json.loads(gzip.decompress(src.read_bytes()))
    events = data["traceEvents"]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("cat") in ("cpu_op", "operator") and e.get("name") == op_name and "dur" in e]
    launches = {e["args"]["correlation"] for e in events
                if e.get("cat") in ("cuda_runtime", "runtime") and "correlation" in e.get("args", {})
                and any(a <= e["ts"] <= b for a, b in spans)}
    for e in events:
        if e.get("cat") == "kernel" and e.get("args", {}).get("correlation") in launches:
            e["dur"] = e["dur"] * factor
    dst.write_bytes(gzip.compress(json.dumps(data).encode()))


def test_noise_pair_passes_the_gate(tmp_path: Path) -> None:
    junit, md = tmp_path / "c.xml", tmp_path / "c.md"
    result = runner.invoke(app, ["compare", str(trace_path(HTA_0)), str(trace_path(HTA_1)), "--junit", str(junit),
                                 "--markdown", str(md)])
    assert result.exit_code == 0, result.output
    assert "0 regressions beyond 5%" in result.output
    suite = ET.fromstring(junit.read_bytes())
    cases = suite.findall("testcase")
    assert len(cases) > 50 and suite.get("failures") == "0" and suite.get("tests") == str(len(cases))
    assert md.read_text().startswith("## ✅ perfmodel compare: 0 regression(s)")


def test_injected_slowdown_fails_the_gate(tmp_path: Path) -> None:
    base = trace_path(HTA_0)
    slowed = tmp_path / "slowed.json.gz"
    _slowed_copy(base, slowed, "aten::layer_norm", 1.3)
    junit = tmp_path / "c.xml"
    result = runner.invoke(app, ["compare", str(base), str(slowed), "--fail-on-regression", "10%", "--json",
                                 "--junit", str(junit)])
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    flagged = [g for g in data["groups"] if g["verdict"] == "regression"]
    assert flagged and {g["name"] for g in flagged} == {"aten::layer_norm"}
    assert all(25 <= g["change_pct"] <= 35 for g in flagged)
    failures = ET.fromstring(junit.read_bytes()).findall("testcase/failure")
    assert len(failures) == len(flagged) == data["regressions"]
    ok = runner.invoke(app, ["compare", str(base), str(slowed), "--fail-on-regression", "50%"])
    assert ok.exit_code == 0, ok.output


def test_bad_input_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    base = str(trace_path(HTA_0))
    for args, message in (([base, str(broken)], "broken.json"), ([base, str(tmp_path / "none.json")], "no such file"),
                          ([base, base, "--fail-on-regression", "five"], "threshold"),
                          ([base, base, "--hardware", "no-such-device"], "unknown hardware"),
                          ([base, "trace:x"], "trace:ID")):
        result = runner.invoke(app, ["compare", *args])
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output


def test_stored_traces_by_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``trace:ID`` reads a stored upload's runs and its device: two ranks stored for two devices."""
    monkeypatch.setenv("PERFMODEL_DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite3'}")
    for name, hw in ((HTA_0, "nvidia-h100-sxm5-80gb"), (HTA_1, "nvidia-a100-sxm4-80gb")):
        stored = runner.invoke(app, ["trace", str(trace_path(name)), "--hardware", hw, "--store"])
        assert stored.exit_code == 0, stored.output
    result = runner.invoke(app, ["compare", "trace:1", "trace:2", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["base_hardware"], data["new_hardware"]) == ("nvidia-h100-sxm5-80gb", "nvidia-a100-sxm4-80gb")
    assert data["groups"] and data["regressions"] == 0
    assert any(g["expected_ratio"] is not None and abs(g["expected_ratio"] - 1) > 0.05 for g in data["groups"])
    missing = runner.invoke(app, ["compare", "trace:1", "trace:9"])
    assert missing.exit_code == 2 and "no stored trace 9" in missing.output


def test_comparing_files_does_not_import_the_store() -> None:
    """Two trace files compare without the store (SQLAlchemy and the migrations: ~0.4 s CPU of every run);
    ``perfmodel compare`` as a console script runs, in a fresh interpreter."""
    import os
    import subprocess
    import sys

    code = ("import sys\nfrom perfmodel.cli_fast import main\n"
            f"sys.argv = ['perfmodel', 'compare', {str(trace_path(HTA_0))!r}, {str(trace_path(HTA_1))!r}]\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\nelse:\n    code = 0\n"
            "print('STORE', 'perfmodel.store' in sys.modules, 'EXIT', code)\n")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert "0 regressions beyond 5%" in done.stdout, done.stdout + done.stderr
    assert "STORE False EXIT 0" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
