"""The database every durable part shares (service keys, uploads, jobs; the queue its workers
take from): SQLAlchemy over SQLite in WAL mode, or PostgreSQL by URL, with one code path."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    pass


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
    _add_missing(engine)
    return engine


def _add_missing(engine: Engine) -> None:
    """Columns and indexes a newer framejudge added to tables an older one created (every added
    column is nullable or has a default, so rows already there stay valid)."""
    seen = inspect(engine)
    with engine.begin() as conn:
        for table in Base.metadata.sorted_tables:
            present = {c["name"] for c in seen.get_columns(table.name)}
            for column in table.columns:
                if column.name in present:
                    continue
                kind = column.type.compile(engine.dialect)
                default = column.default.arg if column.default is not None and column.default.is_scalar else None
                clause = f" DEFAULT {default!r}" if isinstance(default, (int, float)) else ""
                conn.execute(text(f'ALTER TABLE {table.name} ADD COLUMN {column.name} {kind}{clause}'))
        for table in Base.metadata.sorted_tables:
            for index in table.indexes:
                index.create(conn, checkfirst=True)


def ping(engine: Engine) -> bool:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return True
    except Exception:
        return False
