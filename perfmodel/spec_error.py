"""``SpecError``, without the spec loader (perfmodel.specs re-exports it): ``perfmodel predict`` catches it
without importing pydantic (issue 25)."""

from __future__ import annotations


class SpecError(ValueError):
    """A hardware spec that cannot be loaded: names the file, the field and the reason."""

    def __init__(self, path: str, field: str, reason: str) -> None:
        super().__init__(f"{path}: {field}: {reason}")
        self.path = path
        self.field = field
        self.reason = reason
