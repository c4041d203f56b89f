"""Store errors: both are ``ValueError`` so a caller that does not know the store still sees bad input."""

from __future__ import annotations


class StoreError(ValueError):
    """A conflict or invalid input (duplicate id, op without ``kind``, non-positive time); nothing was written."""


class NotFound(StoreError):
    """The row asked for does not exist."""


class InvalidValue(StoreError):
    """A value the store cannot hold (NUL or a lone surrogate in text, a non-finite number in JSON, an empty or
    overlong string): bad input, which the service answers with a 422, not a conflict's 409."""
