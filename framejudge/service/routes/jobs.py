"""Durable batch jobs: submit, follow, read verdicts, cancel."""

from __future__ import annotations

import asyncio
import json
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, Field, ValidationError

from ...files import first_problem, not_utf8, text_line
from ...judge.batch import checked_items
from ...leaderboard.plan import check_battle_job
from ...rubrics.model import Rubric
from ...schema import MAX_TURNS, GradeOptions, Item, JudgeError, Verdict
from ..bodies import LARGE_BODY, StrictJsonRoute, collector_paused, strict_body
from ..context import MAX_BODY, MAX_JOB_ITEMS, PageDep, Service, ServiceDep, authorized
from ..jobs import (IdempotencyMismatch, JobStatus, cancel_job, create_job, idempotent_job, job_records, job_status,
                    list_jobs, parse_items_body, remove_job, request_hash)
from ..limits import capped_stream, check_frame_pixels
from ..problems import MEDIA, ProblemError, not_json, problems
from ..store import ApiKey
from ..uploads import UPLOAD_PREFIX, Form, Upload

router = APIRouter(route_class=StrictJsonRoute)
PAGE_DEFAULT, PAGE_MAX = 100, 1000  # records in a JSON page of a job's verdicts
GradeKey = Annotated[ApiKey, Depends(authorized("grade"))]
MAX_RECORDS = MAX_JOB_ITEMS * MAX_TURNS  # the most records a job holds

ITEMS_SCHEMA = {"type": "array", "minItems": 1, "maxItems": MAX_JOB_ITEMS, "items": {"$ref": "#/components/schemas/Item"}}
PRIORITY = {"type": "integer", "minimum": -100, "maximum": 100, "default": 0}
# One shape per media type. A JSON body is documented as the object (a component: the JobRequest
# model of generated clients); a bare JSON list of items is still taken (as it always was), but not
# documented: a oneOf of the two defeats client generators.
SCHEMAS = {"JobRequest": {
    "title": "JobRequest", "type": "object", "required": ["items"], "additionalProperties": False,
    "description": "A job: its items, with options and priority (a bare JSON list of items is also taken)",
    "properties": {"items": ITEMS_SCHEMA, "options": {"$ref": "#/components/schemas/GradeOptions"},
                   "priority": PRIORITY}}}
JOBS_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"$ref": "#/components/schemas/JobRequest"}},
    "application/x-ndjson": {"schema": {**ITEMS_SCHEMA, "description": "JSONL: one item per line"}},
    "multipart/form-data": {"schema": {"type": "object", "required": ["items"], "properties": {
        "items": {"type": "string", "description": "the items, as JSON or JSONL; a video named by an uploaded "
                                                   "file's name is that file"},
        "options": {"type": "string", "description": "GradeOptions as JSON"},
        "video": {"type": "array", "items": {"type": "string", "format": "binary"}}}}},
}}}


@router.post("/v1/jobs", tags=["jobs"], status_code=202, response_model=JobStatus, openapi_extra=JOBS_BODY,
             responses=problems(*MEDIA))
