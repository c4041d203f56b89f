"""The side of a trace file kept on disk, so a second comparison against the same file skips its parse and match
(a CI gate compares every new run with one base).

Opt-in: ``PERFMODEL_COMPARE_CACHE`` names the folder. An entry is keyed by the file's bytes (SHA-256) and by the
source of the ``perfmodel`` package that made it (a changed parser or matcher never reuses an old entry); it is
written to a temporary file and renamed into place. An entry that does not decode is ignored and parsed again.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

import msgspec

from perfmodel.compare.sides import Group, Side

ENV = "PERFMODEL_COMPARE_CACHE"
PACKAGE = Path(__file__).resolve().parents[1]


class _Entry(msgspec.Struct):
    format: str
    device_name: str | None
    groups: list[Group]
    total_time_s: float
    warnings: list[str]


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-256 of the package's Python source (paths and bytes): what a cached side was made by."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(PACKAGE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cache_folder() -> Path | None:
    value = os.environ.get(ENV, "").strip()
    return Path(value) if value else None


def entry_path(folder: Path, content: bytes, label: str) -> Path:
    """The entry of a file's bytes parsed under ``label`` (its warnings quote it) by this package's code."""
    key = hashlib.sha256(content)
    key.update(b"\0" + label.encode("utf-8", "replace"))
    return folder / f"{key.hexdigest()[:40]}-{code_digest()[:16]}.side"


def load(folder: Path, content: bytes, label: str) -> Side | None:
    """The cached side of a file with these bytes labelled ``label``; None where there is none or it is unreadable."""
    try:
        entry = msgspec.msgpack.decode(entry_path(folder, content, label).read_bytes(), type=_Entry)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return Side(label, entry.format, entry.device_name, {g.key: g for g in entry.groups}, entry.total_time_s,
                entry.warnings)


def store(folder: Path, content: bytes, side: Side) -> None:
    """Keep ``side`` for a file with these bytes (best effort: a folder that cannot be written is skipped)."""
    entry = _Entry(side.format, side.device_name, list(side.groups.values()), side.total_time_s, side.warnings)
    target = entry_path(folder, content, side.label)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, delete=False, suffix=".tmp") as handle:
            handle.write(msgspec.msgpack.encode(entry))
        os.replace(handle.name, target)
    except OSError:
        return
