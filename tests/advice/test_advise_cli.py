"""``perfmodel advise partition|precision`` in the terminal and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from perfmodel.cli import app

GRAPH = {
    "name": "mlp",
    "tensors": [{"name": n, "shape": [256, 1024], "dtype": "bf16"} for n in ("x", "h", "y")],
    "nodes": [
        {"name": "up", "op": {"kind": "matmul", "m": 256, "n": 1024, "k": 1024, "dtype": "bf16", "b_batched": False},
         "inputs": ["x"], "outputs": ["h"], "source_op": "MatMul", "params": 1048576, "weight_bytes": 2097152.0},
        {"name": "gelu", "op": {"kind": "elementwise", "shape": [256, 1024], "dtype": "bf16"},
         "inputs": ["h"], "outputs": ["y"], "source_op": "Gelu"},
    ],
}


def test_partition_and_precision_commands(tmp_path: Path) -> None:
    path = tmp_path / "mlp.json"
    path.write_text(json.dumps(GRAPH))
    runner = CliRunner()
    text = runner.invoke(app, ["advise", "partition", str(path), "-H", "nvidia-h100-pcie-80gb",
                               "--supported-ops", "matmul"])
    assert text.exit_code == 0, text.output
    assert "1 ops fall back" in text.output and "gelu" in text.output
    as_json = runner.invoke(app, ["advise", "precision", str(path), "-H", "nvidia-h100-sxm5-80gb", "--json"])
    assert as_json.exit_code == 0, as_json.output
    out = json.loads(as_json.output)
    assert [op["node"] for op in out["ops"]] == ["up"] and "fp8 full" in out["totals"]
    bad = runner.invoke(app, ["advise", "precision", "no-such-model", "-H", "nvidia-h100-sxm5-80gb"])
    assert bad.exit_code == 2 and "error:" in bad.output
