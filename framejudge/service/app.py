"""The HTTP API: the library's own schemas behind FastAPI, with API keys and problem+json errors."""


import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import json
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..judge import GradeOptions, Grader, JudgeSpecError, make_judge
from ..rubrics import RubricError, all_rubrics, get_rubric
from ..rubrics.model import Rubric
from ..calibration.audit import AuditResult, audit
from ..calibration.inputs import human_rows, judge_rows, swap_consistency, video_qa_fields
from ..frame_sampler import FrameSamplerError, NotARegularFile, VideoNotFound, contact_sheet, sample_frames, to_data_url
from ..schema import FrameInfo, HumanLabel, Item, JudgeError, SamplerParams, Verdict, VideoInfo
from .settings import Settings
from ..files import first_problem
from .metrics import Metrics
from .jobs import JobStatus, Worker, cancel_job, create_job, job_owner, job_records, job_status, parse_items_body
from .store import ApiKey, check_key, engine_for, load_calibration, ping, save_calibration

PROBLEM = "application/problem+json"


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str


class GradeRequest(BaseModel):
    item: Item
    judge: str = "reference"
    rubric: str = Field("video-qa", max_length=200)
    sampler: SamplerParams = Field(default_factory=lambda: SamplerParams(n=8))


class GradeResponse(BaseModel):
    records: list[Verdict | JudgeError]


class FramesRequest(BaseModel):
    video: str = Field(max_length=4096)
    sampler: SamplerParams = Field(default_factory=lambda: SamplerParams(n=8))
    contact_sheet: bool = Field(False, description="one grid image with timestamps instead of one image per frame")
    quality: int = Field(85, ge=1, le=100)


class FramePayload(BaseModel):
    info: FrameInfo
    data_url: str


class FramesResponse(BaseModel):
    video: VideoInfo
    window: tuple[float, float]
    frames: list[FramePayload]
    contact_sheet: str | None = None
    warnings: list[str]


class CalibrateRequest(BaseModel):
    labels: list[HumanLabel] = Field(min_length=1, max_length=200_000)
    verdicts: list[Verdict | JudgeError] = Field(min_length=1, max_length=100_000)
    replicates: int = Field(1000, ge=1, le=5000)
    seed: int = 0


class CalibrateResponse(BaseModel):
    id: str
    result: AuditResult


MAX_BODY = 64 * 1024**2
MAX_JOB_ITEMS = 100_000


class RubricSummary(BaseModel):
    id: str
    kind: str
    version: str
    hash: str
    title: str


