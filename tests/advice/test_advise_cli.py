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


def test_onnx_with_a_symbolic_batch_binds_with_dim(tmp_path: Path) -> None:
    """SqueezeNet 1.1 (the onnx wheel's backend-test file, Apache-2.0) with its batch made symbolic ('N', as zoo
    exports have it): unbound, nothing is advised and the note names the dim; --dim N=8 gives all 26 convs."""
    import onnx

    model = onnx.load(str(Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"))
    weights = {t.name for t in model.graph.initializer}
    data = next(i for i in model.graph.input if i.name not in weights)
    data.type.tensor_type.shape.dim[0].dim_param = "N"
    path = tmp_path / "squeezenet_dynamic.onnx"
    onnx.save(model, str(path))
    runner = CliRunner()
    unbound = runner.invoke(app, ["advise", "precision", str(path), "-H", "nvidia-h100-sxm5-80gb"])
    assert unbound.exit_code == 0, unbound.output
    assert "0 quantizable ops" in unbound.output and "--dim N=SIZE" in unbound.output
    bound = runner.invoke(app, ["advise", "precision", str(path), "-H", "nvidia-h100-sxm5-80gb", "--dim", "N=8",
                                "--json"])
    assert bound.exit_code == 0, bound.output
    assert len(json.loads(bound.output)["ops"]) == 26
    part = runner.invoke(app, ["advise", "partition", str(path), "-H", "nvidia-h100-pcie-80gb", "--dim", "N=8",
                               "--supported-ops", "Conv,Relu,Concat,MaxPool,Dropout,Softmax"])
    assert part.exit_code == 0 and "ops fall back" in part.output and "not modelled" not in part.output
    bad = runner.invoke(app, ["advise", "partition", str(path), "-H", "nvidia-h100-pcie-80gb", "--dim", "N"])
    assert bad.exit_code == 2 and "name=size" in bad.output
