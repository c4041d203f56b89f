"""Progress of ``perfmodel estimate`` (issue 25): each stage heard in order with its share done; a bar on stderr
for big model files only, stdout unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfmodel import cli
from perfmodel.graph import cli as graph_cli
from perfmodel.graph.llm_build import LlmWorkload
from perfmodel.graph.loader import estimate_model
from perfmodel.graph.parallel import Parallelism

H100 = "nvidia-h100-sxm5-80gb"
STAGES = ("build", "fuse", "compile", "cost", "schedule", "memory", "report")


def test_llm_estimate_reports_every_stage_of_both_phases_in_order() -> None:
    heard: list[tuple[str, float]] = []
    plain = estimate_model("gpt2", H100, LlmWorkload(batch=2, prompt_tokens=256), Parallelism(), "both",
                           detail=False)
    out = estimate_model("gpt2", H100, LlmWorkload(batch=2, prompt_tokens=256), Parallelism(), "both",
                         detail=False, progress=lambda stage, fraction: heard.append((stage, fraction)))
    assert [s for s, _ in heard] == ["load"] + [f"{p}: {s}" for p in ("prefill", "decode") for s in STAGES]
    fractions = [f for _, f in heard]
    assert fractions == sorted(fractions) and len(set(fractions)) == len(fractions)
    assert fractions[0] == 0.0 and fractions[-1] < 1.0
    assert out["summary"] == plain["summary"]  # listening changes nothing


def _graph_file(tmp_path: Path) -> Path:
    nodes = [{"name": f"gemm{i}", "op": {"kind": "matmul", "m": 256 + i % 7, "n": 1024, "k": 1024, "dtype": "bf16"}}
             for i in range(40)]
    path = tmp_path / "graph.json"
    path.write_text(json.dumps({"name": "gemms", "nodes": nodes}))
    return path


@pytest.mark.parametrize("big", [False, True])
def test_estimate_command_shows_stages_for_big_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     big: bool) -> None:
    monkeypatch.setattr(graph_cli, "BIG_GRAPH_BYTES", 0 if big else 1 << 40)
    result = CliRunner().invoke(cli.app, ["estimate", str(_graph_file(tmp_path)), "-H", H100, "--json"])
    assert result.exit_code == 0, result.output
    stages = [line.rsplit(":", 1)[0] for line in result.stderr.splitlines() if line.endswith("%")]
    assert stages == (["load", "fuse", "compile", "cost", "schedule", "memory", "report"] if big else [])
    assert json.loads(result.stdout)["step_time_s"] > 0  # stdout holds the JSON alone
