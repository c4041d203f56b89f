"""The hardware library: load, list and validate ``hardware_specs/*.yaml``; derive what-if variants."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from perfmodel.hardware import Hardware
from perfmodel.spec_error import SpecError as SpecError
from perfmodel.spec_index import INDEX_NAME, build_index, device_file, index_text, indexed_spec
from perfmodel.spec_index import SPECS_DIR_ENV as SPECS_DIR_ENV
from perfmodel.spec_index import specs_dir_name as _specs_dir_name


def specs_dir() -> Path:
    """The bundled library (``hardware_specs/`` beside the package) or ``$PERFMODEL_SPECS_DIR``."""
    return Path(_specs_dir_name())


def _spec_files(directory: Path) -> Iterator[Path]:
    yield from sorted(p for p in directory.rglob("*.yaml") if p.is_file())


def parse_spec(data: Any, origin: str = "<dict>") -> Hardware:
    """Validate a spec mapping; errors name ``origin``, the field path and the reason."""
    if not isinstance(data, dict):
        raise SpecError(origin, "<root>", f"expected a mapping, got {type(data).__name__}")
    try:
        return Hardware.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "<root>"
        raise SpecError(origin, field, first["msg"]) from exc


@functools.cache
def _spec_loader() -> Any:
    """PyYAML's safe loader with YAML 1.2 floats: ``1.41e9`` and ``312e12`` are numbers (YAML 1.1 reads them as
    strings). libyaml's parser when PyYAML has it (11x faster: the bundled library in 40 ms, not 450 ms). Built
    on first use: PyYAML is not imported where the library's index holds the data (perfmodel.spec_index)."""
    import yaml

    class _SpecLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        """The safe loader with its own implicit resolvers (the float one below), so PyYAML's stays as it is."""

    _SpecLoader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                      |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                      |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                      |[-+]?\.(?:inf|Inf|INF)
                      |\.(?:nan|NaN|NAN))$""", re.X),
        list("-+0123456789."),
    )
    return _SpecLoader


def read_yaml(text: str) -> Any:
    """Parse spec YAML (safe, with YAML 1.2 float syntax)."""
    import yaml

    return yaml.load(text, Loader=_spec_loader())


def read_spec_file(path: Path) -> Any:
    """The data of one YAML spec file (not validated)."""
    import yaml

    try:
        return read_yaml(path.read_text())
    except yaml.YAMLError as exc:
        raise SpecError(str(path), "<yaml>", str(exc)) from exc


def load_spec_file(path: Path) -> Hardware:
    """Load one YAML file."""
    return _spec_from(read_spec_file(path), path)


def _spec_from(data: Any, path: Path) -> Hardware:
    hardware = parse_spec(data, str(path))
    if path.stem != hardware.id and not path.stem.endswith(hardware.id.split("-", 1)[-1]):
        raise SpecError(str(path), "id", f"id {hardware.id!r} does not match the file name")
    return hardware


@functools.lru_cache(maxsize=1024)
def _spec_in(directory: str, name: str) -> Hardware:
    """One spec file of a library (``name`` relative to it), loaded once: the library and a single lookup share
    the object. Its data come from the library's index while that is current (the file unchanged: no YAML to
    parse), and are validated either way."""
    path = Path(directory, name)
    data = indexed_spec(directory, name)
    return _spec_from(read_spec_file(path) if data is None else data, path)


@functools.lru_cache(maxsize=8)
def _library(directory: str) -> dict[str, Hardware]:
    found: dict[str, Hardware] = {}
    for path in _spec_files(Path(directory)):
        hardware = _spec_in(directory, path.relative_to(directory).as_posix())
        if hardware.id in found:
            raise SpecError(str(path), "id", f"duplicate id {hardware.id!r}")
        found[hardware.id] = hardware
    return found


def library() -> dict[str, Hardware]:
    """All bundled devices by id (loaded once)."""
    return dict(_library(_specs_dir_name()))


def bundled_hardware(hardware_id: str) -> Hardware | None:
    """One bundled device by id, else None (no copy of the library: the per-request lookup)."""
    return _library(_specs_dir_name()).get(hardware_id)


def list_hardware() -> list[str]:
    """Ids of the bundled devices, sorted."""
    return sorted(_library(_specs_dir_name()))


def load_hardware(hardware_id: str) -> Hardware:
    """One bundled device by id: only its file when the library's index is current (perfmodel.spec_index)."""
    directory = _specs_dir_name()
    name = device_file(hardware_id)
    if name is not None:
        return _spec_in(directory, name)
    devices = _library(directory)
    if hardware_id not in devices:
        close = [i for i in devices if hardware_id.lower() in i] or sorted(devices)[:8]
        raise KeyError(f"unknown hardware {hardware_id!r}; did you mean one of {close}?")
    return devices[hardware_id]


def index_file_text(directory: str | None = None) -> str:
    """What ``hardware_specs/index.json`` (perfmodel.spec_index) should hold for ``directory`` (default: the
    library in use), from the full load."""
    directory = directory or _specs_dir_name()
    return index_text(build_index(directory, lambda path: read_spec_file(Path(path)),
                                  lambda data, path: _spec_from(data, Path(path))))


def index_path() -> Path:
    return specs_dir() / INDEX_NAME


def json_schema() -> dict[str, Any]:
    """JSON Schema of a spec file (generated from the pydantic model)."""
    schema = Hardware.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "perfmodel hardware spec"
    return schema


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


# --- what-if variants ----------------------------------------------------------------------

