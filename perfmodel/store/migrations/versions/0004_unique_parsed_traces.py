"""One parsed trace per (device, content hash): fold the duplicates that concurrent uploads stored, then a
partial unique index on ``trace_uploads (hardware_id, sha256) WHERE status = 'parsed'``.

Folding keeps the oldest parsed upload of each (device, hash) and deletes the later copies with their runs,
the runs' tags and their kernels: the same content parsed for the same device gave the same runs, so
nothing is lost but the copies. Failed uploads (a log of attempts) are untouched. The downgrade drops the
index only; folded copies are not recreated.

Revision ID: 0004_unique_parsed_traces
Revises: 0003_kernels_sweeps
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_unique_parsed_traces"
down_revision: str | None = "0003_kernels_sweeps"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "uq_trace_uploads_parsed_hardware_id_sha256"
PARSED = "status = 'parsed'"
# the parsed uploads that have an older parsed twin (same device, same content)
LATER_COPIES = (
    "SELECT u.id FROM trace_uploads u WHERE u.status = 'parsed' AND EXISTS ("
    "SELECT 1 FROM trace_uploads k WHERE k.status = 'parsed' AND k.hardware_id = u.hardware_id "
    "AND k.sha256 = u.sha256 AND k.id < u.id)"
)
# explicit deletes, children first: SQLite runs migrations with foreign keys off (no ON DELETE CASCADE)
FOLD = (
    f"DELETE FROM trace_kernels WHERE trace_upload_id IN ({LATER_COPIES})",
    f"DELETE FROM run_tags WHERE run_id IN (SELECT id FROM runs WHERE trace_upload_id IN ({LATER_COPIES}))",
    f"UPDATE trace_kernels SET run_id = NULL WHERE run_id IN "
    f"(SELECT id FROM runs WHERE trace_upload_id IN ({LATER_COPIES}))",
    f"DELETE FROM runs WHERE trace_upload_id IN ({LATER_COPIES})",
    f"DELETE FROM trace_uploads WHERE id IN ({LATER_COPIES})",
)


def upgrade() -> None:
    for statement in FOLD:
        op.execute(sa.text(statement))
    op.create_index(INDEX, "trace_uploads", ["hardware_id", "sha256"], unique=True,
                    sqlite_where=sa.text(PARSED), postgresql_where=sa.text(PARSED))


def downgrade() -> None:
    op.drop_index(INDEX, table_name="trace_uploads", sqlite_where=sa.text(PARSED), postgresql_where=sa.text(PARSED))
