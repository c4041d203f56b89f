"""Tags of a trace upload (and of the runs made from it): what the history of a workload is told apart by.

Free ``key=value`` pairs; these keys are the ones the dashboard and history show first: ``commit`` (the code's
revision), ``driver`` and ``library`` versions (``cuda=12.4``, ``rocm=6.2``...), ``clocks`` (``locked 1410 MHz``),
``environment`` (where it ran: one of ``ENVIRONMENTS``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from perfmodel.store.base import check_str
from perfmodel.store.errors import StoreError

KNOWN_TAGS = ("commit", "environment", "driver", "library", "clocks")
ENVIRONMENTS = ("silicon", "emulator", "simulator", "fpga")
MAX_TAGS = 32
MAX_KEY_CHARS = 100
MAX_VALUE_CHARS = 400
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_.:/-]*$")


def check_tags(tags: Mapping[str, str]) -> dict[str, str]:
    """The tags as stored (``environment`` lower-cased), or ``StoreError`` saying which one is wrong."""
    if not isinstance(tags, Mapping):
        raise StoreError(f"tags: expected an object of key -> value, got {type(tags).__name__}")
    if len(tags) > MAX_TAGS:
        raise StoreError(f"tags: {len(tags)} tags, at most {MAX_TAGS} allowed")
    checked: dict[str, str] = {}
    for key, value in tags.items():
        check_str("tag key", key, MAX_KEY_CHARS)
        if not _KEY.match(key):
            raise StoreError(f"tag key {key!r}: letters, digits and _ . : / - only, starting with a letter")
        check_str(f"tag {key}", value, MAX_VALUE_CHARS)
        checked[key] = value.strip()
    environment = checked.get("environment")
    if environment is not None:
        checked["environment"] = environment.lower()
        if checked["environment"] not in ENVIRONMENTS:
            raise StoreError(f"tag environment {environment!r}: expected one of {', '.join(ENVIRONMENTS)}")
    return checked


def parse_tags(pairs: Iterable[str]) -> dict[str, str]:
    """Tags from ``key=value`` texts (a command line's ``--tag``; a form's comma- or newline-separated list)."""
    tags: dict[str, str] = {}
    for pair in pairs:
        for item in re.split(r"[,\n]", pair):
            if not item.strip():
                continue
            key, sep, value = item.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise StoreError(f"tag {item.strip()!r}: expected key=value, e.g. commit=3f2a9c1 or "
                                 f"environment=silicon")
            tags[key.strip()] = value.strip()
    return check_tags(tags)


def tag_line(tags: Mapping[str, str]) -> str:
    """The tags as one line, known keys first: ``commit=3f2a9c1 environment=silicon cuda=12.4``."""
    keys = [k for k in KNOWN_TAGS if k in tags] + sorted(k for k in tags if k not in KNOWN_TAGS)
    return " ".join(f"{k}={tags[k]}" for k in keys)
