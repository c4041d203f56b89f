"""``perfmodel predict``'s pre-validated bundled devices (perfmodel.spec_cache, issue 25): it prints byte for
byte what the validated path prints, on every bundled device, cold (validated, pickle written) and warm (plain
copies from the pickle); the pickle is used only while its key matches and only for the bundled library; a warm
``predict`` imports no pydantic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_probe import probe_script

from perfmodel import cli_fast, spec_cache, specs
from perfmodel.hardware_methods import PlainHardware, plain_copy

ROOT = Path(__file__).resolve().parents[2]
H100 = "nvidia-h100-sxm5-80gb"
DEVICES = specs.list_hardware()
OPS = [
    ["matmul", "m=4096", "n=4096", "k=4096", "dtype=bf16"],
    ["matmul", "m=16", "n=8192", "k=8192", "dtype=bf16"],
    ["attention", "batch=4", "heads=32", "kv_heads=8", "seq_q=4096", "seq_kv=4096", "head_dim=128", "causal=true",
     "dtype=bf16"],
    ["rmsnorm", "shape=16384,8192", "dtype=bf16"],
    ["allreduce", "bytes=256e6", "devices=8"],
    ["conv2d", "batch=32", "in_channels=64", "out_channels=128", "height=56", "width=56",
     "kernel_h=3", "kernel_w=3", "padding=1", "dtype=bf16"],
    ["softmax", "shape=4096,32000", "dtype=fp32"],
]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(spec_cache.CACHE_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(specs.SPECS_DIR_ENV, raising=False)
    return tmp_path


def _outputs(device: str) -> list[str]:
    return [cli_fast.predict_text(device, op[0], op[1:], as_json=as_json) for op in OPS for as_json in (False, True)]


@pytest.mark.parametrize("device", DEVICES)
def test_predict_output_is_the_validated_paths_byte_for_byte(device: str, cache: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:  # the full path: validated, no pickle
        patch.setattr(spec_cache, "bundled_plain", lambda hardware_id: None)
        full = _outputs(device)
    cold = _outputs(device)  # validated here, pickle written
    assert [p.name.split("-")[0] for p in cache.iterdir()] == ["hardware"]

    def no_validation(hardware_id: str) -> None:
        raise AssertionError("validated although the pickle is current")

    monkeypatch.setattr(specs, "load_hardware", no_validation)
    spec_cache_read = spec_cache.bundled_plain(device)
    assert isinstance(spec_cache_read, PlainHardware) and spec_cache_read.id == device
    warm = _outputs(device)  # from the pickle
    assert "\n".join(warm).encode() == "\n".join(full).encode() == "\n".join(cold).encode()


def test_the_key_follows_the_spec_file_and_an_old_pickle_goes(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = spec_cache.bundled_plain(H100)
    [old] = list(cache.iterdir())
    monkeypatch.setattr(spec_cache, "_bundled_file_hash", lambda hardware_id: "0" * 64)  # the file was edited
    second = spec_cache.bundled_plain(H100)
    [new] = list(cache.iterdir())
    assert new != old and first is not None and second is not None and second.id == H100
    assert spec_cache.cache_key("0" * 64) != spec_cache.cache_key("1" * 64)


def test_a_damaged_or_foreign_pickle_is_validated_again(cache: Path) -> None:
    expected = cli_fast.predict_text(H100, "matmul", OPS[0][1:])
    [path] = list(cache.iterdir())
    for junk in (b"not a pickle", path.read_bytes()[:100]):
        path.write_bytes(junk)
        assert cli_fast.predict_text(H100, "matmul", OPS[0][1:]) == expected
        assert path.read_bytes() != junk  # rewritten
    other = spec_cache.bundled_plain("amd-mi300x")
    assert other is not None
    [mi300x] = [p for p in cache.iterdir() if "mi300x" in p.name]
    path.write_bytes(mi300x.read_bytes())  # another device's pickle under this name
    hardware = spec_cache.bundled_plain(H100)
    assert hardware is not None and hardware.id == H100


def test_not_used_for_a_users_library_an_unknown_id_or_an_unwritable_cache(cache: Path, tmp_path_factory:
                                                                        pytest.TempPathFactory,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert spec_cache.bundled_plain("nosuchdevice") is None
    user = tmp_path_factory.mktemp("user-specs")
    monkeypatch.setenv(specs.SPECS_DIR_ENV, str(user))
    assert spec_cache.bundled_plain(H100) is None
    monkeypatch.delenv(specs.SPECS_DIR_ENV)
    blocked = cache / "file"
    blocked.write_text("")
    monkeypatch.setenv(spec_cache.CACHE_DIR_ENV, str(blocked / "below-a-file"))
    hardware = spec_cache.bundled_plain(H100)  # validated; nothing written, no error
    assert hardware is not None and hardware.id == H100


PROBE = probe_script('print("PYDANTIC", "pydantic" in sys.modules)\n')


def test_a_warm_predict_imports_no_pydantic(cache: Path) -> None:
    argv = [sys.executable, "-c", PROBE, "predict", H100, *OPS[0], "--json"]
    env = {**os.environ, spec_cache.CACHE_DIR_ENV: str(cache)}
    cold = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT, env=env).stdout
    warm = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT, env=env).stdout
    assert cold.endswith("PYDANTIC True\n") and warm.endswith("PYDANTIC False\n")
    assert cold == warm.replace("PYDANTIC False", "PYDANTIC True")


def test_a_plain_copy_has_every_field_and_lookup_of_the_device() -> None:
    for hardware in specs.library().values():
        plain = plain_copy(hardware)
        assert plain.content_hash == hardware.content_hash
        blocks = [(hardware, plain), *zip(hardware.engines, plain.engines, strict=True),
                  *zip(hardware.levels, plain.levels, strict=True),
                  *[(getattr(hardware, k), getattr(plain, k)) for k in ("interconnect", "dma") if getattr(hardware, k)]]
        for validated, copy in blocks:  # each field the very value validated (the blocks: compared here)
            nested = ("engines", "levels", "interconnect", "dma")
            assert all(getattr(copy, k) is v for k, v in validated if k not in nested)
            assert set(vars(copy)) == {*type(validated).model_fields, *(["content_hash"] if copy is plain else [])}
        assert plain.best_sixteen_bit_flops_per_s() == hardware.best_sixteen_bit_flops_per_s()
        assert plain.dram.name == hardware.dram.name and plain.level(hardware.dram.name) is plain.levels[0]
    with pytest.raises(AttributeError, match="frozen"):
        plain.units = 1
    with pytest.raises(AttributeError, match="plain copy"):
        plain.model_dump()
