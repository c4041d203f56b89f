"""hardware_specs/index.json (perfmodel.spec_index, issue 25): what the full load gives, used only while every
spec file is listed with its hash; `hardware list` prints the same from it as from the full load."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfmodel import spec_index, specs
from perfmodel.cli import app
from perfmodel.cli_fast import hardware_list_text

BUNDLED = spec_index.bundled_dir_name()


def test_committed_index_is_the_full_load() -> None:
    committed = (Path(BUNDLED) / spec_index.INDEX_NAME).read_text()
    assert committed == specs.index_file_text(BUNDLED), \
        "hardware_specs/index.json is out of date: perfmodel hardware index"


def test_index_lists_every_device_of_the_library() -> None:
    index = spec_index.read_index(BUNDLED)
    assert index is not None
    assert [d["id"] for d in index["devices"]] == specs.list_hardware()
    for device in index["devices"]:
        assert specs.load_spec_file(Path(BUNDLED, device["file"])).id == device["id"]


@pytest.mark.parametrize(("vendor", "kind", "as_json"), [
    (None, None, False), (None, None, True), ("amd", None, False), (None, "tpu", True), ("intel", "cpu", False),
    ("nobody", None, True),
])
def test_hardware_list_from_the_index_is_the_full_load(monkeypatch: pytest.MonkeyPatch, vendor: str | None,
                                                       kind: str | None, as_json: bool) -> None:
    assert spec_index.current_index() is not None
    fast = hardware_list_text(vendor, kind, as_json)
    monkeypatch.setattr(spec_index, "current_index", lambda: None)
    assert hardware_list_text(vendor, kind, as_json) == fast


def test_indexed_data_validate_to_the_yaml_files() -> None:
    for name in spec_index.spec_file_names(BUNDLED):
        data = spec_index.indexed_spec(BUNDLED, name)
        from_yaml = specs.load_spec_file(Path(BUNDLED, name))
        assert data == specs.read_spec_file(Path(BUNDLED, name))
        from_index = specs.parse_spec(data, name)
        assert from_index == from_yaml and from_index.content_hash == from_yaml.content_hash


def test_load_hardware_reads_one_file_and_shares_it_with_the_library() -> None:
    one = specs.load_hardware("nvidia-h100-sxm5-80gb")
    assert one is specs.library()["nvidia-h100-sxm5-80gb"]
    assert spec_index.device_file("nvidia-h100-sxm5-80gb") == "nvidia/h100-sxm5-80gb.yaml"
    assert spec_index.device_file("nosuchdevice") is None
    with pytest.raises(KeyError, match="unknown hardware"):
        specs.load_hardware("nosuchdevice")


@pytest.fixture
def library_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "specs"
    shutil.copytree(BUNDLED, directory)
    monkeypatch.setenv(spec_index.SPECS_DIR_ENV, str(directory))
    return directory


def test_a_copied_library_uses_its_index(library_copy: Path) -> None:
    assert spec_index.read_index(str(library_copy)) == spec_index.read_index(BUNDLED)


@pytest.mark.parametrize("change", ["edit", "add", "remove", "version", "corrupt", "missing"])
def test_an_out_of_date_index_is_not_used(library_copy: Path, change: str) -> None:
    h100 = library_copy / "nvidia" / "h100-sxm5-80gb.yaml"
    index_file = library_copy / spec_index.INDEX_NAME
    if change == "edit":  # a number changes: the full load shows it
        text = h100.read_text()
        h100.write_text(text.replace("units: 132", "units: 131"))
        assert h100.read_text() != text
    elif change == "add":
        shutil.copy(h100, library_copy / "nvidia" / "h100-sxm5-80gb-copy.yaml")
    elif change == "remove":
        h100.unlink()
    elif change == "version":
        index = json.loads(index_file.read_text())
        index_file.write_text(json.dumps({**index, "version": spec_index.VERSION + 1}))
    elif change == "corrupt":
        index_file.write_text("{")
    else:
        index_file.unlink()
    assert spec_index.read_index(str(library_copy)) is None
    if change == "edit":
        rows = {r["id"]: r for r in json.loads(hardware_list_text(None, None, True))}
        assert rows["nvidia-h100-sxm5-80gb"]["units"] == 131
        assert specs.load_hardware("nvidia-h100-sxm5-80gb").units == 131


def test_hardware_index_command_rewrites_an_out_of_date_index(library_copy: Path) -> None:
    runner = CliRunner()
    h100 = library_copy / "nvidia" / "h100-sxm5-80gb.yaml"
    h100.write_text(h100.read_text().replace("units: 132", "units: 131"))
    checked = runner.invoke(app, ["hardware", "index", "--check"])
    assert checked.exit_code == 2 and "out of date" in checked.stderr
    assert spec_index.read_index(str(library_copy)) is None
    written = runner.invoke(app, ["hardware", "index"])
    assert written.exit_code == 0 and "wrote" in written.stdout
    index = spec_index.read_index(str(library_copy))
    assert index is not None
    assert {d["id"]: d["units"] for d in index["devices"]}["nvidia-h100-sxm5-80gb"] == 131
    again = runner.invoke(app, ["hardware", "index", "--check"])
    assert again.exit_code == 0 and again.stdout == ""
