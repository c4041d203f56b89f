"""The web dashboard, served by the same app as the API."""

from __future__ import annotations

from fastapi import FastAPI


def mount_dashboard(app: FastAPI) -> None:
    """Mount the dashboard's pages and static files on ``app`` (the dashboard issue fills this in)."""
