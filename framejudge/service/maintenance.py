"""Upkeep run from the command line (or cron): removing old uploads nobody needs any more."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from ..runner.queue import JobItem
from .uploads import Upload


def prune_uploads(engine: Engine, folder: Path, older_than: timedelta, now: datetime | None = None) -> list[Upload]:
    """Delete uploaded (and fetched) videos older than `older_than` that no unfinished job still
    names; return the ones deleted."""
    cutoff = (now or datetime.now(timezone.utc)) - older_than
    deleted = []
    with Session(engine) as s, s.begin():
        for upload in s.scalars(select(Upload).where(Upload.created_at < cutoff)).all():
            if waiting_jobs(s, upload):
                continue
            s.delete(upload)
            deleted.append(upload)
    # files go once their rows are gone: a crash in between leaves a stray file, never a dangling row
    for upload in deleted:
        (folder / upload.stored_as).unlink(missing_ok=True)
    return deleted


def waiting_jobs(s: Session, upload: Upload) -> list[str]:
    """The jobs with items still to grade (pending or running) that name this upload."""
    return list(s.scalars(select(JobItem.job_id).distinct().where(
        JobItem.status.in_(("pending", "running")), JobItem.item_json.contains(upload.stored_as))
        .order_by(JobItem.job_id)))
