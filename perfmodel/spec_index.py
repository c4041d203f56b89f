"""A compact index of the hardware library (``hardware_specs/index.json``): per device the row ``perfmodel
hardware list`` prints and the spec file it comes from, with the sha256 of every spec file. It lets the list
(and a lookup of one device's file) skip YAML and pydantic: ~0.05 s of CPU instead of ~0.4 s (issue 25,
benchmarks/cli_start.py). It is used only while it lists exactly the spec files there are, each with its hash,
and was written by this index version; else the full load runs (same output, slower).

Regenerate it after editing a spec: ``python -m perfmodel.spec_index`` (``--check``: exit 1 if out of date);
tests/unit/test_spec_index.py compares it with the full load.

Imports only the standard library (the full load, ``perfmodel.specs``, is imported where it is needed).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perfmodel.hardware import Hardware

SPECS_DIR_ENV = "PERFMODEL_SPECS_DIR"
INDEX_NAME = "index.json"
VERSION = 1  # bump when list_row or the index layout changes


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


def build_index(directory: str) -> dict[str, Any]:
    """The index of ``directory`` from the full load (YAML, validation)."""
    from pathlib import Path

    from perfmodel.specs import load_spec_file

    devices = []
    for name in spec_file_names(directory):
        hardware = load_spec_file(Path(directory, name))
        devices.append({"file": name, **list_row(hardware)})
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


def device_rows() -> list[dict[str, Any]]:
    """``list_row`` of every device of the library in use, sorted by id: from the index when it is current,
    else from the full load."""
    index = current_index()
    if index is not None:
        return [{k: v for k, v in d.items() if k != "file"} for d in index["devices"]]
    from perfmodel.specs import library

    return [list_row(h) for h in sorted(library().values(), key=lambda h: h.id)]


def device_file(hardware_id: str) -> str | None:
    """The spec file of one device (relative to the library) from the current index, else None (unknown id or
    no current index)."""
    index = current_index()
    if index is None:
        return None
    return next((device["file"] for device in index["devices"] if device["id"] == hardware_id), None)


def main(argv: list[str] | None = None) -> int:
    """Write the bundled library's index (or, with ``--check``, exit 1 if it is out of date)."""
    args = sys.argv[1:] if argv is None else argv
    directory = specs_dir_name()
    path = os.path.join(directory, INDEX_NAME)
    text = index_text(build_index(directory))
    try:
        with open(path, encoding="utf-8") as stream:
            current = stream.read()
    except OSError:
        current = ""
    if "--check" in args:
        if current != text:
            print(f"{path} is out of date: python -m perfmodel.spec_index", file=sys.stderr)
            return 1
        return 0
    if current != text:
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
