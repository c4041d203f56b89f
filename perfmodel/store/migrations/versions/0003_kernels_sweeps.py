"""The kernels of each trace upload (matched run or unmodelled), and design-space sweeps.

Revision ID: 0003_kernels_sweeps
Revises: 0002_traces_calibrations
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_kernels_sweeps"
down_revision: str | None = "0002_traces_calibrations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "trace_kernels",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("trace_upload_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("category", sa.String(20), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("instances", sa.Integer(), nullable=False),
        sa.Column("op_name", sa.String(200), nullable=True),
        sa.Column("op_kind", sa.String(40), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("counters", sa.JSON(), nullable=False),
        sa.CheckConstraint("duration_s >= 0", name="ck_trace_kernels_duration_s_nonnegative"),
        sa.ForeignKeyConstraint(["trace_upload_id"], ["trace_uploads.id"], ondelete="CASCADE",
                                name=op.f("fk_trace_kernels_trace_upload_id_trace_uploads")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], ondelete="SET NULL",
                                name=op.f("fk_trace_kernels_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trace_kernels")),
    )
    op.create_index(op.f("ix_trace_kernels_trace_upload_id"), "trace_kernels", ["trace_upload_id"])
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("results", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sweeps")),
    )


def downgrade() -> None:
    op.drop_table("sweeps")
    op.drop_index(op.f("ix_trace_kernels_trace_upload_id"), table_name="trace_kernels")
    op.drop_table("trace_kernels")
