"""Upkeep: removing old uploads nobody needs any more, and old cached frames; run from the command
line (`framejudge uploads prune`, from cron) and, with FRAMEJUDGE_UPLOAD_RETENTION_DAYS set, by the
server itself once an hour."""

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


RETENTION_EVERY_S = 3600.0  # how often the server applies its retention setting


@dataclass
class Pruned:
    deleted: list[Upload] = field(default_factory=list)
    kept: list[Upload] = field(default_factory=list)  # old enough, but still named by a job or a calibration
    frames: int = 0  # cached sampling results removed
    frame_bytes: int = 0

    @property
    def deleted_bytes(self) -> int:
        return sum(u.bytes for u in self.deleted)

    def summary(self) -> str:
        return (f"deleted {len(self.deleted)} upload(s), {self.deleted_bytes / 1024**2:.1f} MiB; removed "
                f"{self.frames} cached frame sampling(s), {self.frame_bytes / 1024**2:.1f} MiB")


def apply_retention(engine: Engine, folder: Path, older_than: timedelta, frames: Path | None = None,
                    now: datetime | None = None) -> Pruned:
    """prune_uploads, and the cached frames (in `frames`, the frame cache's folder) stored before
    the same time. Verdicts (a job's records, the verdict cache) are kept."""
    moment = now or datetime.now(timezone.utc)
    pruned = prune_uploads(engine, folder, older_than, moment)
    if frames is not None and frames.is_dir():
        from ..frame_sampler.cache import FrameCache

        cache = FrameCache(frames)
        try:
            pruned.frames, pruned.frame_bytes = cache.remove_older_than((moment - older_than).timestamp())
        finally:
            cache.close()
    return pruned


def prune_uploads(engine: Engine, folder: Path, older_than: timedelta, now: datetime | None = None) -> Pruned:
    """Delete uploaded (and fetched) videos older than `older_than` that no unfinished job and no
    stored calibration (or review queue, whose unit pages show the video) names."""
    cutoff = (now or datetime.now(timezone.utc)) - older_than
    pruned = Pruned()
    with Session(engine, expire_on_commit=False) as s, s.begin():  # what was kept or deleted, readable after
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
