"""The HTTP API: the library's own schemas behind FastAPI, with API keys and problem+json errors."""


import asyncio
import json
import logging
import os
import time
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import TypeAdapter, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..calibration.audit import AuditResult, audit
from ..calibration.inputs import human_rows, judge_rows, swap_consistency, video_qa_fields
from ..files import first_problem
from ..frame_sampler import (FrameSamplerError, IsolatedSampler, NotARegularFile, VideoNotFound, contact_sheet,
                             to_data_url)
from ..judge import GradeOptions, Grader, JudgeSpecError, make_judge
from ..rubrics import RubricError, all_rubrics, get_rubric
from ..rubrics.model import Rubric
from ..schema import Item, JudgeError, SamplerParams, Verdict
from .jobs import (JobStatus, Worker, cancel_job, create_job, idempotent_job, job_owner, job_records, job_status,
                   parse_items_body, show_video_ref)
from .media import MediaResolver
from .metrics import Metrics
from .models import (CalibrateRequest, CalibrateResponse, FramePayload, FramesRequest, FramesResponse, GradeRequest,
                     GradeResponse, RubricSummary, UploadedVideo, UploadResponse)
from .limits import BodyLimit, RateLimiter, capped_stream
from .problems import ProblemError, document_problems, problem
from .settings import Settings
from .store import ApiKey, check_key, engine_for, load_calibration, ping, save_calibration
from .uploads import UPLOAD_PREFIX, Form, Upload, UploadStore, read_multipart

