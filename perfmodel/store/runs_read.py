"""Reading pages of runs with two plain SELECTs (the runs' columns, then their tags) instead of ORM objects.

Through the ORM a 5,000-run page built ~6 objects per run (the run and its ~5 tags, ``selectin``): 21,157 runs
(three V100 ResNet-50 traces, ``/trace-history``) took 3.6 s of a 6.1 s page under cProfile. The rows are the
same ``RunRow`` values: the columns' types convert the values as the ORM does; tags come ordered by key, as the
relationship's ``order_by`` gave them.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from perfmodel.store.base import as_dict
from perfmodel.store.models import RunModel, RunTagModel
from perfmodel.store.rows import RunRow

COLUMNS = (RunModel.id, RunModel.hardware_id, RunModel.op_kind, RunModel.dtype, RunModel.op,
           RunModel.measured_time_s, RunModel.source, RunModel.created_at, RunModel.trace_upload_id)


def run_page(session: Session, where: Sequence[ColumnElement[bool]], limit: int, offset: int) -> list[RunRow]:
    """Runs matching ``where`` by id, ``limit`` from ``offset``, with their tags (one query for each)."""
    rows = session.execute(select(*COLUMNS).where(*where).order_by(RunModel.id).limit(limit).offset(offset)).all()
    if not rows:
        return []
    page_ids = select(RunModel.id).where(*where).order_by(RunModel.id).limit(limit).offset(offset).subquery()
    tags: dict[int, dict[str, str]] = {}
    stmt = (select(RunTagModel.run_id, RunTagModel.key, RunTagModel.value)
            .where(RunTagModel.run_id.in_(select(page_ids.c.id))).order_by(RunTagModel.run_id, RunTagModel.key))
    for run_id, key, value in session.execute(stmt):
        tags.setdefault(run_id, {})[key] = value
    return [RunRow(id=r[0], hardware_id=r[1], op_kind=r[2], dtype=r[3], op=as_dict(r[4]), measured_time_s=r[5],
                   source=r[6], tags=tags.get(r[0], {}), created_at=r[7], trace_upload_id=r[8]) for r in rows]
