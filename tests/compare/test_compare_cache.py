"""A trace file's side kept on disk (``PERFMODEL_COMPARE_CACHE``): the second comparison reads it instead of
parsing, and compares exactly as the parsed sides do; an unreadable entry is parsed again."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfmodel.compare import cache, diff_sides, load
from perfmodel.specs import load_hardware
from tests.compare.conftest import HTA_0, HTA_1, RESNET_0, RESNET_4, trace_path


def _no_parse(*args: object, **kwargs: object) -> None:
    raise AssertionError("parsed although cached")


@pytest.mark.parametrize(("base", "new"), [(RESNET_0, RESNET_4), (HTA_0, HTA_1)])
def test_cached_sides_compare_alike(base: str, new: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hw = load_hardware("nvidia-v100-sxm2-32gb") if base == RESNET_0 else None
    paths = [trace_path(base), trace_path(new)]
    monkeypatch.delenv(cache.ENV, raising=False)
    plain = diff_sides(load.file_side(paths[0]), load.file_side(paths[1]), hw)
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    first = diff_sides(load.file_side(paths[0]), load.file_side(paths[1]), hw)
    assert len(list(tmp_path.glob("*.side"))) == 2
    monkeypatch.setattr(load, "parse_trace", _no_parse)
    second = diff_sides(load.file_side(paths[0]), load.file_side(paths[1]), hw)
    assert repr(plain) == repr(first) == repr(second)


def test_unreadable_entry_is_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = trace_path(HTA_0)
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    side = load.file_side(path)
    (entry,) = tmp_path.glob("*.side")
    entry.write_bytes(b"not msgpack")
    again = load.file_side(path)
    assert repr(again) == repr(side)
    assert cache.load(tmp_path, path.read_bytes(), "other label") is None  # the label is part of the key
