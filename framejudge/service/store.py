"""The service's own tables (API keys, calibration results) on the shared database (framejudge.db)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

from sqlalchemy import DateTime, String, Text, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Mapped, Session, mapped_column

from ..db import Base, engine_for, ping  # noqa: F401 - routes and commands take the shared engine from here
from ..errors import FramejudgeError
from ..runner.keys import ApiKey, aware, key_state  # the keys' table lies below the queue
from ..runner.queue import Stopped, stop_key_jobs

T = TypeVar("T", bound=Base)

SCOPES = ("grade", "calibrate", "review", "metrics", "admin")


class CalibrationRun(Base):
    __tablename__ = "calibrations"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    key_id: Mapped[str | None] = mapped_column(String(16), index=True, nullable=True)  # the key that ran it
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    result_json: Mapped[str] = mapped_column(Text)
    # what the review queue shows: the labels, records and items the audit was computed from
    inputs_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    reviewers: Mapped[str | None] = mapped_column(Text, nullable=True)  # comma-separated key ids


def holds(key: ApiKey, scope: str) -> bool:
    """Whether the key has `scope` (an admin key has every scope)."""
    scopes = key.scopes.split(",")
    return scope in scopes or "admin" in scopes


def owned_page(engine: Engine, table: type[T], key_id: str, offset: int, limit: int) -> list[T]:
    """A page of the rows of `table` (a stored object with key_id, created_at and id) that belong to
    this key, newest first; detached from the session."""
    owned: Any = table  # its key_id, created_at and id columns, which Base does not declare
    with Session(engine) as s:
        rows = list(s.scalars(select(table).where(owned.key_id == key_id)
                              .order_by(owned.created_at.desc(), owned.id.desc()).offset(offset).limit(limit)))
        s.expunge_all()
        return rows


def generated_id(value: str) -> bool:
    """Whether `value` could be an id this server generated (lowercase hex). Anything else is not
    looked up at all: PostgreSQL refuses some strings outright (a NUL), and the answer is 404 anyway."""
    return 0 < len(value) <= 64 and all(c in "0123456789abcdef" for c in value)


def save_calibration(engine: Engine, key_id: str, result_json: str, inputs_json: str | None = None,
                     reviewers: list[str] | None = None) -> str:
    run_id = secrets.token_hex(8)
    with Session(engine) as s, s.begin():
        s.add(CalibrationRun(id=run_id, key_id=key_id, created_at=datetime.now(timezone.utc), result_json=result_json,
                             inputs_json=inputs_json, reviewers=",".join(reviewers or []) or None))
    return run_id


def load_calibration(engine: Engine, run_id: str, key: ApiKey) -> str | None:
    """The stored result, for the key that ran it (or an admin key); None for anyone else, as for
    an id that does not exist."""
    if not generated_id(run_id):
        return None
    with Session(engine) as s:
        run = s.get(CalibrationRun, run_id)
        if run is None or (run.key_id != key.id and "admin" not in key.scopes.split(",")):
            return None
        return run.result_json


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(engine: Engine, scopes: list[str], name: str = "", expires_in: timedelta | None = None) -> str:
    """A new key, returned once in full: fj_<id>_<secret>. Only the secret's SHA-256 is stored.
    With `expires_in`, it is refused (as a revoked key is) from then on, and its jobs stop."""
    unknown = set(scopes) - set(SCOPES)
    if unknown or not scopes:
        raise ValueError(f"scopes must be among {', '.join(SCOPES)}; got {', '.join(scopes) or 'none'}")
    if expires_in is not None and expires_in <= timedelta(0):
        raise ValueError("a key's lifetime must be positive")
    key_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    now = datetime.now(timezone.utc)
    with Session(engine) as s, s.begin():
        s.add(ApiKey(id=key_id, secret_sha256=_digest(secret), name=name, scopes=",".join(sorted(set(scopes))),
                     created_at=now, revoked=False, expires_at=now + expires_in if expires_in else None))
    return f"fj_{key_id}_{secret}"


class KeyRefused(FramejudgeError, ValueError):
    """A key that is not accepted: unknown (or not its secret), revoked, or expired."""

    code = "key_refused"


def verify_key(engine: Engine, token: str) -> ApiKey:
    """The key this token is, while it lives; KeyRefused saying why not. Only the key's holder (its
    secret matches) learns that it was revoked or has expired; anything else is unknown."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != "fj" or not generated_id(parts[1]):  # a form's text may hold a NUL
        raise KeyRefused("unknown API key")
    with Session(engine) as s:
        key = s.scalar(select(ApiKey).where(ApiKey.id == parts[1]))
        if key is None or not secrets.compare_digest(key.secret_sha256, _digest(parts[2])):
            raise KeyRefused("unknown API key")
        state = key_state(key)
        if state == "revoked":
            raise KeyRefused(f"API key {key.id} has been revoked")
        if state == "expired":
            assert key.expires_at is not None
            raise KeyRefused(f"API key {key.id} expired at {aware(key.expires_at):%Y-%m-%d %H:%M:%S} UTC")
        s.expunge(key)
        return key


def check_key(engine: Engine, token: str) -> ApiKey | None:
    """The key, while it lives; None for an unknown, revoked or expired one."""
    try:
        return verify_key(engine, token)
    except KeyRefused:
        return None


def list_keys(engine: Engine) -> list[ApiKey]:
    with Session(engine) as s:
        keys = list(s.scalars(select(ApiKey).order_by(ApiKey.created_at)))
        s.expunge_all()
        return keys


@dataclass
class Revoked:
    """A revoked key, and what revoking it stopped (its unfinished jobs, cancelled)."""

    key_id: str
    stopped: Stopped


def revoke_key(engine: Engine, given: str) -> Revoked | None:
    """Revoke a key given by its id ('<id>' or 'fj_<id>') or in full ('fj_<id>_<secret>', whose
    secret must be that key's: a mistyped key revokes nothing), and cancel its unfinished jobs in
    the same transaction: no worker takes another of their items, and the items being graded are
    not recorded. None if there is no such key; WrongSecret if the secret is not its. Revoking a
    revoked key again stops anything left (nothing, usually)."""
    parts = given.split("_", 2) if given.startswith("fj_") else ["fj", given]
    key_id, secret = parts[1], (parts[2] if len(parts) == 3 else None)
    with Session(engine) as s, s.begin():
        key = s.get(ApiKey, key_id) if generated_id(key_id) else None
        if key is None:
            return None
        if secret is not None and not secrets.compare_digest(key.secret_sha256, _digest(secret)):
            raise WrongSecret(f"that is not the secret of key {key_id}; nothing revoked (to revoke key "
                              f"{key_id}, give its id alone)")
        key.revoked = True
        s.flush()
        return Revoked(key_id, stop_key_jobs(s, [key_id]))


class WrongSecret(FramejudgeError, ValueError):
    """A whole key was given whose secret is not the stored key's."""

    code = "wrong_secret"


def key_by_id(engine: Engine, key_id: str) -> ApiKey | None:
    """A key that is still valid (neither revoked nor expired), by its id (a browser session's key
    is looked up again on every request)."""
    with Session(engine) as s:
        key = s.get(ApiKey, key_id) if generated_id(key_id) else None
        if key is None or key_state(key) != "active":
            return None
        s.expunge(key)
        return key
