"""Resolve ``"calibration": id | "latest" | null`` to a fitted calibration (parsed once per id: never changes)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from fastapi import HTTPException

from perfmodel.calibration import Calibration
from perfmodel.store import Store

CalibrationRef = str | int | None


@dataclass
class CalibrationCache:
    store: Store
    _parsed: dict[int, Calibration] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def resolve(self, hardware_id: str, ref: CalibrationRef) -> tuple[int | None, Calibration | None]:
        """(id, calibration) for ``ref``; (None, None) for null or 'none', and for 'latest' when the device has
        none. An unknown id is a 404, one fitted for another device a 422."""
        if ref is None or ref in ("", "none"):
            return None, None
        if ref == "latest":
            row = self.store.latest_calibration(hardware_id)
            if row is None:
                return None, None
        else:
            try:
                calibration_id = int(ref)
            except (TypeError, ValueError):
                raise HTTPException(422, f"calibration: expected an id, 'latest' or null, got {ref!r}") from None
            row = self.store.get_calibration(calibration_id)
            if row is None:
                raise HTTPException(404, f"no calibration {calibration_id}")
            if row.hardware_id != hardware_id:
                raise HTTPException(422, f"calibration {calibration_id} was fitted for {row.hardware_id!r}, "
                                         f"not {hardware_id!r}")
        with self._lock:
            parsed = self._parsed.get(row.id)
        if parsed is None:
            parsed = Calibration.from_params(row.params)
            with self._lock:
                self._parsed[row.id] = parsed
        return row.id, parsed
