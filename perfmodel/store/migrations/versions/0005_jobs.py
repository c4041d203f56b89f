"""Jobs: long work (a calibration fit) queued and run by a worker pool, with its status, stage, progress and
result.

Revision ID: 0005_jobs
Revises: 0004_unique_parsed_traces
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_jobs"
down_revision: str | None = "0004_unique_parsed_traces"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("stage", sa.String(80), nullable=True),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("result_id", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("owner", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')",
                           name="ck_jobs_status_known"),
        sa.CheckConstraint("progress >= 0 AND progress <= 1", name="ck_jobs_progress_fraction"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index("ix_jobs_kind_status", "jobs", ["kind", "status"])


def downgrade() -> None:
    op.drop_index("ix_jobs_kind_status", table_name="jobs")
    op.drop_table("jobs")
