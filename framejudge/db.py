"""The database every durable part shares (service keys, uploads, jobs; the queue its workers
take from): SQLAlchemy over SQLite in WAL mode, or PostgreSQL by URL, with one code path."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import ColumnDefault, create_engine, event, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase


CONNECT_TIMEOUT_S = 10


class Base(DeclarativeBase):
    pass


def engine_for(url: str) -> Engine:
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _wal(dbapi_connection, _record):
            cur = dbapi_connection.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()
    else:
        # an unreachable server is an error within seconds, not after the system's TCP timeout
        args = {"connect_timeout": CONNECT_TIMEOUT_S} if url.startswith(("postgresql", "postgres:")) else {}
        engine = create_engine(url, pool_pre_ping=True, connect_args=args)
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
                given = column.default
                default = given.arg if isinstance(given, ColumnDefault) and given.is_scalar else None
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


def shown_url(url: str) -> str:
    """The database URL without its password, for messages and logs."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1]


def open_problem(exc: BaseException) -> str:
    """Why a database could not be opened, in one line (the driver's own words where it has them)."""
    if isinstance(exc, ModuleNotFoundError):
        return (f"its driver is not installed ({exc.name}); framejudge uses psycopg 3: "
                "postgresql+psycopg://user:password@host/database")
    if isinstance(exc, FileExistsError):
        return f"{exc.filename} is not a folder"
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    cause = getattr(exc, "orig", None) or exc
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    return lines[0] if lines else type(cause).__name__
