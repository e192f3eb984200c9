"""Service settings: one pydantic model, from the environment (FRAMEJUDGE_SERVICE_*) or code."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
from pydantic import BaseModel, Field


def _default_db() -> str:
    folder = Path(platformdirs.user_data_dir("framejudge"))
    return f"sqlite:///{folder / 'service.db'}"


class Settings(BaseModel):
    database_url: str = Field(default_factory=_default_db, description="SQLite file (WAL) or a PostgreSQL URL")
    media_root: Path | None = Field(None, description="server-side video paths must lie inside this folder")
    judges: list[str] = Field(default_factory=lambda: ["reference"], description="judge specs clients may ask for")
    cors_origins: list[str] = Field(default_factory=list, description="closed unless listed")
    requests_per_minute: int = Field(120, ge=1, description="per API key")
    run_worker: bool = Field(True, description="grade submitted jobs in this process")

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        data: dict[str, object] = {}
        if env.get("FRAMEJUDGE_SERVICE_DB"):
            data["database_url"] = env["FRAMEJUDGE_SERVICE_DB"]
        if env.get("FRAMEJUDGE_MEDIA_ROOT"):
            data["media_root"] = Path(env["FRAMEJUDGE_MEDIA_ROOT"])
        if env.get("FRAMEJUDGE_SERVICE_JUDGES"):
            data["judges"] = [j.strip() for j in env["FRAMEJUDGE_SERVICE_JUDGES"].split(",") if j.strip()]
        if env.get("FRAMEJUDGE_CORS_ORIGINS"):
            data["cors_origins"] = [o.strip() for o in env["FRAMEJUDGE_CORS_ORIGINS"].split(",") if o.strip()]
        if env.get("FRAMEJUDGE_RATE_LIMIT"):
            data["requests_per_minute"] = int(env["FRAMEJUDGE_RATE_LIMIT"])
        return cls(**data)
