"""Service settings from the environment (``PERFMODEL_*``)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """``PERFMODEL_DATABASE_URL`` (default: SQLite in ``PERFMODEL_DATA_DIR``), ``PERFMODEL_API_TOKEN``..."""

    model_config = SettingsConfigDict(env_prefix="PERFMODEL_", extra="ignore")

    data_dir: Path = Field(default=Path("var"), description="Where the embedded SQLite database lives")
    database_url: str | None = Field(default=None, description="SQLAlchemy URL; default sqlite in data_dir")
    api_token: str | None = Field(default=None, description="A token accepted for writes (besides stored ones)")
    read_requires_token: bool = False
    read_only: bool = Field(default=False, description="Refuse every write (403) and say so on the dashboard")
    max_body_bytes: int = Field(default=16 * 1024 * 1024, gt=0, description="Larger request bodies get 413")
    max_upload_bytes: int = Field(default=256 * 1024 * 1024, gt=0,
                                  description="Trace and model uploads larger than this get 413")
    max_trace_bytes: int = Field(default=1 << 30, gt=0,
                                 description="A trace larger than this once decompressed gets 413")
    max_trace_gzip_ratio: float = Field(
        default=100.0, gt=0, description="A gzip upload that inflates more than this many times its size (past "
                                         "64 MiB) gets 413: gzip bombs; real traces inflate 7-19x")
    max_parse_s: float = Field(default=120.0, gt=0,
                               description="A trace whose reading takes longer than this (seconds) gets 422")
    max_batch_ops: int = Field(default=10_000, gt=0, description="Larger /predict/batch requests get 422")
    prediction_cache_size: int = Field(default=65_536, ge=0)
    gc_thresholds: tuple[int, int, int] = Field(
        default=(50_000, 20, 20),
        description="Python gc thresholds: a 10,000-op batch allocates ~10^6 objects; the default (700, 10, 10) "
                    "rescans them dozens of times")
    job_workers: int = Field(default=1, ge=1, le=64,
                             description="Calibration fits run at once (each a worker process), across the service")
    job_memory_bytes: int = Field(default=2 * 2**30, ge=0,
                                  description="Address-space cap of one fit's worker process (0: no cap)")
    job_max_active: int = Field(default=32, ge=1, description="More queued or running jobs of a kind get 429")
    host: str = "127.0.0.1"
    port: int = 8000

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{(self.data_dir / 'perfmodel.sqlite3').resolve()}"
