"""Grading one item, frame previews, and uploaded videos."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from ...frame_sampler import (FrameSamplerError, NotARegularFile, SampleResult, VideoNotFound, contact_sheet,
                              to_data_url)
from ...judge.pipeline import late_question
from ...runner.worker import show_video_ref
from ...schema import Item
from ..bodies import StrictJsonRoute
from ..context import PageDep, ServiceDep, authorized
from ..jobs import aware
from ..limits import check_frame_pixels, check_frames_response, too_large
from ..models import (FramePayload, FramesRequest, FramesResponse, GradeRequest, GradeResponse, StoredVideo,
                      UploadedVideo, VideoPage,
                      UploadResponse)
from ..problems import MEDIA, ProblemError, problems
from ..store import ApiKey, owned_page
from ..uploads import UPLOAD_PREFIX, Upload

router = APIRouter(route_class=StrictJsonRoute)
GradeKey = Annotated[ApiKey, Depends(authorized("grade"))]


@router.post("/v1/grade", tags=["grading"], response_model=GradeResponse, responses=problems(*MEDIA))
async def grade(body: GradeRequest, svc: ServiceDep, key: GradeKey) -> GradeResponse:
    rubric = svc.judge_and_rubric(body.judge, body.rubric)
    options = body.grade_options()
    check_frame_pixels(options.sampler, svc.settings.max_frame_megapixels)
    svc.check_options(body.judge, options)
    svc.check_triage(body.judge, rubric, options)
    fetched: list[Upload] = []  # videos fetched from URLs for this request only
    try:
        [item], [ref] = await svc.resolved([body.item], key, fetched)
        await asyncio.to_thread(_asked_within, item, body.item.video, svc.decoder.duration)
        grader = svc.grader(body.judge, rubric, options.model_copy(update={"triage": None}))
        records = await grader.grade(item)
        if options.triage is not None:
            from ...calibration.triage import mark_graded

            records = mark_graded(records, options.triage, grader)
    finally:
        for upload in fetched:
            svc.store.forget(upload)
    if ref is not None:
        show_video_ref(records, ref, item.video)
    svc.metrics.record(records)
    return GradeResponse(records=records)


def _asked_within(item: Item, ref: str | None, video_duration: Callable[[str], float]) -> None:
    """422 where a turn was asked after the end of the item's video (its duration read as sampling
    reads it, in the server's capped decoding processes; a video that cannot be read is left to the
    grade, which records why)."""
    if item.video is None or all(t.time is None for t in item.turns):
        return
    try:
        duration = video_duration(item.video)
    except FrameSamplerError:
        return
    late = late_question(item, duration)
    if late is not None:
        raise ProblemError(422, "Question after the video", f"{late} ({ref})" if ref else late,
                           code="question_after_video")


@router.post("/v1/frames", tags=["frames"], operation_id="sample_frames", response_model=FramesResponse,
             responses=problems(*MEDIA))
async def frames(body: FramesRequest, svc: ServiceDep, key: GradeKey) -> FramesResponse:
    """Frames as JPEG data URLs, or one contact sheet. What a request may ask for is bounded before
    anything is decoded: the pixels (frames x max_side x max_side) and the answer's estimated size."""
    pixels = check_frame_pixels(body.sampler, svc.settings.max_frame_megapixels, body.contact_sheet)
    check_frames_response(pixels, body.quality, svc.settings.max_frames_response_mb)
    fetched: list[Upload] = []
    try:
        path = await svc.media.resolve(body.video, key.id, fetched)
        result = await asyncio.to_thread(svc.decoder.sample, path, body.sampler)
    except (VideoNotFound, NotARegularFile) as exc:  # named as the client named it, as grade's records do
        raise ProblemError(404, "No such video", f"{body.video}: {exc.message}", code=exc.code) from None
    except FrameSamplerError as exc:
        raise ProblemError(422, "Unusable video", f"{body.video}: {exc.message}", code=exc.code) from None
    finally:
        for upload in fetched:
            svc.store.forget(upload)
    sheet, payloads = await asyncio.to_thread(_encode, result, body, svc.settings.max_frames_response_mb)
    video = result.video.model_copy(update={"path": body.video})
    return FramesResponse(video=video, window=result.window, frames=payloads, contact_sheet=sheet,
                          warnings=result.warnings)


