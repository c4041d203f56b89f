"""Device names reduced to their model numbers (``V100``, ``A100``, ``MI250X``, ``L40S``, ``GH200``: letters then
digits, one token); form factor, memory and board codes (``SXM4``, ``PCIe``, ``80GB``, ``HBM3``) are left out.
Used to tell whether a trace's device is the spec it was uploaded for, and to suggest ids for a mistyped one."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

_TOKEN = re.compile(r"^[A-Z]{1,3}\d{1,4}[A-Z]?$")
_NOT_A_MODEL = re.compile(r"^(SXM|PCIE|HBM|NVL|PG|GDDR|DDR|X)\d|GB$")


def model_numbers(text: str) -> set[str]:
    """``{"V100"}`` for "Tesla V100-DGXS-32GB", ``{"A100"}`` for "nvidia-a100-sxm4-80gb"."""
    tokens = re.split(r"[^A-Z0-9]+", text.upper())
    return {t for t in tokens if _TOKEN.match(t) and not _NOT_A_MODEL.search(t)}


def similar_ids(asked: str, known: Iterable[str], limit: int = 3) -> list[str]:
    """Known ids that share a model number with ``asked`` ("amd-instinct-mi250x" -> amd-mi250x), else the
    closest spellings (difflib), at most ``limit``."""
    ids = sorted(known)
    numbers = model_numbers(asked)
    same_model = [i for i in ids if numbers & model_numbers(i)]
    return (same_model or difflib.get_close_matches(asked.lower(), ids, n=limit, cutoff=0.6))[:limit]
