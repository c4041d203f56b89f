"""Custom hardware and what-if variants saved by users (the bundled library is never stored)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select

from perfmodel.store.base import StoreBase, as_dict, check_json, check_str, storable
from perfmodel.store.errors import StoreError
from perfmodel.store.models import HardwareModel
from perfmodel.store.rows import HardwareRow


def _row(model: HardwareModel) -> HardwareRow:
    return HardwareRow(id=model.id, spec=as_dict(model.spec), derived_from=model.derived_from,
                       content_hash=model.content_hash, created_at=model.created_at)


class HardwareRepo(StoreBase):
    def add_hardware(self, hardware_id: str, spec: dict[str, Any], derived_from: str | None,
                     content_hash: str) -> HardwareRow:
        """Store a device; ``StoreError`` if the id is taken (nothing is written then)."""
        check_str("hardware_id", hardware_id, 80)
        check_json("spec", spec)
        check_str("derived_from", derived_from, 80, optional=True)
        check_str("content_hash", content_hash, 64)
        with self._write(f"hardware {hardware_id!r} already exists") as session:
            if session.get(HardwareModel, hardware_id) is not None:
                raise StoreError(f"hardware {hardware_id!r} already exists")
            model = HardwareModel(id=hardware_id, spec=spec, derived_from=derived_from, content_hash=content_hash)
            session.add(model)
            session.flush()
            return _row(model)

    def get_hardware(self, hardware_id: str) -> HardwareRow | None:
        if not storable(hardware_id):
            return None
        with self._read() as session:
            model = session.get(HardwareModel, hardware_id)
            return None if model is None else _row(model)

    def list_hardware(self) -> list[HardwareRow]:
        """Every stored device, by id."""
        with self._read() as session:
            return [_row(m) for m in session.scalars(select(HardwareModel).order_by(HardwareModel.id))]

    def delete_hardware(self, hardware_id: str) -> bool:
        """True if it existed. Runs that name it are kept (they are measurements)."""
        if not storable(hardware_id):
            return False
        with self._write() as session:
            result = session.execute(delete(HardwareModel).where(HardwareModel.id == hardware_id))
            return bool(getattr(result, "rowcount", 0))
