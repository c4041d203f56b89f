"""What the app holds: settings, the store, resolved hardware, a prediction cache and the job pool."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

from api.calibrations import CalibrationCache
from api.settings import Settings
from perfmodel.hardware import Hardware
from perfmodel.jobs import JobPool
from perfmodel.specs import bundled_hardware, parse_spec
from perfmodel.store import Store

Origin = Literal["bundled", "custom"]


class UnknownHardware(KeyError):
    """No bundled or stored device has this id."""


@dataclass
class AppState:
    settings: Settings
    store: Store
    calibrations: CalibrationCache = field(init=False)
    jobs: JobPool = field(init=False)
    _custom: dict[str, tuple[str, Hardware]] = field(default_factory=dict)
    _cache: OrderedDict[bytes, bytes] = field(default_factory=OrderedDict)
    _responses: OrderedDict[bytes, bytes] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def bundled(hardware_id: str) -> Hardware | None:
        """A bundled device (no database access), else None."""
        return bundled_hardware(hardware_id)

    def hardware(self, hardware_id: str) -> tuple[Hardware, Origin]:
        """A bundled device, else a stored custom one (parsed once per content hash)."""
        bundled = bundled_hardware(hardware_id)
        if bundled is not None:
            return bundled, "bundled"
        row = self.store.get_hardware(hardware_id)
        if row is None:
            raise UnknownHardware(hardware_id)
        cached = self._custom.get(hardware_id)
        if cached is not None and cached[0] == row.content_hash:
            return cached[1], "custom"
        parsed = parse_spec(row.spec, f"stored hardware {hardware_id!r}")
        self._custom[hardware_id] = (row.content_hash, parsed)
        return parsed, "custom"

    def __post_init__(self) -> None:
        self.calibrations = CalibrationCache(self.store)
        self.jobs = JobPool(self.store, workers=self.settings.job_workers,
                            memory_bytes=self.settings.job_memory_bytes or None,
                            max_active=self.settings.job_max_active)

    def forget(self, hardware_id: str) -> None:
        self._custom.pop(hardware_id, None)

    # --- prediction cache (serialised responses): compilers ask the same question often ---
    def cached(self, key: bytes) -> bytes | None:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
            return hit

    def remember(self, key: bytes, value: bytes) -> None:
        self._store(self._cache, key, value)

    # --- response bodies by request bytes (api.response_cache): the same size limit ---
    def cached_response(self, key: bytes) -> bytes | None:
        with self._lock:
            hit = self._responses.get(key)
            if hit is not None:
                self._responses.move_to_end(key)
            return hit

    def remember_response(self, key: bytes, value: bytes) -> None:
        self._store(self._responses, key, value)

    def _store(self, cache: OrderedDict[bytes, bytes], key: bytes, value: bytes) -> None:
        if self.settings.prediction_cache_size == 0:
            return
        with self._lock:
            cache[key] = value
            if len(cache) > self.settings.prediction_cache_size:
                cache.popitem(last=False)