def problem(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = Problem(title=title, status=status, detail=detail).model_dump()
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


class ProblemError(Exception):
    def __init__(self, status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> None:
        self.status, self.title, self.detail, self.headers = status, title, detail, headers


class RateLimiter:
    """A token bucket per API key: `per_minute` requests, refilled continuously."""

    def __init__(self, per_minute: int) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(per_minute)
        self.buckets: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def take(self, key: str) -> float | None:
        """None if allowed, else seconds until a request would be."""
        now = time.monotonic()
        with self.lock:
            tokens, last = self.buckets.get(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.rate)
            if tokens >= 1:
                self.buckets[key] = (tokens - 1, now)
                return None
            self.buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate


def inside_media_root(path: str, root: Path | None) -> Path:
    """A server-side video path, allowed only inside the media root (no '..', no symlink escape)."""
    if root is None:
        raise ProblemError(403, "Server paths disabled", "this server has no media root; server-side video paths are refused")
    if "://" in path:
        raise ProblemError(400, "URL not accepted", "video URLs are not fetched by this server")
    candidate = Path(path)
    if ".." in candidate.parts:
        raise ProblemError(400, "Bad video path", "'..' is not allowed in video paths")
    full = (root / candidate) if not candidate.is_absolute() else candidate
    resolved = full.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise ProblemError(403, "Outside the media root", f"{path} resolves outside the media root")
    return resolved


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    engine = engine_for(settings.database_url)
    limiter = RateLimiter(settings.requests_per_minute)
    metrics = Metrics()
    worker = Worker(engine, metrics.record) if settings.run_worker else None

    @asynccontextmanager
    async def lifespan(_: FastAPI):  # type: ignore[no-untyped-def]
        if worker is not None:
            worker.start()
        yield
        if worker is not None:
            worker.close()

    app = FastAPI(title="framejudge", version="0.1.0", lifespan=lifespan,
                  description="LLM-as-judge grading for video question answering.")
    app.state.settings = settings
    app.state.engine = engine
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

    @app.get("/metrics", tags=["health"], response_class=PlainTextResponse)
    def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(engine).decode(), media_type=CONTENT_TYPE_LATEST)

    @app.exception_handler(ProblemError)
    async def _problem(_: Request, exc: ProblemError) -> JSONResponse:
        return problem(exc.status, exc.title, exc.detail, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        titles = {404: "Not found", 405: "Method not allowed"}
        return problem(exc.status_code, titles.get(exc.status_code, "Error"), str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", []) if p != "body") or "body"
        return problem(422, "Invalid request", f"{where}: {str(first.get('msg', '')).removeprefix('Value error, ')}")

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
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

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], responses={503: {"model": Problem}})
    def readyz() -> Any:
        if not ping(engine):
            return problem(503, "Not ready", "the database is not reachable")
        problems = []
        for spec in settings.judges:
            try:
                make_judge(spec)
            except (JudgeSpecError, ValueError, OSError) as exc:
                problems.append(f"{spec}: {exc}")
        if problems:
            return problem(503, "Not ready", "; ".join(problems))
        return {"status": "ready", "judges": settings.judges}

    @app.get("/v1/rubrics", tags=["rubrics"], response_model=list[RubricSummary])
    def list_rubrics(_: Annotated[ApiKey, Depends(authorized("grade"))]) -> list[RubricSummary]:
        return [RubricSummary(id=r.id, kind=r.kind, version=r.version, hash=r.content_hash, title=r.title)
                for r in all_rubrics().values()]

    @app.get("/v1/rubrics/{rubric_id}", tags=["rubrics"], response_model=Rubric, responses={404: {"model": Problem}})
    def show_rubric(rubric_id: str, _: Annotated[ApiKey, Depends(authorized("grade"))]) -> Rubric:
        known = all_rubrics()
        if rubric_id not in known:
            raise ProblemError(404, "No such rubric", f"no rubric with id {rubric_id!r}")
        return known[rubric_id]

    @app.post("/v1/grade", tags=["grading"], response_model=GradeResponse,
              responses={400: {"model": Problem}, 403: {"model": Problem}, 422: {"model": Problem}})
    async def grade(request: GradeRequest, _: Annotated[ApiKey, Depends(authorized("grade"))]) -> GradeResponse:
        if request.judge not in settings.judges:
            raise ProblemError(400, "Judge not allowed", f"this server allows: {', '.join(settings.judges)}")
        try:
            rubric = get_rubric(request.rubric) if "/" not in request.rubric and os.sep not in request.rubric else None
        except RubricError as exc:
            raise ProblemError(400, "Unknown rubric", str(exc)) from None
        if rubric is None:
            raise ProblemError(400, "Unknown rubric", "give a rubric id; server-side rubric files are not read")
        item = request.item
        if item.video:
            item = item.model_copy(update={"video": str(inside_media_root(item.video, settings.media_root))})
        try:
            judge = make_judge(request.judge)
        except JudgeSpecError as exc:
            raise ProblemError(400, "Judge not available", str(exc)) from None
        grader = Grader(judge, rubric, GradeOptions(sampler=request.sampler))
        records = await grader.grade(item)
        metrics.record(records)
        return GradeResponse(records=records)

    @app.post("/v1/frames", tags=["frames"], response_model=FramesResponse,
              responses={400: {"model": Problem}, 403: {"model": Problem}, 404: {"model": Problem}, 422: {"model": Problem}})
    async def frames(request: FramesRequest, _: Annotated[ApiKey, Depends(authorized("grade"))]) -> FramesResponse:
        path = inside_media_root(request.video, settings.media_root)
        try:
            result = await asyncio.to_thread(sample_frames, path, request.sampler)
        except (VideoNotFound, NotARegularFile) as exc:
            raise ProblemError(404, "No such video", exc.message) from None
        except FrameSamplerError as exc:
            raise ProblemError(422, "Unusable video", exc.message) from None
        sheet = None
        payloads = []
        if request.contact_sheet:
            sheet = to_data_url(contact_sheet([f.image for f in result.frames], result.timestamps), request.quality)
        else:
            payloads = [FramePayload(info=f.info, data_url=to_data_url(f.image, request.quality)) for f in result.frames]
        return FramesResponse(video=result.video, window=result.window, frames=payloads, contact_sheet=sheet,
                              warnings=result.warnings)

    @app.post("/v1/calibrate", tags=["calibration"], response_model=CalibrateResponse, responses={422: {"model": Problem}})
    async def calibrate(request: CalibrateRequest, _: Annotated[ApiKey, Depends(authorized("calibrate"))]) -> CalibrateResponse:
        rows_j, errors = judge_rows(request.verdicts)
        result = await asyncio.to_thread(audit, human_rows(request.labels), rows_j, video_qa_fields(), errors,
                                         request.replicates, request.seed)
        result.swap_consistency = swap_consistency(request.verdicts)
        run_id = save_calibration(engine, result.model_dump_json())
        return CalibrateResponse(id=run_id, result=result)

    @app.get("/v1/calibrate/{run_id}/report", tags=["calibration"], response_class=HTMLResponse,
             responses={404: {"model": Problem}})
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

    @app.post("/v1/jobs", tags=["jobs"], status_code=202, response_model=JobStatus,
              responses={400: {"model": Problem}, 413: {"model": Problem}, 422: {"model": Problem}})
    async def submit_job(
        request: Request, key: Annotated[ApiKey, Depends(authorized("grade"))],
        judge: str = "reference", rubric: str = "video-qa", n: int = 8, lookback: float = 30.0,
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> Any:
        """A batch of items (a JSON list, {"items": [...]}, or JSONL) graded in the background."""
        raw = await request.body()
        if len(raw) > MAX_BODY:
            raise ProblemError(413, "Body too large", f"at most {MAX_BODY // 1024**2} MiB per submission")
        if judge not in settings.judges:
            raise ProblemError(400, "Judge not allowed", f"this server allows: {', '.join(settings.judges)}")
        try:
            get_rubric(rubric)
            sampler = SamplerParams(n=n, lookback=lookback)
        except RubricError as exc:
            raise ProblemError(400, "Unknown rubric", str(exc)) from None
        except ValueError as exc:
            raise ProblemError(422, "Invalid sampler", str(exc).splitlines()[-1]) from None
        try:
            rows = parse_items_body(raw, request.headers.get("content-type", ""))
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
            if item.video:
                item = item.model_copy(update={"video": str(inside_media_root(item.video, settings.media_root))})
            items.append(item)
        job_id, _ = create_job(engine, key.id, items, judge, rubric, sampler, idempotency_key)
        return job_status(engine, job_id)

    @app.get("/v1/jobs/{job_id}", tags=["jobs"], response_model=JobStatus, responses={404: {"model": Problem}})
    def get_job(job_id: str, key: Annotated[ApiKey, Depends(authorized("grade"))]) -> Any:
        return _own_job(job_id, key)

    @app.get("/v1/jobs/{job_id}/verdicts", tags=["jobs"], responses={404: {"model": Problem}})
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

    @app.delete("/v1/jobs/{job_id}", tags=["jobs"], response_model=JobStatus, responses={404: {"model": Problem}})
    def delete_job(job_id: str, key: Annotated[ApiKey, Depends(authorized("grade"))]) -> Any:
        _own_job(job_id, key)
        cancel_job(engine, job_id)
        return job_status(engine, job_id)

    return app
