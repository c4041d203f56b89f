"""An op dict's text, for grouping runs of equal ops (a trace repeats a few hundred distinct ops many thousand
times): orjson with sorted keys, about 20x cheaper than ``json.dumps``; equal ops give equal text, distinct ops
distinct text."""

from __future__ import annotations

import json
from typing import Any

import orjson


def op_text(op: Any) -> bytes | None:
    """orjson's sorted-key text of ``op``; None where orjson cannot write it or writes a null (it writes NaN as
    null, so such an op is not told apart from one holding None: key it by ``json_text``)."""
    try:
        text = orjson.dumps(op, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return None
    return None if b"null" in text else text


def json_text(op: Any) -> bytes:
    """``json.dumps`` text (sorted keys; NaN as NaN; other values by ``str``): the slow key ``op_key`` falls back
    to."""
    return json.dumps(op, sort_keys=True, default=str).encode()


def op_key(op: Any) -> bytes:
    """A key equal for equal ops and distinct for distinct ones (``op_text``, else ``json_text``; the two kinds
    are prefixed so they never collide)."""
    text = op_text(op)
    return b"o" + text if text is not None else b"j" + json_text(op)
