"""The ``perfmodel`` command, run in-process with typer's CliRunner."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import perfmodel
from perfmodel.cli import app, parse_value
from perfmodel.specs import schema_text

MATMUL = ["matmul", "m=1024", "n=1024", "k=1024", "dtype=bf16"]


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


def test_no_args_shows_help(runner: CliRunner) -> None:
    result = runner.invoke(app, [])
    assert "hardware" in result.output and "predict" in result.output


def test_hardware_list(runner: CliRunner) -> None:
    result = runner.invoke(app, ["hardware", "list"])
    assert result.exit_code == 0, result.output
    for hardware_id in perfmodel.list_hardware():
        assert hardware_id in result.output


def test_hardware_list_json(runner: CliRunner) -> None:
    result = runner.invoke(app, ["hardware", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["id"] for r in rows] == perfmodel.list_hardware()
    for row in rows:
        assert {"id", "name", "vendor", "kind", "units", "dram_bandwidth_bytes_per_s",
                "peak_flops_per_s"} <= set(row)
        assert row["units"] > 0
    a100 = next(r for r in rows if r["id"] == "nvidia-a100-sxm4-80gb")
    assert a100["peak_flops_per_s"]["bf16"] == pytest.approx(312e12)
    assert a100["dram_bandwidth_bytes_per_s"] == pytest.approx(2.039e12)


def test_hardware_list_filters(runner: CliRunner) -> None:
    result = runner.invoke(app, ["hardware", "list", "--vendor", "amd", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert rows and all(r["vendor"] == "amd" for r in rows)
    result = runner.invoke(app, ["hardware", "list", "--kind", "tpu", "--json"])
    assert {r["kind"] for r in json.loads(result.output)} == {"tpu"}


def test_hardware_show(runner: CliRunner) -> None:
    result = runner.invoke(app, ["hardware", "show", "nvidia-a100-sxm4-80gb"])
    assert result.exit_code == 0, result.output
    hw = perfmodel.load_hardware("nvidia-a100-sxm4-80gb")
    assert hw.name in result.output
    assert "source:" in result.output
    assert hw.content_hash in result.output
    for level in hw.levels:
        assert level.name in result.output


def test_hardware_show_json(runner: CliRunner) -> None:
    result = runner.invoke(app, ["hardware", "show", "nvidia-a100-sxm4-80gb", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    hw = perfmodel.load_hardware("nvidia-a100-sxm4-80gb")
    assert data["content_hash"] == hw.content_hash
    assert data["id"] == hw.id


def test_hardware_show_unknown_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(app, ["hardware", "show", "nvidia-zz9000"])
    assert result.exit_code == 2
    assert "unknown hardware 'nvidia-zz9000'" in result.output
    assert "Traceback" not in result.output


def test_hardware_schema(runner: CliRunner) -> None:
    result = runner.invoke(app, ["hardware", "schema"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    assert schema["title"] == "perfmodel hardware spec"
    assert "levels" in schema["properties"]
    assert result.output == schema_text()


def test_predict_json(runner: CliRunner) -> None:
    result = runner.invoke(app, ["predict", "nvidia-a100-sxm4-80gb", *MATMUL, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {"time_s", "bound", "flops", "intensity_flops_per_byte"} <= set(data)
    assert data["time_s"] > 0
    assert data["flops"] == 2 * 1024**3
    assert data["intensity_flops_per_byte"] > 0
    assert isinstance(data["bound"], str) and data["bound"]
    assert data["hardware_id"] == "nvidia-a100-sxm4-80gb"
    direct = perfmodel.predict("nvidia-a100-sxm4-80gb", perfmodel.make_op(
        {"kind": "matmul", "m": 1024, "n": 1024, "k": 1024, "dtype": "bf16"}))
    assert data["time_s"] == pytest.approx(direct.time_s)


def test_predict_text(runner: CliRunner) -> None:
    result = runner.invoke(app, ["predict", "nvidia-a100-sxm4-80gb", *MATMUL])
    assert result.exit_code == 0, result.output
    assert "matmul on nvidia-a100-sxm4-80gb" in result.output
    assert "bound by" in result.output


def test_predict_host_timing_is_not_faster(runner: CliRunner) -> None:
    kernel = json.loads(runner.invoke(app, ["predict", "nvidia-a100-sxm4-80gb", *MATMUL, "--json"]).output)
    host = json.loads(runner.invoke(
        app, ["predict", "nvidia-a100-sxm4-80gb", *MATMUL, "--timing", "host", "--json"]).output)
    assert host["time_s"] >= kernel["time_s"]


def test_predict_bad_dtype_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(app, ["predict", "nvidia-a100-sxm4-80gb", "matmul", "m=1024", "n=1024",
                                 "k=1024", "dtype=fp7"])
    assert result.exit_code == 2
    assert "dtype" in result.output and "fp7" in result.output
    assert "Traceback" not in result.output


def test_predict_missing_field_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(app, ["predict", "nvidia-a100-sxm4-80gb", "matmul", "m=1024", "dtype=bf16"])
    assert result.exit_code == 2
    assert "'n'" in result.output


def test_predict_unknown_hardware_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(app, ["predict", "nvidia-zz9000", *MATMUL])
    assert result.exit_code == 2
    assert "unknown hardware 'nvidia-zz9000'" in result.output


def test_predict_unknown_kind_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(app, ["predict", "nvidia-a100-sxm4-80gb", "conv3d", "batch=1"])
    assert result.exit_code == 2
    assert "conv3d" in result.output


def test_predict_malformed_assignment_exits_2(runner: CliRunner) -> None:
    result = runner.invoke(app, ["predict", "nvidia-a100-sxm4-80gb", "matmul", "m1024"])
    assert result.exit_code == 2
    assert "key=value" in result.output


def test_predict_list_values(runner: CliRunner) -> None:
    result = runner.invoke(app, ["predict", "nvidia-h100-sxm5-80gb", "rmsnorm", "shape=4096,8192",
                                 "dtype=bf16", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["time_s"] > 0


def test_parse_value() -> None:
    assert parse_value("8") == 8
    assert parse_value("true") is True
    assert parse_value("8,4096") == [8, 4096]
    assert parse_value("[1, 2]") == [1, 2]
    assert parse_value("bf16") == "bf16"


def test_demo(runner: CliRunner) -> None:
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    assert "nvidia-a100-sxm4-80gb" in result.output
    assert "matmul" in result.output
    assert "all-reduce" in result.output