def _encode(result: SampleResult, body: FramesRequest, max_mb: float) -> tuple[str | None, list[FramePayload]]:
    """The contact sheet or the frames as data URLs; 422 as soon as they pass `max_mb` (frames
    that compress worse than the estimate)."""
    limit = max_mb * 1024**2
    if body.contact_sheet:
        sheet = to_data_url(contact_sheet([f.image for f in result.frames], result.timestamps), body.quality)
        if len(sheet) > limit:
            raise ProblemError(422, "Response too large", too_large(f"over {max_mb:g} MiB", body.quality, max_mb))
        return sheet, []
    payloads, total = [], 0
    for f in result.frames:
        payloads.append(FramePayload(info=f.info, data_url=to_data_url(f.image, body.quality)))
        total += len(payloads[-1].data_url)
        if total > limit:
            raise ProblemError(422, "Response too large", too_large(f"over {max_mb:g} MiB", body.quality, max_mb))
    return None, payloads


@router.get("/v1/videos", tags=["videos"], response_model=VideoPage)
def list_videos(svc: ServiceDep, key: GradeKey, page: PageDep) -> VideoPage:
    """This key's stored videos (uploaded, or fetched from URLs), newest first, a page at a time."""
    rows = owned_page(svc.engine, Upload, key.id, page.offset, page.limit)
    return VideoPage(offset=page.offset, limit=page.limit, videos=[
        StoredVideo(id=UPLOAD_PREFIX + u.id, filename=u.filename, bytes=u.bytes, sha256=u.sha256,
                    container=u.container, created_at=aware(u.created_at)) for u in rows])


@router.post("/v1/videos", tags=["videos"], status_code=201, response_model=UploadResponse,
             responses={200: {"model": UploadResponse, "description": "Every video's content was already kept by "
                                                                      "this key: nothing more was stored"},
                        **problems(400, 413)},
             openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
                 "type": "object", "properties": {"file": {"type": "array", "items": {
                     "type": "string", "format": "binary"}}}}}}}})
async def upload_videos(request: Request, response: Response, svc: ServiceDep, key: GradeKey) -> UploadResponse:
    """Upload videos (multipart/form-data, one or more file parts). Each is size-checked while it
    arrives, sniffed and probed; refer to it afterwards by the returned id ('upload:<hex>').
    Content this key already keeps is stored once: its video is answered with the stored
    upload's id and `duplicate: true`, and the answer is 200 when every video was such (201
    when any was stored). Each key keeps at most FRAMEJUDGE_UPLOAD_QUOTA_MB and
    FRAMEJUDGE_UPLOAD_QUOTA_FILES of videos: past either, 413."""
    form = await svc.multipart(request, key)
    if not form.files:
        raise ProblemError(422, "No video", "the multipart body holds no file part")
    if all(upload.reused for _, upload, _ in form.files):
        response.status_code = 200
    return UploadResponse(videos=[_uploaded(upload, info) for _, upload, info in form.files])


@router.delete("/v1/videos/{upload_id}", tags=["videos"], status_code=204, responses=problems(404, 409))
def delete_video(upload_id: str, svc: ServiceDep, key: GradeKey) -> None:
    """Delete one of this key's uploads; 409 while a job that names it has items still to grade
    (cancel the job, or wait for it, first), or while a stored calibration (a review queue) names it."""
    from sqlalchemy.orm import Session

    from ..maintenance import calibrations_naming, waiting_jobs

    ref = upload_id if upload_id.startswith(UPLOAD_PREFIX) else UPLOAD_PREFIX + upload_id
    upload = svc.store.find(ref, key.id)
    with Session(svc.engine) as s:
        jobs = waiting_jobs(s, upload)
        calibrations = [] if jobs else calibrations_naming(s, upload)
    if jobs:
        more = f" (and {len(jobs) - 1} more)" if len(jobs) > 1 else ""
        raise ProblemError(409, "Upload in use", f"{ref} is needed by job {jobs[0]}{more}, which has not finished; "
                                                 "cancel the job (DELETE /v1/jobs/{id}) or wait for it")
    if calibrations:
        more = f" (and {len(calibrations) - 1} more)" if len(calibrations) > 1 else ""
        raise ProblemError(409, "Upload in use", f"{ref} is shown by calibration {calibrations[0]}{more}, whose "
                                                 "review pages show its frames: it is kept for them")
    svc.store.forget(upload)


def _uploaded(upload: Upload, info: Any) -> UploadedVideo:
    ref = UPLOAD_PREFIX + upload.id
    return UploadedVideo(id=ref, filename=upload.filename, bytes=upload.bytes, sha256=upload.sha256,
                         container=upload.container, video=info.model_copy(update={"path": ref}),
                         duplicate=upload.reused)
