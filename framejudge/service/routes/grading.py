"""Grading one item, frame previews, and uploaded videos."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from ...frame_sampler import FrameSamplerError, NotARegularFile, VideoNotFound, contact_sheet, to_data_url
from ...runner.worker import show_video_ref
from ..context import ServiceDep, authorized
from ..models import (FramePayload, FramesRequest, FramesResponse, GradeRequest, GradeResponse, UploadedVideo,
                      UploadResponse)
from ..problems import ProblemError
from ..store import ApiKey
from ..uploads import UPLOAD_PREFIX, Upload

router = APIRouter()
GradeKey = Annotated[ApiKey, Depends(authorized("grade"))]


@router.post("/v1/grade", tags=["grading"], response_model=GradeResponse)
async def grade(body: GradeRequest, svc: ServiceDep, key: GradeKey) -> GradeResponse:
    rubric = svc.judge_and_rubric(body.judge, body.rubric)
    fetched: list[Upload] = []  # videos fetched from URLs for this request only
    try:
        [item], [ref] = await svc.resolved([body.item], key, fetched)
        records = await svc.grader(body.judge, rubric, body.grade_options()).grade(item)
    finally:
        for upload in fetched:
            svc.store.forget(upload)
    if ref is not None:
        show_video_ref(records, ref, item.video)
    svc.metrics.record(records)
    return GradeResponse(records=records)


@router.post("/v1/frames", tags=["frames"], response_model=FramesResponse)
async def frames(body: FramesRequest, svc: ServiceDep, key: GradeKey) -> FramesResponse:
    fetched: list[Upload] = []
    try:
        path = await svc.media.resolve(body.video, key.id, fetched)
        result = await asyncio.to_thread(svc.decoder.sample, path, body.sampler)
    except (VideoNotFound, NotARegularFile) as exc:
        raise ProblemError(404, "No such video", exc.message) from None
    except FrameSamplerError as exc:
        raise ProblemError(422, "Unusable video", exc.message) from None
    finally:
        for upload in fetched:
            svc.store.forget(upload)
    sheet = None
    payloads = []
    if body.contact_sheet:
        sheet = to_data_url(contact_sheet([f.image for f in result.frames], result.timestamps), body.quality)
    else:
        payloads = [FramePayload(info=f.info, data_url=to_data_url(f.image, body.quality)) for f in result.frames]
    video = result.video.model_copy(update={"path": body.video})
    return FramesResponse(video=video, window=result.window, frames=payloads, contact_sheet=sheet,
                          warnings=result.warnings)


@router.post("/v1/videos", tags=["videos"], status_code=201, response_model=UploadResponse,
             openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
                 "type": "object", "properties": {"file": {"type": "array", "items": {
                     "type": "string", "format": "binary"}}}}}}}})
async def upload_videos(request: Request, svc: ServiceDep, key: GradeKey) -> UploadResponse:
    """Upload videos (multipart/form-data, one or more file parts). Each is size-checked while it
    arrives, sniffed and probed; refer to it afterwards by the returned id ('upload:<hex>')."""
    form = await svc.multipart(request, key)
    if not form.files:
        raise ProblemError(422, "No video", "the multipart body holds no file part")
    return UploadResponse(videos=[_uploaded(upload, info) for _, upload, info in form.files])


@router.delete("/v1/videos/{upload_id}", tags=["videos"], status_code=204)
def delete_video(upload_id: str, svc: ServiceDep, key: GradeKey) -> None:
    """Delete one of this key's uploads. Turns of jobs not yet graded that name it will record
    a bad_input judge error for it, whatever the judge."""
    ref = upload_id if upload_id.startswith(UPLOAD_PREFIX) else UPLOAD_PREFIX + upload_id
    svc.store.forget(svc.store.find(ref, key.id))


def _uploaded(upload: Upload, info: Any) -> UploadedVideo:
    ref = UPLOAD_PREFIX + upload.id
    return UploadedVideo(id=ref, filename=upload.filename, bytes=upload.bytes, sha256=upload.sha256,
                         container=upload.container, video=info.model_copy(update={"path": ref}))
