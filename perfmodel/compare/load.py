"""Sides from what a user names: a trace file (parsed by ``perfmodel.traces``) or a stored trace upload
(its runs), with the device each side ran on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfmodel.compare import cache
from perfmodel.compare.diff import CompareError
from perfmodel.compare.fast_side import fast_file_side
from perfmodel.compare.sides import Side, side_from_parsed, side_from_runs
from perfmodel.hardware import Hardware
from perfmodel.traces import TraceError, parse_trace

STORED_PREFIX = "trace:"
MAX_STORED_RUNS = 200_000  # runs read from one stored trace (bounded work)
PAGE = 5_000


def parse_threshold(text: str) -> float:
    """'5%', '5' or '0.5 %' -> percent; a clear error otherwise."""
    raw = text.strip().rstrip("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise CompareError(f"threshold {text!r}: expected a percentage such as 5%") from None
    if not (value >= 0 and value < 1e6):
        raise CompareError(f"threshold {text!r}: expected a percentage >= 0")
    return value


def stored_side(store: Any, upload_id: int, label: str | None = None) -> tuple[Side, str]:
    """The runs of one stored trace upload as a side, and the hardware id it was stored for."""
    upload = store.get_trace_upload(upload_id)
    if upload is None:
        raise CompareError(f"no stored trace {upload_id} (GET /api/v1/traces lists them)")
    if upload.status == "failed":
        raise CompareError(f"stored trace {upload_id} failed to ingest: {(upload.error or '')[:200]}")
    runs: list[Any] = []
    while len(runs) < MAX_STORED_RUNS:
        page, total = store.list_runs(trace_upload_id=upload_id, limit=PAGE, offset=len(runs))
        runs += page
        if not page or len(runs) >= total:
            break
    side = side_from_runs(runs, label or f"trace:{upload_id} ({upload.filename})", upload.format)
    return side, upload.hardware_id


def file_side(path: Path) -> Side:
    """A trace file's side (from the cache where ``PERFMODEL_COMPARE_CACHE`` names one: ``cache``)."""
    if not path.is_file():
        raise CompareError(f"{path}: {'not a file' if path.exists() else 'no such file'}")
    folder = cache.cache_folder()
    content = path.read_bytes() if folder is not None else b""
    if folder is not None and (side := cache.load(folder, content, path.name)) is not None:
        return side
    side = fast_file_side(content or path, path.name)  # None: a file the columnar path leaves to the reference
    try:
        side = side or side_from_parsed(parse_trace(content or path, path.name), path.name)
    except TraceError as exc:
        raise CompareError(f"{path.name}: {exc}") from None
    if folder is not None:
        cache.store(folder, content, side)
    return side


def load_side(ref: str, store: Callable[[], Any]) -> tuple[Side, str | None]:
    """``trace:ID`` (a stored upload: its runs and hardware id) or a path (no hardware of its own)."""
    if ref.startswith(STORED_PREFIX):
        ident = ref[len(STORED_PREFIX):]
        if not ident.isdigit():
            raise CompareError(f"{ref!r}: expected trace:ID with a numeric id")
        return stored_side(store(), int(ident), None)
    return file_side(Path(ref)), None


def pick_hardware(given: str | None, stored: str | None, resolve: Callable[[str], Hardware]) -> Hardware | None:
    hardware_id = given or stored
    if hardware_id is None:
        return None
    try:
        return resolve(hardware_id)
    except KeyError:
        raise CompareError(f"unknown hardware {hardware_id!r} (perfmodel hardware list)") from None
