"""Design-space sweeps: what was swept (spec) and the table of results."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from perfmodel.store.base import StoreBase, as_dict, check_json, check_limit_offset, check_str, is_id
from perfmodel.store.models import SweepModel
from perfmodel.store.rows import SweepRow


def _sweep(m: SweepModel) -> SweepRow:
    return SweepRow(id=m.id, name=m.name, created_at=m.created_at, spec=as_dict(m.spec), results=as_dict(m.results))


class SweepsRepo(StoreBase):
    def add_sweep(self, name: str, spec: dict[str, Any], results: dict[str, Any]) -> int:
        check_str("name", name, 200)
        check_json("spec", spec)
        check_json("results", results)
        with self._write("sweep not stored") as session:
            model = SweepModel(name=name, spec=spec, results=results)
            session.add(model)
            session.flush()
            return model.id

    def get_sweep(self, sweep_id: int) -> SweepRow | None:
        if not is_id(sweep_id):
            return None
        with self._read() as session:
            model = session.get(SweepModel, sweep_id)
            return None if model is None else _sweep(model)

    def list_sweeps(self, limit: int = 100, offset: int = 0) -> list[SweepRow]:
        """Newest first."""
        check_limit_offset(limit, offset)
        stmt = select(SweepModel).order_by(SweepModel.id.desc()).limit(limit).offset(offset)
        with self._read() as session:
            return [_sweep(m) for m in session.scalars(stmt)]
