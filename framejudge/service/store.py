"""Persistence (SQLAlchemy): SQLite in WAL mode by default, PostgreSQL by URL, one code path."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import Boolean, DateTime, String, Text, create_engine, event, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

SCOPES = ("grade", "calibrate", "metrics", "admin")


class Base(DeclarativeBase):
    pass


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)  # the public prefix of the key
    secret_sha256: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200), default="")
    scopes: Mapped[str] = mapped_column(String(200))  # comma-separated
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class CalibrationRun(Base):
    __tablename__ = "calibrations"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    result_json: Mapped[str] = mapped_column(Text)


def generated_id(value: str) -> bool:
    """Whether `value` could be an id this server generated (lowercase hex). Anything else is not
    looked up at all: PostgreSQL refuses some strings outright (a NUL), and the answer is 404 anyway."""
    return 0 < len(value) <= 64 and all(c in "0123456789abcdef" for c in value)


def save_calibration(engine: Engine, result_json: str) -> str:
    run_id = secrets.token_hex(8)
    with Session(engine) as s, s.begin():
        s.add(CalibrationRun(id=run_id, created_at=datetime.now(timezone.utc), result_json=result_json))
    return run_id


def load_calibration(engine: Engine, run_id: str) -> str | None:
    if not generated_id(run_id):
        return None
    with Session(engine) as s:
        run = s.get(CalibrationRun, run_id)
        return None if run is None else run.result_json


def engine_for(url: str) -> Engine:
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _wal(dbapi_connection, _record):  # type: ignore[no-untyped-def]
            cur = dbapi_connection.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()
    else:
        engine = create_engine(url, pool_pre_ping=True)
    Base.metadata.create_all(engine)
    return engine


def ping(engine: Engine) -> bool:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except Exception:
        return False


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(engine: Engine, scopes: list[str], name: str = "") -> str:
    """A new key, returned once in full: fj_<id>_<secret>. Only the secret's SHA-256 is stored."""
    unknown = set(scopes) - set(SCOPES)
    if unknown or not scopes:
        raise ValueError(f"scopes must be among {', '.join(SCOPES)}; got {', '.join(scopes) or 'none'}")
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    with Session(engine) as s, s.begin():
        s.add(ApiKey(id=key_id, secret_sha256=_digest(secret), name=name, scopes=",".join(sorted(set(scopes))),
                     created_at=datetime.now(timezone.utc), revoked=False))
    return f"fj_{key_id}_{secret}"


def check_key(engine: Engine, token: str) -> ApiKey | None:
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != "fj":
        return None
    with Session(engine) as s:
        key = s.scalar(select(ApiKey).where(ApiKey.id == parts[1]))
        if key is None or key.revoked or not secrets.compare_digest(key.secret_sha256, _digest(parts[2])):
            return None
        s.expunge(key)
        return key


def list_keys(engine: Engine) -> list[ApiKey]:
    with Session(engine) as s:
        keys = list(s.scalars(select(ApiKey).order_by(ApiKey.created_at)))
        s.expunge_all()
        return keys


def revoke_key(engine: Engine, key_id: str) -> bool:
    """Revoke by the key's id (the part after 'fj_'); False if there is no such key."""
    with Session(engine) as s, s.begin():
        key = s.get(ApiKey, key_id) if generated_id(key_id) else None
        if key is None:
            return False
        key.revoked = True
        return True