_SCALE = re.compile(r"^\s*[x*]\s*([0-9.eE+-]+)\s*$")
_ON_CHIP_CLOCKED = ("cache", "scratchpad", "registers")


def derive_variant(base: Hardware | str, new_id: str, overrides: dict[str, Any]) -> Hardware:
    """A what-if device: ``base`` with ``overrides`` applied.

    Keys are dotted paths: ``clock_hz``, ``units``, ``launch_overhead_s``,
    ``levels.<name|dram|onchip|*>.<field>``, ``engines.<name|*>.peak_flops_per_s[.<dtype>]``,
    ``interconnect.<field>``. A value is a number (set it) or ``"x1.5"`` / ``"*1.5"`` (scale it), or a word for a
    word field (``interconnect.network_transport``: ``"socket"``).
    Scaling ``clock_hz`` also scales every engine peak and on-chip bandwidth (they are per-clock).
    """
    hardware = load_hardware(base) if isinstance(base, str) else base
    data = hardware.model_dump(mode="json")
    for key, value in overrides.items():
        _apply(data, key, value, hardware.id)
    note = f"what-if variant of {hardware.id}: {json.dumps(overrides, sort_keys=True)}"
    data.update(id=new_id, name=f"{hardware.name} ({note})", derived_from=hardware.id, overrides=overrides)
    data["sources"] = {**data.get("sources", {}), **{k: note for k in ("clock_hz", "units") if k in overrides}}
    return parse_spec(data, f"variant {new_id!r}")


def _apply(data: dict[str, Any], key: str, value: Any, base_id: str) -> None:
    parts = key.split(".")
    head = parts[0]
    if head == "clock_hz" and len(parts) == 1 and isinstance(value, str):
        factor = _factor(value, key)
        _scale_field(data, "clock_hz", factor, key)
        for engine in data["engines"]:
            engine["peak_flops_per_s"] = {d: v * factor for d, v in engine["peak_flops_per_s"].items()}
            if engine.get("sustained_clock_hz"):  # the clock under matrix load moves with the boost clock
                engine["sustained_clock_hz"] = {d: v * factor for d, v in engine["sustained_clock_hz"].items()}
        for level in data["levels"]:
            if level["kind"] in _ON_CHIP_CLOCKED and level.get("bandwidth_bytes_per_s"):
                level["bandwidth_bytes_per_s"] *= factor
        return
    if len(parts) == 1:
        _set_or_scale(data, head, value, key)
        return
    if head == "levels":
        targets = _select_levels(data["levels"], parts[1], key)
        for level in targets:
            _set_or_scale(level, ".".join(parts[2:]), value, key)
            level.setdefault("sources", {})[parts[-1]] = f"what-if override of {base_id}: {key}={value}"
            level.get("unknown", {}).pop(parts[-1], None)
        return
    if head == "engines":
        matched = [e for e in data["engines"] if parts[1] in ("*", e["name"])]
        if not matched:
            raise SpecError("overrides", key, f"no engine named {parts[1]!r}")
        for engine in matched:
            rest = parts[2:]
            if rest == ["peak_flops_per_s"] and isinstance(value, str):
                factor = _factor(value, key)
                engine["peak_flops_per_s"] = {d: v * factor for d, v in engine["peak_flops_per_s"].items()}
            else:
                _set_or_scale(engine, ".".join(rest), value, key)
        return
    if head == "interconnect" and data.get("interconnect") is not None:
        _set_or_scale(data["interconnect"], ".".join(parts[1:]), value, key)
        return
    raise SpecError("overrides", key, "unknown override path")


def _select_levels(levels: list[dict[str, Any]], selector: str, key: str) -> list[dict[str, Any]]:
    sel = selector.lower()
    if sel == "*":
        return levels
    if sel == "dram":
        return [levels[0]]
    if sel == "onchip":
        return [lv for lv in levels if lv["kind"] != "dram"]
    if sel == "sram":
        return [lv for lv in levels if lv["kind"] == "scratchpad"] or [
            lv for lv in levels if lv["kind"] == "cache"
        ]
    found = [lv for lv in levels if lv["name"].lower() == sel]
    if not found:
        names = [lv["name"] for lv in levels]
        raise SpecError("overrides", key, f"no level {selector!r}; levels: {names} or dram/onchip/sram/*")
    return found


def _factor(value: str, key: str) -> float:
    match = _SCALE.match(value)
    if not match:
        raise SpecError("overrides", key, f"{value!r} is neither a number nor a scale like 'x1.5'")
    return float(match.group(1))


def _set_or_scale(target: dict[str, Any], path: str, value: Any, key: str) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        if not isinstance(target.get(part), dict):
            raise SpecError("overrides", key, f"unknown field {part!r}")
        target = target[part]
    if parts[-1] not in target:
        raise SpecError("overrides", key, f"unknown field {parts[-1]!r}; fields: {sorted(target)}")
    if isinstance(value, str) and _SCALE.match(value) is None and not isinstance(target[parts[-1]], int | float):
        target[parts[-1]] = value  # a word field (network_transport, topology): set it
    elif isinstance(value, str):
        _scale_field(target, parts[-1], _factor(value, key), key)
    else:
        target[parts[-1]] = value


def _scale_field(target: dict[str, Any], field: str, factor: float, key: str) -> None:
    current = target.get(field)
    if not isinstance(current, int | float):
        raise SpecError("overrides", key, f"cannot scale {field!r}: it is {current!r}")
    scaled = current * factor
    target[field] = round(scaled) if isinstance(current, int) and field in ("units", "banks") else scaled