async def submit_job(
    request: Request, svc: ServiceDep, key: GradeKey,
    judge: str = Query("reference", max_length=500), rubric: str = Query("video-qa", max_length=200),
    options: str | None = Query(None, max_length=20_000, description="GradeOptions as JSON (swap, samples, "
                                "blind, cache, jpeg_quality, sampler: strategy, n, lookback, ...)"),
    n: int | None = Query(None, description="shorthand for options.sampler.n"),
    lookback: float | None = Query(None, description="shorthand for options.sampler.lookback"),
    priority: int | None = Query(None, ge=-100, le=100, description="order among this key's jobs, higher first"),
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> Any:
    """A batch of items graded in the background: a JSON list, {"items": [...], "options": {...},
    "priority": N}, JSONL, or multipart/form-data with an `items` part (JSON or JSONL), an optional
    `options` part and video file parts that items name by their file name. The options are the
    same as `framejudge grade`'s (one model, GradeOptions)."""
    the_rubric = svc.judge_and_rubric(judge, rubric)
    content_type = request.headers.get("content-type", "")
    given: list[Any] = [] if options is None else [_json_option(options)]  # options, from wherever given
    form = None
    if content_type.startswith("multipart/form-data"):
        form = await svc.multipart(request, key)
        raw = b""
    else:
        raw = b"".join([chunk async for chunk in capped_stream(request, MAX_BODY)])
    large = len(raw) + sum(len(text) for text in (form.fields.values() if form is not None else [])) > LARGE_BODY
    with collector_paused() if large else nullcontext():  # until what the body made is gone again
        return await _submit(svc, key, judge, rubric, the_rubric, raw, content_type, form, given, n, lookback,
                             priority, idempotency_key)


async def _submit(svc: Service, key: ApiKey, judge: str, rubric: str, the_rubric: Rubric, raw: bytes,
                  content_type: str, form: Form | None, given: list[Any], n: int | None, lookback: float | None,
                  priority: int | None, idempotency_key: str | None) -> JobStatus | None:
    """The job of a submission's body, stored (or the job a retry names). Reading, checking and
    storing the items run in worker threads: a job of 100,000 items holds no other request."""
    fetched: list[Upload] = []  # videos fetched from URLs for this job
    try:  # all or nothing: a refused job keeps none of the videos its request uploaded or fetched
        asked = await asyncio.to_thread(_read_job, svc, judge, rubric, the_rubric, raw, content_type, form,
                                        given, n, lookback, priority)
        try:
            existing = await asyncio.to_thread(idempotent_job, svc.engine, key.id, idempotency_key, asked.fingerprint)
            if existing is None:
                resolved, refs = await svc.resolved(asked.items, key, fetched)
                job_id, created = await asyncio.to_thread(
                    create_job, svc.engine, key.id, resolved, judge, rubric, asked.options, idempotency_key, refs,
                    priority=asked.priority, fingerprint=asked.fingerprint, judge_endpoint=svc.judges.endpoint_of(judge))
        except IdempotencyMismatch as exc:
            raise ProblemError(422, "Idempotency-Key reused", str(exc), code=exc.code) from None
    except BaseException:
        await asyncio.to_thread(_forget, svc, form, fetched)
        raise
    if existing is not None:  # a retry: answered before any fetch is repeated, its uploads not kept
        await asyncio.to_thread(_forget, svc, form, fetched)
        return await asyncio.to_thread(job_status, svc.engine, existing)
    if not created:  # the same Idempotency-Key won a race: that job has its own videos
        await asyncio.to_thread(_forget, svc, form, fetched)
    return await asyncio.to_thread(job_status, svc.engine, job_id)


@dataclass
class _Asked:
    """A job submission, read and checked: its items (uploaded videos by their upload ids), options,
    priority and the request's hash (for Idempotency-Key)."""

    items: list[Item]
    options: GradeOptions
    priority: int
    fingerprint: str


def _read_job(svc: Service, judge: str, rubric: str, the_rubric: Rubric, raw: bytes, content_type: str,
              form: Form | None, given: list[Any], n: int | None, lookback: float | None,
              priority: int | None) -> _Asked:
    """The submission's items and options (`given`: those of the query, if any), read from its
    body and checked (in a worker thread)."""
    given = list(given)
    if form is not None:
        raw, content_type = _multipart_items(form), ""
        if "options" in form.fields:
            given.append(_json_option(form.fields["options"]))
    try:
        rows, extra = parse_items_body(raw, content_type)
    except UnicodeDecodeError as exc:
        # as on every route: the line and column (a JSONL body is a file of lines)
        raise ProblemError(422, "Invalid body", f"line {text_line(exc.object, exc.start)}: "
                                                f"{not_utf8(exc)}") from None
    except json.JSONDecodeError as exc:
        raise ProblemError(422, "Invalid body", f"{'items' if form is not None else 'body'}: {not_json(exc)}") from None
    except ValueError as exc:
        raise ProblemError(422, "Invalid body", str(exc)[:300]) from None
    if "options" in extra:
        given.append(extra["options"])
    grade_options = _options(given, n, lookback)
    check_frame_pixels(grade_options.sampler, svc.settings.max_frame_megapixels)
    svc.check_options(judge, grade_options)
    svc.check_triage(judge, the_rubric, grade_options)
    if "priority" in extra and priority is not None:
        raise ProblemError(422, "Invalid body", "give priority once: in the body or as a query parameter")
    job_priority = extra.get("priority", priority if priority is not None else 0)
    if not isinstance(job_priority, int) or isinstance(job_priority, bool) or not -100 <= job_priority <= 100:
        raise ProblemError(422, "Invalid body", "priority is a whole number from -100 to 100")
    if not rows or len(rows) > MAX_JOB_ITEMS:
        raise ProblemError(422, "Invalid body", f"a job holds 1 to {MAX_JOB_ITEMS} items, got {len(rows)}")
    try:
        items = checked_items(((f"item {i}", row) for i, row in enumerate(rows)), ValueError)
        grade_options = check_battle_job(items, grade_options)  # battle items: both orders by default
    except ValueError as exc:
        raise ProblemError(422, "Invalid item", str(exc)) from None
    fingerprint = request_hash(judge, rubric, grade_options, job_priority, _as_given(items, form))
    if form is not None:
        items = _with_uploads(items, form)
    return _Asked(items, grade_options, job_priority, fingerprint)


def _forget(svc: Service, form: Form | None, fetched: list[Upload]) -> None:
    for upload in [*(upload for _, upload, _ in (form.files if form is not None else [])), *fetched]:
        svc.store.forget(upload)


def _multipart_items(form: Form) -> bytes:
    """The items part of a multipart job, once the parts are known to be what a job takes."""
    if "items" not in form.fields:
        raise ProblemError(422, "Invalid body", "the multipart body needs an 'items' part (JSON or JSONL)")
    unknown = sorted((set(form.fields) - {"items", "options"}) | ({name for name, _, _ in form.files} - {"video"}))
    if unknown:
        raise ProblemError(422, "Invalid body", f"unknown multipart part(s): {', '.join(unknown)} "
                                                "(items, options, and video files)")
    names = [upload.filename for _, upload, _ in form.files]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ProblemError(422, "Invalid body", f"two uploaded videos are named {twice[0]!r}: items could "
                                                "not say which they mean")
    return form.fields["items"].encode()


def _as_given(items: list[Item], form: Form | None) -> list[dict[str, Any]]:
    """The items as the client gave them, uploaded videos by their content: what a retry under
    the same Idempotency-Key must repeat."""
    contents = {upload.filename: "sha256:" + upload.sha256 for _, upload, _ in form.files} if form else {}
    return [it.model_dump(mode="json") | ({"video": contents[it.video]} if it.video in contents else {})
            for it in items]


def _with_uploads(items: list[Item], form: Form) -> list[Item]:
    """Items of a multipart job with the videos they name by file name as those uploads. In such
    a job a plain name is an uploaded file's, never a server path; every file is some item's."""
    uploaded = {upload.filename: UPLOAD_PREFIX + upload.id for _, upload, _ in form.files}
    out = []
    for i, item in enumerate(items):
        if item.video and not item.video.startswith(UPLOAD_PREFIX) and "://" not in item.video:
            if item.video not in uploaded:
                files = ", ".join(sorted(uploaded)) or "none"
                raise ProblemError(422, "Invalid item", f"item {i} names video {item.video!r}, which is not among "
                                                        f"the uploaded files ({files})")
            item = item.model_copy(update={"video": uploaded[item.video]})
        out.append(item)
    named = {it.video for it in items}
    spare = sorted(name for name in uploaded if name not in named)
    if spare:
        raise ProblemError(422, "Invalid body", f"uploaded video {spare[0]!r} is named by no item")
    return out


def _json_option(text: str) -> Any:
    try:
        return strict_body(text, "options")
    except json.JSONDecodeError as exc:
        raise ProblemError(422, "Invalid options", f"options are JSON: {exc.msg}") from None


def _options(found: list[Any], n: int | None, lookback: float | None) -> GradeOptions:
    """The job's options from exactly one place (query, multipart part or body), with n and
    lookback as shorthands for the sampler only when no options are given."""
    if len(found) > 1:
        raise ProblemError(422, "Invalid options", "give the options once: in the body, its options part or the "
                                                   "options query parameter")
    shorthand = {k: v for k, v in (("n", n), ("lookback", lookback)) if v is not None}
    if found and shorthand:
        raise ProblemError(422, "Invalid options", "n and lookback are shorthands; with options, set them in "
                                                   "options.sampler")
    data = found[0] if found else {"sampler": {"n": 8, **shorthand}}
    try:
        return GradeOptions.model_validate(data)
    except ValidationError as exc:
        raise ProblemError(422, "Invalid options", first_problem(exc, "options")) from None


class JobPage(BaseModel):
    offset: int
    limit: int
    jobs: list[JobStatus] = Field(description="newest first")


@router.get("/v1/jobs", tags=["jobs"], operation_id="list_jobs", response_model=JobPage)
def get_jobs(svc: ServiceDep, key: GradeKey, page: PageDep) -> Any:
    """This key's jobs, newest first, a page at a time (`offset`, `limit`); a deleted job is not listed."""
    return JobPage(offset=page.offset, limit=page.limit, jobs=list_jobs(svc.engine, key.id, page.offset, page.limit))


@router.get("/v1/jobs/{job_id}", tags=["jobs"], response_model=JobStatus, responses=problems(404))
def get_job(job_id: str, svc: ServiceDep, key: GradeKey) -> Any:
    return svc.own_job(job_id, key)


class VerdictPage(BaseModel):
    """A page of a job's records, in item order."""

    offset: int
    limit: int
    records: list[Verdict | JudgeError] = Field(description="verdicts and judge errors")


VERDICTS_RESPONSES: dict[int | str, dict[str, Any]] = {**problems(404), 200: {
    "model": VerdictPage,
    "description": "A page of records as JSON; with Accept: application/x-ndjson, the records as JSONL",
    "content": {"application/x-ndjson": {"schema": {
        "type": "string", "description": "JSONL: one record (Verdict or JudgeError) a line"}}}}}


@router.get("/v1/jobs/{job_id}/verdicts", tags=["jobs"], operation_id="list_job_verdicts",
            response_model=None, responses=VERDICTS_RESPONSES)
def get_job_verdicts(job_id: str, svc: ServiceDep, key: GradeKey, request: Request,
                     offset: int = Query(0, ge=0, le=MAX_RECORDS, description="records to skip"),
                     limit: int | None = Query(None, ge=1, le=MAX_RECORDS,
                                               description=f"records at most: a JSON page holds 1 to {PAGE_MAX} "
                                                           f"(default {PAGE_DEFAULT}); JSONL, all by default")) -> Any:
    """Verdicts and judge errors in item order: a page of JSON, or as JSONL with
    `Accept: application/x-ndjson` (from `offset`, `limit` records at most; all by default)."""
    svc.own_job(job_id, key)
    if "ndjson" in request.headers.get("accept", ""):
        end = offset + limit if limit is not None else None

        def lines():
            start = offset
            while end is None or start < end:
                page = job_records(svc.engine, job_id, start, 500 if end is None else min(500, end - start))
                if not page:
                    return
                for line in page:
                    yield line + "\n"
                start += len(page)

        return StreamingResponse(lines(), media_type="application/x-ndjson")
    if limit is not None and limit > PAGE_MAX:
        raise ProblemError(422, "Invalid request", f"query.limit: a JSON page holds at most {PAGE_MAX} records; "
                                                   "ask for more with Accept: application/x-ndjson")
    limit = limit or PAGE_DEFAULT
    page = job_records(svc.engine, job_id, offset, limit)
    return {"offset": offset, "limit": limit, "records": [json.loads(r) for r in page]}


@router.delete("/v1/jobs/{job_id}", tags=["jobs"], response_model=JobStatus,
               responses={204: {"description": "The job had finished: it is deleted with its records"},
                          **problems(404, 409)})
def delete_job(job_id: str, svc: ServiceDep, key: GradeKey) -> Any:
    """A job with items still to grade is cancelled: the answer is its status, and the records of
    the items already graded stay readable. A finished job (done, or cancelled with nothing still
    being graded) is deleted with its items and records: 204, and its id is 404 from then on."""
    status = svc.own_job(job_id, key)
    if status.state in ("queued", "running"):
        cancel_job(svc.engine, job_id)
        return job_status(svc.engine, job_id)
    if not remove_job(svc.engine, job_id):
        raise ProblemError(409, "Job still being graded", f"job {job_id} is cancelled, but {status.running} "
                                                          "item(s) are still being graded; delete it once they finish")
    return Response(status_code=204)
