"""Trace uploads and calibrations; runs point at the upload they came from.

Revision ID: 0002_traces_calibrations
Revises: 0001_initial
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_traces_calibrations"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _created_at() -> sa.Column[object]:
    return sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False)


def upgrade() -> None:
    op.create_table(
        "trace_uploads",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("hardware_id", sa.String(80), nullable=False),
        sa.Column("filename", sa.String(255), nullable=False),
        sa.Column("format", sa.String(40), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("kernel_count", sa.Integer(), nullable=True),
        _created_at(),
        sa.CheckConstraint("size_bytes >= 0", name="ck_trace_uploads_size_bytes_nonnegative"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trace_uploads")),
    )
    op.create_index(op.f("ix_trace_uploads_hardware_id"), "trace_uploads", ["hardware_id"])
    op.create_index(op.f("ix_trace_uploads_sha256"), "trace_uploads", ["sha256"])
    op.create_table(
        "calibrations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("hardware_id", sa.String(80), nullable=False),
        _created_at(),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("fit_report", sa.JSON(), nullable=False),
        sa.Column("notes", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calibrations")),
    )
    op.create_index(op.f("ix_calibrations_hardware_id"), "calibrations", ["hardware_id"])
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("trace_upload_id", sa.Integer(), nullable=True))
        batch.create_index(batch.f("ix_runs_trace_upload_id"), ["trace_upload_id"])
        batch.create_foreign_key(batch.f("fk_runs_trace_upload_id_trace_uploads"), "trace_uploads",
                                 ["trace_upload_id"], ["id"], ondelete="SET NULL")


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_constraint(batch.f("fk_runs_trace_upload_id_trace_uploads"), type_="foreignkey")
        batch.drop_index(batch.f("ix_runs_trace_upload_id"))
        batch.drop_column("trace_upload_id")
    op.drop_index(op.f("ix_calibrations_hardware_id"), table_name="calibrations")
    op.drop_table("calibrations")
    op.drop_index(op.f("ix_trace_uploads_sha256"), table_name="trace_uploads")
    op.drop_index(op.f("ix_trace_uploads_hardware_id"), table_name="trace_uploads")
    op.drop_table("trace_uploads")
