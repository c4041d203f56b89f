"""Initial schema: custom hardware, measured runs with their tags, API tokens.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _created_at() -> sa.Column[object]:
    return sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False)


def upgrade() -> None:
    op.create_table(
        "hardware",
        sa.Column("id", sa.String(80), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("derived_from", sa.String(80), nullable=True),
        sa.Column("content_hash", sa.String(64), nullable=False),
        _created_at(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hardware")),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("hardware_id", sa.String(80), nullable=False),
        sa.Column("op_kind", sa.String(40), nullable=False),
        sa.Column("dtype", sa.String(16), nullable=True),
        sa.Column("op", sa.JSON(), nullable=False),
        sa.Column("measured_time_s", sa.Float(), nullable=False),
        sa.Column("source", sa.String(200), nullable=False),
        _created_at(),
        sa.CheckConstraint("measured_time_s > 0", name="ck_runs_measured_time_s_positive"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    for column in ("hardware_id", "op_kind", "dtype", "source", "created_at"):
        op.create_index(op.f(f"ix_runs_{column}"), "runs", [column])
    op.create_table(
        "run_tags",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(100), nullable=False),
        sa.Column("value", sa.String(400), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_run_tags_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", "key", name=op.f("pk_run_tags")),
    )
    op.create_index("ix_run_tags_key_value", "run_tags", ["key", "value"])
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False),
        _created_at(),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_api_tokens_token_sha256")),
    )
    op.create_index("uq_api_tokens_active_name", "api_tokens", ["name"], unique=True,
                    sqlite_where=sa.text("revoked_at IS NULL"), postgresql_where=sa.text("revoked_at IS NULL"))


def downgrade() -> None:
    op.drop_index("uq_api_tokens_active_name", table_name="api_tokens")
    op.drop_table("api_tokens")
    op.drop_index("ix_run_tags_key_value", table_name="run_tags")
    op.drop_table("run_tags")
    for column in ("created_at", "source", "dtype", "op_kind", "hardware_id"):
        op.drop_index(op.f(f"ix_runs_{column}"), table_name="runs")
    op.drop_table("runs")
    op.drop_table("hardware")
