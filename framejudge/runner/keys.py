"""The API keys that queued jobs belong to, as the queue sees them: a job's items are leased only
while its key lives (not revoked, not past its expiry), so a key that is revoked or expires spends
nothing more, whichever worker (the server's own, or `framejudge worker` elsewhere) would take them.
The service issues and checks the keys (framejudge.service.store); the table is here, below both."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import Boolean, ColumnElement, DateTime, String, exists, or_, select
from sqlalchemy.orm import InstrumentedAttribute, Mapped, mapped_column

from ..db import Base


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)  # the public prefix of the key
    secret_sha256: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200), default="")
    scopes: Mapped[str] = mapped_column(String(200))  # comma-separated
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)  # None: never


def aware(moment: datetime) -> datetime:
    """SQLite hands back stored UTC times without their zone."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def key_state(key: ApiKey, now: datetime | None = None) -> str:
    """active, revoked or expired."""
    if key.revoked:
        return "revoked"
    if key.expires_at is not None and aware(key.expires_at) <= (now or datetime.now(timezone.utc)):
        return "expired"
    return "active"


def dead(now: datetime) -> ColumnElement[bool]:
    """The keys revoked or past their expiry at `now` (a condition on ApiKey)."""
    return or_(ApiKey.revoked.is_(True), ApiKey.expires_at <= now)


def owner_lives(key_id: InstrumentedAttribute[str], now: datetime) -> ColumnElement[bool]:
    """Whether the key `key_id` names is neither revoked nor expired at `now` (a job whose key has
    no row, as in tests of the queue alone, is not held back)."""
    return ~exists(select(ApiKey.id).where(ApiKey.id == key_id, dead(now)))
