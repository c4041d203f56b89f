"""The store's core: one engine, one session per call, write transactions, and input checks."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from perfmodel.store.engine import WRITE_OPTION, make_engine
from perfmodel.store.errors import InvalidValue, StoreError


class StoreBase:
    """Thread safe: the engine (and its pool) is shared, every call opens and closes its own session."""

    def __init__(self, url: str) -> None:
        self.engine: Engine = make_engine(url)
        self.url: str = self.engine.url.render_as_string(hide_password=False)
        self._writer: Engine = self.engine.execution_options(**{WRITE_OPTION: True})

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def dispose(self) -> None:
        """Close the pooled connections (tests, shutdown)."""
        self.engine.dispose()

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            yield session

    @contextmanager
    def _write(self, conflict: str = "conflicting write") -> Iterator[Session]:
        """One transaction: committed on success, rolled back on any error; an integrity error (unique key,
        check constraint) becomes a ``StoreError`` with ``conflict`` as its message."""
        try:
            with Session(self._writer, expire_on_commit=False) as session, session.begin():
                yield session
        except IntegrityError as exc:
            raise StoreError(f"{conflict}: {exc.orig}") from exc


ID_MAX = 2**31 - 1  # ids are INTEGER columns (int4 on PostgreSQL)
OFFSET_MAX = 2**63 - 1
MAX_RUN_TIME_S = 1e6  # a measured run is shorter than this (s): POST /runs and trace ingest refuse longer ones


def is_id(value: object) -> bool:
    """Whether ``value`` can be a row id; anything else (0, negative, 2**64, a string) matches no row, and must
    not reach the driver, which would raise an overflow error instead of finding nothing."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= ID_MAX


def storable(value: str) -> bool:
    """Text both backends can hold: valid UTF-8 (no lone surrogates) and no NUL (PostgreSQL refuses it).
    A lookup by any other string matches nothing, and must not reach the driver, which would raise."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in value


def check_str(field: str, value: object, max_len: int, *, optional: bool = False, empty: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not (value or empty):
        raise InvalidValue(f"{field}: expected a non-empty string, got {value!r}")
    if len(value) > max_len:
        raise InvalidValue(f"{field}: {len(value)} characters, at most {max_len} allowed")
    if not storable(value):
        raise InvalidValue(f"{field}: NUL characters and invalid UTF-8 (lone surrogates) are not allowed")


def _unstorable_at(value: object, path: str) -> str | None:
    """The path (``spec.engines.0.name``) of the first string in ``value`` that ``storable`` refuses; a refused
    dict key names its dict (``spec.overrides (a key)``). None if every string is storable."""
    if isinstance(value, str):
        return None if storable(value) else path
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not storable(key):
                return f"{path} (a key)"
            found = _unstorable_at(item, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _unstorable_at(item, f"{path}.{i}")
            if found is not None:
                return found
    return None


def check_json(field: str, value: object) -> None:
    """A JSON object with string keys and finite numbers (PostgreSQL rejects NaN; so does the store everywhere)
    whose text is all ``storable`` (no NUL, no lone surrogate: the 422 names the string's path, as
    ``check_str`` names a column)."""
    if not isinstance(value, dict):
        raise InvalidValue(f"{field}: expected a JSON object (dict), got {type(value).__name__}")
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        surrogate = False
        text.encode("utf-8")
    except UnicodeEncodeError:
        surrogate = True
    except (TypeError, ValueError) as exc:
        raise InvalidValue(f"{field}: not storable as JSON ({exc})") from exc
    if surrogate or "\\u0000" in text:  # json.dumps writes a NUL as \u0000 (only then is the value walked)
        where = _unstorable_at(value, field)
        if where is not None or surrogate:
            raise InvalidValue(f"{where or field}: NUL characters and invalid UTF-8 (lone surrogates) are not "
                               "allowed")


def check_positive(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise InvalidValue(f"{field}: expected a finite number > 0, got {value!r}")
    return float(value)


def check_limit_offset(limit: int, offset: int) -> None:
    for name, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= OFFSET_MAX:
            raise StoreError(f"{name}: expected an integer from 0 to {OFFSET_MAX}, got {value!r}")


def as_dict(value: Any) -> dict[str, Any]:
    """JSON columns come back as dicts; copy so callers cannot mutate anything shared."""
    return dict(value) if isinstance(value, dict) else {}
