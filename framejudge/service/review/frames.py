"""The frames a judge saw for a unit: sampled again with the sampler its verdict recorded (the
frame cache answers when it holds them), in the service's killable decoding processes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import or_, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from ...frame_sampler import FrameSamplerError, to_data_url
from ...judge.pipeline import turn_sampler
from ...runner.queue import Job, JobItem
from ...schema import GradeOptions, Item, SamplerParams
from ..problems import ProblemError
from ..store import holds, key_by_id
from ..uploads import Upload
from .queue import Unit

THUMBNAIL_QUALITY = 80


@dataclass
class UnitFrames:
    frames: list[tuple[float, str]] = field(default_factory=list)  # (timestamp, JPEG data URL)
    note: str | None = None  # what the reviewer should know about them
    window: tuple[float, float] | None = None


def unit_sampler(unit: Unit) -> tuple[SamplerParams | None, bool]:
    """(the sampler, whether the judge saw these frames): the verdict's own sampler (its window's
    frames, not seen as such by a judge shown a clip of it), or for a judge that read text only, the
    window its options would have sampled."""
    v = unit.verdict
    if v is not None and v.provenance.sampler is not None:
        return v.provenance.sampler, v.provenance.clip is None
    if unit.item is None:
        return None, False
    options = v.provenance.options if v is not None and v.provenance.options else GradeOptions()
    return turn_sampler(options.sampler, unit.item, unit.turn), False


def graded_video(engine: Engine, key_id: str, ref: str) -> Path | None:
    """The server path of the video `ref` (as the client named it) where one of this key's own
    grading jobs graded it; None where none did."""
    with Session(engine) as s:
        found = s.scalar(select(JobItem.item_json).join(Job, Job.id == JobItem.job_id)
                         .where(Job.key_id == key_id, or_(Job.kind.is_(None), Job.kind == "grade"),
                                JobItem.video_ref == ref, JobItem.status == "done").limit(1))
    video = Item.model_validate_json(found).video if found is not None else None
    return Path(video) if video else None


async def queue_video(service, ref: str, owner_id: str | None, fetched: list[Upload] | None = None) -> Path:
    """Where a review queue's video, named as its client named it, is read from: within what the
    queue's own key may reach now, never more. A key with the grade scope (or admin) reaches what
    it could grade or preview (its uploads, the media root, an allowed URL, fetched); one with the
    calibrate scope, its uploads and the media root (no URL is fetched for it); any other (a
    review-only key) only the videos its own jobs graded. A revoked or expired key, nothing."""
    owner = await asyncio.to_thread(key_by_id, service.engine, owner_id) if owner_id else None
    if owner is None:
        raise ProblemError(403, "Video not shown", "the API key that made this queue is revoked or has expired")
    if holds(owner, "grade"):
        return await service.media.resolve(ref, owner.id, fetched)
    graded = await asyncio.to_thread(graded_video, service.engine, owner.id, ref)
    if graded is not None:
        return graded
    if "\x00" not in ref and "://" not in ref and holds(owner, "calibrate"):
        return await service.media.resolve(ref, owner.id, fetched)
    why = ("fetching a video URL needs the grade scope" if "://" in ref and holds(owner, "calibrate") else
           "a queue made by a key without the grade or calibrate scope shows only the videos that key's own "
           "jobs graded")
    raise ProblemError(403, "Video not shown", f"{ref[:200]}: {why}")


async def unit_frames(service, unit: Unit, resolved: bool, owner: str | None) -> UnitFrames:
    """Frames for the unit page; a video that cannot be read gives a note, never an error page."""
    item = unit.item
    if item is None or not item.video:
        return UnitFrames(note="no video: the calibration was not given this item (or not this turn of it)" if item is None
                          else "this item has no video")
    params, seen = unit_sampler(unit)
    assert params is not None
    fetched: list[Upload] = []  # a video URL is fetched for this page only: kept, every view would add a copy
    path, name = None, item.video  # the page names the video as the client did, never by its server path
    try:
        path = Path(item.video) if resolved else await queue_video(service, item.video, owner, fetched)
        if resolved:
            name = service.media.name_of(path)
        result = await asyncio.to_thread(service.decoder.sample, path, params)
    except ProblemError as exc:
        return UnitFrames(note=f"the video cannot be shown: {exc.detail}")
    except (FrameSamplerError, OSError) as exc:
        why = exc.message if isinstance(exc, FrameSamplerError) else (exc.strerror or type(exc).__name__)
        if path is not None:
            why = why.replace(str(path), name)
        return UnitFrames(note=f"the video cannot be shown: {name}: {why}")
    finally:
        for upload in fetched:
            service.store.forget(upload)
    frames = await asyncio.to_thread(lambda: [(f.info.timestamp, to_data_url(f.image, THUMBNAIL_QUALITY))
                                              for f in result.frames])
    note = None
    if not seen:
        note = "the judge read the text only and saw no frames; these are the frames of the window it would have seen"
    elif unit.verdict is not None:
        recorded = [round(t, 3) for t in unit.verdict.provenance.frame_timestamps]
        if recorded != [round(t, 3) for t, _ in frames]:
            note = ("these frames are not the ones the judge saw (the video has changed since it was graded): "
                    f"the verdict names {', '.join(f'{t:.2f}' for t in recorded) or 'none'} s")
    return UnitFrames(frames=frames, note=note, window=result.window)
