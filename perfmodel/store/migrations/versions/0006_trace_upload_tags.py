"""Trace upload tags: commit, driver / library versions, clocks, environment (silicon, emulator, simulator,
FPGA), told apart in a workload's history.

Revision ID: 0006_trace_upload_tags
Revises: 0005_jobs
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_trace_upload_tags"
down_revision: str | None = "0005_jobs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "trace_upload_tags",
        sa.Column("trace_upload_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(100), nullable=False),
        sa.Column("value", sa.String(400), nullable=False),
        sa.ForeignKeyConstraint(["trace_upload_id"], ["trace_uploads.id"], ondelete="CASCADE",
                                name=op.f("fk_trace_upload_tags_trace_upload_id_trace_uploads")),
        sa.PrimaryKeyConstraint("trace_upload_id", "key", name=op.f("pk_trace_upload_tags")),
    )
    op.create_index("ix_trace_upload_tags_key_value", "trace_upload_tags", ["key", "value"])


def downgrade() -> None:
    op.drop_index("ix_trace_upload_tags_key_value", table_name="trace_upload_tags")
    op.drop_table("trace_upload_tags")
