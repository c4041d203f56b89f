"""An index of the hardware library (``hardware_specs/index.json``): per device the row ``perfmodel hardware
list`` prints, the spec file it comes from and that file's data as JSON, with the sha256 of every spec file. The
list needs neither YAML nor pydantic (~0.05 s of CPU instead of ~0.5 s: issue 25, benchmarks/cli_start.py), and
loading a device (one, or the library) validates the JSON data without parsing YAML. It is used only while it
lists exactly the spec files there are, each with its hash, and was written by this index version; else the full
load runs (same output, slower).

Regenerate it after editing a spec: ``perfmodel hardware index`` (``--check``: exit 2 if out of date);
tests/unit/test_spec_index.py compares it with the full load.

Imports only the standard library: ``perfmodel.specs`` (the full load) imports this module, never the reverse.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfmodel.hardware import Hardware

SPECS_DIR_ENV = "PERFMODEL_SPECS_DIR"
INDEX_NAME = "index.json"
VERSION = 2  # bump when list_row or the index layout changes


@functools.cache
def bundled_dir_name() -> str:
    """``hardware_specs/`` beside the package (resolved once: realpath is 4 lstat calls)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "hardware_specs")


def specs_dir_name() -> str:
    """The library in use: ``$PERFMODEL_SPECS_DIR``, else the bundled one."""
    return os.environ.get(SPECS_DIR_ENV) or bundled_dir_name()


def spec_file_names(directory: str) -> list[str]:
    """The ``*.yaml`` files under ``directory`` (recursively), relative with '/', sorted."""
    names: list[str] = []
    for folder, _, files in os.walk(directory):
        rel = os.path.relpath(folder, directory)
        names.extend(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/")
                     for name in files if name.endswith(".yaml"))
    return sorted(names)


def file_hashes(directory: str) -> dict[str, str]:
    """sha256 of each spec file under ``directory``, by relative name."""
    out = {}
    for name in spec_file_names(directory):
        with open(os.path.join(directory, name), "rb") as stream:
            out[name] = hashlib.sha256(stream.read()).hexdigest()
    return out


def list_row(h: Hardware) -> dict[str, Any]:
    """What ``perfmodel hardware list`` shows of one device: its ``--json`` row (these keys, in this order) and
    ``best_sixteen_bit_flops_per_s`` for the table."""
    dtypes = sorted({d for e in h.engines for d in e.peak_flops_per_s}, key=lambda d: d.value)
    return {"id": h.id, "name": h.name, "vendor": h.vendor, "kind": h.kind, "units": h.units,
            "dram_bandwidth_bytes_per_s": h.dram.bandwidth_bytes_per_s,
            "peak_flops_per_s": {d.value: h.peak_flops_per_s(d) for d in dtypes},
            "best_sixteen_bit_flops_per_s": h.best_sixteen_bit_flops_per_s()}


def build_index(directory: str, read: Callable[[str], Any], parse: Callable[[Any, str], Hardware]) -> dict[str, Any]:
    """The index of ``directory`` from the full load: ``read`` parses one spec file (path), ``parse`` validates
    its data."""
    devices = []
    for name in spec_file_names(directory):
        path = os.path.join(directory, name)
        data = read(path)
        devices.append({"file": name, **list_row(parse(data, path)), "spec": data})
    ids = [d["id"] for d in devices]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{directory}: duplicate device ids")
    return {"version": VERSION, "files": file_hashes(directory), "devices": sorted(devices, key=lambda d: d["id"])}


def index_text(index: dict[str, Any]) -> str:
    return json.dumps(index, indent=1) + "\n"


def read_index(directory: str) -> dict[str, Any] | None:
    """The index of ``directory`` if it exists and is current (every spec file listed with its hash), else None."""
    try:
        with open(os.path.join(directory, INDEX_NAME), encoding="utf-8") as stream:
            index = json.load(stream)
    except (OSError, ValueError):
        return None
    if not isinstance(index, dict) or index.get("version") != VERSION or index.get("files") != file_hashes(directory):
        return None
    return index


@functools.lru_cache(maxsize=8)
def _current(directory: str) -> dict[str, Any] | None:
    return read_index(directory)


def current_index() -> dict[str, Any] | None:
    """The index of the library in use, if current (checked once per process and directory)."""
    return _current(specs_dir_name())


def list_rows(index: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``list_row`` of every device in ``index``, sorted by id."""
    return [{k: v for k, v in d.items() if k not in ("file", "spec")} for d in index["devices"]]


@functools.lru_cache(maxsize=8)
def _specs_by_file(directory: str) -> dict[str, Any]:
    index = _current(directory)
    return {} if index is None else {d["file"]: d["spec"] for d in index["devices"]}


def indexed_spec(directory: str, name: str) -> Any | None:
    """The data of spec file ``name`` of ``directory`` from its index, if current; else None."""
    return _specs_by_file(directory).get(name)


def device_file(hardware_id: str) -> str | None:
    """The spec file of one device (relative to the library) from the current index, else None (unknown id or
    no current index)."""
    index = current_index()
    if index is None:
        return None
    return next((device["file"] for device in index["devices"] if device["id"] == hardware_id), None)
