"""Upkeep run from the command line (or cron): removing old uploads nobody needs any more."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from ..runner.queue import JobItem
from .store import CalibrationRun
from .uploads import UPLOAD_PREFIX, Upload


@dataclass
class Pruned:
    deleted: list[Upload] = field(default_factory=list)
    kept: list[Upload] = field(default_factory=list)  # old enough, but still named by a job or a calibration


def prune_uploads(engine: Engine, folder: Path, older_than: timedelta, now: datetime | None = None) -> Pruned:
    """Delete uploaded (and fetched) videos older than `older_than` that no unfinished job and no
    stored calibration (or review queue, whose unit pages show the video) names."""
    cutoff = (now or datetime.now(timezone.utc)) - older_than
    pruned = Pruned()
    with Session(engine) as s, s.begin():
        for upload in s.scalars(select(Upload).where(Upload.created_at < cutoff)).all():
            if waiting_jobs(s, upload) or calibrations_naming(s, upload):
                pruned.kept.append(upload)
                continue
            s.delete(upload)
            pruned.deleted.append(upload)
    # files go once their rows are gone: a crash in between leaves a stray file, never a dangling row
    for upload in pruned.deleted:
        (folder / upload.stored_as).unlink(missing_ok=True)
    return pruned


def waiting_jobs(s: Session, upload: Upload) -> list[str]:
    """The jobs with items still to grade (pending or running) that name this upload."""
    return list(s.scalars(select(JobItem.job_id).distinct().where(
        JobItem.status.in_(("pending", "running")), JobItem.item_json.contains(upload.stored_as))
        .order_by(JobItem.job_id)))


def calibrations_naming(s: Session, upload: Upload) -> list[str]:
    """The stored calibrations (and review queues) of the upload's own key whose inputs name this
    upload: by its id as the client gave it, or by its server path (a job's items, resolved). Another
    key's calibration cannot show it (its videos resolve for that key), so it cannot keep it either."""
    inputs = CalibrationRun.inputs_json
    return list(s.scalars(select(CalibrationRun.id).where(
        CalibrationRun.key_id == upload.key_id,
        inputs.contains(f'"{UPLOAD_PREFIX}{upload.id}"') | inputs.contains(upload.stored_as))
        .order_by(CalibrationRun.id)))