log = logging.getLogger("framejudge.service")
MAX_BODY = 64 * 1024**2
MAX_JOB_ITEMS = 100_000
ITEMS_SCHEMA = {"type": "array", "minItems": 1, "maxItems": MAX_JOB_ITEMS, "items": {"$ref": "#/components/schemas/Item"}}
JOBS_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"oneOf": [ITEMS_SCHEMA, {"type": "object", "required": ["items"],
                                                              "properties": {"items": ITEMS_SCHEMA}}]}},
    "application/x-ndjson": {"schema": {**ITEMS_SCHEMA, "description": "JSONL: one item per line"}},
    "multipart/form-data": {"schema": {"type": "object", "required": ["items"], "properties": {
        "items": {"type": "string", "description": "the items, as JSON or JSONL; a video named by an uploaded "
                                                   "file's name is that file"},
        "video": {"type": "array", "items": {"type": "string", "format": "binary"}}}}},
}}}
RECORD: TypeAdapter[Verdict | JudgeError] = TypeAdapter(Verdict | JudgeError)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    engine = engine_for(settings.database_url)
    limiter = RateLimiter(settings.requests_per_minute)
    metrics = Metrics()
    # every decode of a client's video runs in killable, memory-capped processes
    decoder = IsolatedSampler(workers=settings.decode_workers, timeout_s=settings.decode_timeout_s,
                              max_memory_mb=settings.decode_memory_mb)
    worker = Worker(engine, metrics.record, decoder.sample) if settings.run_worker else None
    assert settings.upload_dir is not None  # set by the settings validator
    store = UploadStore(settings.upload_dir, engine, settings.max_upload_bytes, decoder)
    media = MediaResolver(settings, store)
    upload_limit = settings.max_files_per_request * settings.max_upload_bytes + MAX_BODY

    @asynccontextmanager
    async def lifespan(_: FastAPI):  # type: ignore[no-untyped-def]
        if worker is not None:
            worker.start()
        yield
        if worker is not None:
            worker.close()
        decoder.close()

    app = FastAPI(title="framejudge", version="0.1.0", lifespan=lifespan,
                  description="LLM-as-judge grading for video question answering.")
    app.state.settings = settings

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_problems(get_openapi(title=app.title, version=app.version,
                                                               description=app.description, routes=app.routes))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    app.state.engine = engine
    app.add_middleware(BodyLimit, limit=MAX_BODY, own_limits=("/v1/videos", "/v1/jobs"))
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["Authorization", "Content-Type", "Idempotency-Key"])

    @app.middleware("http")
    async def _measure(request: Request, call_next):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        metrics.requests.labels(method=request.method, route=path, status=str(response.status_code)).inc()
        metrics.latency.labels(route=path).observe(time.perf_counter() - start)
        return response

    @app.exception_handler(ProblemError)
    async def _problem(_: Request, exc: ProblemError) -> JSONResponse:
        return problem(exc.status, exc.title, exc.detail, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        titles = {404: "Not found", 405: "Method not allowed"}
        return problem(exc.status_code, titles.get(exc.status_code, "Error"), str(exc.detail), exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", []) if p != "body") or "body"
        return problem(422, "Invalid request", f"{where}: {str(first.get('msg', '')).removeprefix('Value error, ')}")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return problem(500, "Internal error", f"the server could not complete the request ({type(exc).__name__})")

    def authorized(scope: str):  # type: ignore[no-untyped-def]
        def dependency(authorization: Annotated[str | None, Header()] = None) -> ApiKey:
            if not authorization or not authorization.lower().startswith("bearer "):
                raise ProblemError(401, "Unauthorized", "send an API key as 'Authorization: Bearer <key>'",
                                   {"WWW-Authenticate": "Bearer"})
            key = check_key(engine, authorization.split(" ", 1)[1].strip())
            if key is None:
                raise ProblemError(401, "Unauthorized", "unknown or revoked API key", {"WWW-Authenticate": "Bearer"})
            if scope not in key.scopes.split(",") and "admin" not in key.scopes.split(","):
                raise ProblemError(403, "Forbidden", f"this API key lacks the '{scope}' scope")
            wait = limiter.take(key.id)
            if wait is not None:
                raise ProblemError(429, "Too many requests", f"rate limit of {settings.requests_per_minute} per minute",
                                   {"Retry-After": str(max(1, round(wait)))})
            return key

        return dependency

    @app.get("/metrics", tags=["health"], response_class=PlainTextResponse)
    def prometheus(_: Annotated[ApiKey, Depends(authorized("metrics"))]) -> PlainTextResponse:
        """Prometheus text format; scrape with a key of scope 'metrics' (bearer_token in the scrape config)."""
        return PlainTextResponse(metrics.render(engine).decode(), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    async def readyz() -> Any:
        if not await asyncio.to_thread(ping, engine):
            return problem(503, "Not ready", "the database is not reachable")
        problems = []
        for spec in settings.judges:
            try:
                judge = await asyncio.to_thread(make_judge, spec)
            except (JudgeSpecError, ValueError, OSError) as exc:
                problems.append(f"{spec}: {exc}")
                continue
            check = getattr(judge, "ready", None)  # judges that call a server say whether it answers
            why = await check() if check is not None else None
            if why:
                problems.append(f"{spec}: {why}")
        if problems:
            return problem(503, "Not ready", "; ".join(problems))
        return {"status": "ready", "judges": settings.judges}

    @app.get("/v1/rubrics", tags=["rubrics"], response_model=list[RubricSummary])
    def list_rubrics(_: Annotated[ApiKey, Depends(authorized("grade"))]) -> list[RubricSummary]:
        return [RubricSummary(id=r.id, kind=r.kind, version=r.version, hash=r.content_hash, title=r.title)
                for r in all_rubrics().values()]

    @app.get("/v1/rubrics/{rubric_id}", tags=["rubrics"], response_model=Rubric)
    def show_rubric(rubric_id: str, _: Annotated[ApiKey, Depends(authorized("grade"))]) -> Rubric:
        known = all_rubrics()
        if rubric_id not in known:
            raise ProblemError(404, "No such rubric", f"no rubric with id {rubric_id!r}")
        return known[rubric_id]

    def _checked_judge_and_rubric(judge: str, rubric_id: str) -> Any:
        if judge not in settings.judges:
            raise ProblemError(400, "Judge not allowed", f"this server allows: {', '.join(settings.judges)}")
        if "/" in rubric_id or os.sep in rubric_id:
            raise ProblemError(400, "Unknown rubric", "give a rubric id; server-side rubric files are not read")
        try:
            return get_rubric(rubric_id)
        except RubricError as exc:
            raise ProblemError(400, "Unknown rubric", str(exc)) from None

    graders: dict[tuple[str, str, str], Grader] = {}  # judges load once, not per request

    def _grader(spec: str, rubric: Rubric, sampler: SamplerParams) -> Grader:
        key = (spec, f"{rubric.id}@{rubric.version}", sampler.model_dump_json())
        grader = graders.get(key)
        if grader is None:
            try:
                judge = make_judge(spec)
            except JudgeSpecError as exc:
                raise ProblemError(400, "Judge not available", str(exc)) from None
            if len(graders) >= 32:
                graders.pop(next(iter(graders)))
            grader = graders[key] = Grader(judge, rubric, GradeOptions(sampler=sampler), sample=decoder.sample)
        return grader

    async def _resolved(items: list[Item], key: ApiKey,
                        fetched: list[Upload] | None = None) -> tuple[list[Item], list[str | None]]:
        """Items with their videos as server paths, and the client's references to show in records."""
        paths = await media.resolve_many([it.video for it in items if it.video], key.id, fetched)
        resolved = [it.model_copy(update={"video": str(paths[it.video])}) if it.video else it for it in items]
        return resolved, [it.video for it in items]

    @app.post("/v1/grade", tags=["grading"], response_model=GradeResponse)
    async def grade(request: GradeRequest, key: Annotated[ApiKey, Depends(authorized("grade"))]) -> GradeResponse:
        rubric = _checked_judge_and_rubric(request.judge, request.rubric)
        fetched: list[Upload] = []  # videos fetched from URLs for this request only
        try:
            [item], [ref] = await _resolved([request.item], key, fetched)
            records = await _grader(request.judge, rubric, request.sampler).grade(item)
        finally:
            for upload in fetched:
                store.forget(upload)
        if ref is not None:
            show_video_ref(records, ref, item.video)
        metrics.record(records)
        return GradeResponse(records=records)

    @app.post("/v1/frames", tags=["frames"], response_model=FramesResponse)
    async def frames(request: FramesRequest, key: Annotated[ApiKey, Depends(authorized("grade"))]) -> FramesResponse:
        fetched: list[Upload] = []
        try:
            path = await media.resolve(request.video, key.id, fetched)
            result = await asyncio.to_thread(decoder.sample, path, request.sampler)
        except (VideoNotFound, NotARegularFile) as exc:
            raise ProblemError(404, "No such video", exc.message) from None
        except FrameSamplerError as exc:
            raise ProblemError(422, "Unusable video", exc.message) from None
        finally:
            for upload in fetched:
                store.forget(upload)
        sheet = None
        payloads = []
        if request.contact_sheet:
            sheet = to_data_url(contact_sheet([f.image for f in result.frames], result.timestamps), request.quality)
        else:
            payloads = [FramePayload(info=f.info, data_url=to_data_url(f.image, request.quality)) for f in result.frames]
        video = result.video.model_copy(update={"path": request.video})
        return FramesResponse(video=video, window=result.window, frames=payloads, contact_sheet=sheet,
                              warnings=result.warnings)

    @app.post("/v1/videos", tags=["videos"], status_code=201, response_model=UploadResponse,
              openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
                  "type": "object", "properties": {"file": {"type": "array", "items": {
                      "type": "string", "format": "binary"}}}}}}}})
    async def upload_videos(request: Request, key: Annotated[ApiKey, Depends(authorized("grade"))]) -> UploadResponse:
        """Upload videos (multipart/form-data, one or more file parts). Each is size-checked while it
        arrives, sniffed and probed; refer to it afterwards by the returned id ('upload:<hex>')."""
        form = await _multipart(request, key)
        if not form.files:
            raise ProblemError(422, "No video", "the multipart body holds no file part")
        return UploadResponse(videos=[_uploaded(upload, info) for _, upload, info in form.files])

    @app.delete("/v1/videos/{upload_id}", tags=["videos"], status_code=204)
    def delete_video(upload_id: str, key: Annotated[ApiKey, Depends(authorized("grade"))]) -> None:
        """Delete an uploaded (or fetched) video. Jobs not yet graded that name it will record a
        judge error for it."""
        store.forget(store.find(upload_id if upload_id.startswith(UPLOAD_PREFIX) else UPLOAD_PREFIX + upload_id,
                                key.id))

    def _uploaded(upload: Any, info: Any) -> UploadedVideo:
        ref = UPLOAD_PREFIX + upload.id
        return UploadedVideo(id=ref, filename=upload.filename, bytes=upload.bytes, sha256=upload.sha256,
                             container=upload.container, video=info.model_copy(update={"path": ref}))

    async def _multipart(request: Request, key: ApiKey) -> Form:
        content_type = request.headers.get("content-type", "")
        if not content_type.startswith("multipart/form-data"):
            raise ProblemError(415, "Multipart expected", "send videos as multipart/form-data file parts")
        return await read_multipart(capped_stream(request, upload_limit), content_type, store, key.id,
                                    MAX_BODY, settings.max_files_per_request)

    @app.post("/v1/calibrate", tags=["calibration"], response_model=CalibrateResponse)
    async def calibrate(request: CalibrateRequest,
                        key: Annotated[ApiKey, Depends(authorized("calibrate"))]) -> CalibrateResponse:
        if request.job_id is not None:
            status = _own_job(request.job_id, key)
            if status.done == 0:
                raise ProblemError(422, "Job has no verdicts yet", f"job {request.job_id} has graded no item so far")
            records: list[Verdict | JudgeError] = [RECORD.validate_json(r)
                                                   for r in job_records(engine, request.job_id, 0, None)]
        else:
            records = request.verdicts or []
        rows_j, errors = judge_rows(records)
        result = await asyncio.to_thread(audit, human_rows(request.labels), rows_j, video_qa_fields(), errors,
                                         request.replicates, request.seed)
        result.swap_consistency = swap_consistency(records)
        run_id = save_calibration(engine, result.model_dump_json())
        return CalibrateResponse(id=run_id, result=result)

    @app.get("/v1/calibrate/{run_id}/report", tags=["calibration"], response_class=HTMLResponse)
    def calibration_report(run_id: str, _: Annotated[ApiKey, Depends(authorized("calibrate"))]) -> HTMLResponse:
        from ..calibration.report import render_html

        stored = load_calibration(engine, run_id)
        if stored is None:
            raise ProblemError(404, "No such calibration", f"no calibration with id {run_id!r}")
        return HTMLResponse(render_html(AuditResult.model_validate_json(stored), title=f"framejudge calibration {run_id}"))

    def _own_job(job_id: str, key: ApiKey) -> JobStatus:
        status = job_status(engine, job_id)
        if status is None or (job_owner(engine, job_id) != key.id and "admin" not in key.scopes.split(",")):
            raise ProblemError(404, "No such job", f"no job with id {job_id!r}")
        return status

    @app.post("/v1/jobs", tags=["jobs"], status_code=202, response_model=JobStatus, openapi_extra=JOBS_BODY)
    async def submit_job(
        request: Request, key: Annotated[ApiKey, Depends(authorized("grade"))],
        judge: str = Query("reference", max_length=500), rubric: str = Query("video-qa", max_length=200),
        n: int = 8, lookback: float = 30.0,
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> Any:
        """A batch of items graded in the background: a JSON list, {"items": [...]}, JSONL, or
        multipart/form-data with an `items` part (JSON or JSONL) and video file parts that items
        name by their file name."""
        _checked_judge_and_rubric(judge, rubric)
        existing = idempotent_job(engine, key.id, idempotency_key)
        if existing is not None:  # answered before any upload or fetch is repeated
            return job_status(engine, existing)
        try:
            sampler = SamplerParams(n=n, lookback=lookback)
        except ValueError as exc:
            raise ProblemError(422, "Invalid sampler", str(exc).splitlines()[-1]) from None
        content_type = request.headers.get("content-type", "")
        uploaded: dict[str, str] = {}
        if content_type.startswith("multipart/form-data"):
            form = await _multipart(request, key)
            if "items" not in form.fields:
                raise ProblemError(422, "Invalid body", "the multipart body needs an 'items' part (JSON or JSONL)")
            raw, content_type = form.fields["items"].encode(), ""
            uploaded = {upload.filename: UPLOAD_PREFIX + upload.id for _, upload, _ in form.files}
        else:
            raw = b"".join([chunk async for chunk in capped_stream(request, MAX_BODY)])
        try:
            rows = parse_items_body(raw, content_type)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ProblemError(422, "Invalid body", str(exc)[:300]) from None
        if not rows or len(rows) > MAX_JOB_ITEMS:
            raise ProblemError(422, "Invalid body", f"a job holds 1 to {MAX_JOB_ITEMS} items, got {len(rows)}")
        items = []
        for i, row in enumerate(rows):
            try:
                item = Item.model_validate(row)
            except ValidationError as exc:
                raise ProblemError(422, "Invalid item", f"item {i}: {first_problem(exc, 'item')}") from None
            if item.video in uploaded:
                item = item.model_copy(update={"video": uploaded[item.video]})
            items.append(item)
        resolved, refs = await _resolved(items, key)
        job_id, _ = create_job(engine, key.id, resolved, judge, rubric, sampler, idempotency_key, refs)
        return job_status(engine, job_id)

    @app.get("/v1/jobs/{job_id}", tags=["jobs"], response_model=JobStatus)
    def get_job(job_id: str, key: Annotated[ApiKey, Depends(authorized("grade"))]) -> Any:
        return _own_job(job_id, key)

    @app.get("/v1/jobs/{job_id}/verdicts", tags=["jobs"])
    def get_job_verdicts(job_id: str, key: Annotated[ApiKey, Depends(authorized("grade"))], request: Request,
                         offset: int = Query(0, ge=0), limit: int = Query(100, ge=1, le=1000)) -> Any:
        """Verdicts and judge errors in item order: a page of JSON, or all of it as JSONL
        with `Accept: application/x-ndjson`."""
        _own_job(job_id, key)
        if "ndjson" in request.headers.get("accept", ""):
            def lines():  # type: ignore[no-untyped-def]
                start = 0
                while True:
                    page = job_records(engine, job_id, start, 500)
                    if not page:
                        return
                    for line in page:
                        yield line + "\n"
                    start += len(page)

            return StreamingResponse(lines(), media_type="application/x-ndjson")
        page = job_records(engine, job_id, offset, limit)
        return {"offset": offset, "limit": limit, "records": [json.loads(r) for r in page]}

    @app.delete("/v1/jobs/{job_id}", tags=["jobs"], response_model=JobStatus)
    def delete_job(job_id: str, key: Annotated[ApiKey, Depends(authorized("grade"))]) -> Any:
        _own_job(job_id, key)
        cancel_job(engine, job_id)
        return job_status(engine, job_id)

    return app
