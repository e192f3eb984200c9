"""What every route shares: settings, the database, the decoding processes, the upload store and
media rules, metrics, rate limits and loaded graders; and the checks routes have in common."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Query, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..backends import parse
from ..frame_sampler import IsolatedSampler
from ..judge import Grader, JudgeBase, JudgeSpecError, judge_class
from ..judge.base import unused_options
from ..rubrics import RubricError, require_kind, rubric_by_id
from ..rubrics.model import Rubric
from ..runner.decode import SharedDecodes
from ..runner.graders import GraderCache
from ..runner.judges import Judges, load_judges_file
from ..runner.worker import QueueWorker
from ..schema import GradeOptions, Item
from .bodies import collector_paused
from .forwarded import networks
from .jobs import JobStatus, job_owner, job_status
from .maintenance import RETENTION_EVERY_S, Pruned, apply_retention
from .limits import RateLimiter, SignInThrottle, capped_stream
from .media import MediaResolver
from .metrics import Metrics
from .problems import ProblemError
from .review.figures import FigureKeeper
from .settings import Settings
from .store import ApiKey, KeyRefused, engine_for, generated_id, holds, verify_key
from .uploads import Form, Quota, Upload, UploadStore, read_multipart

log = logging.getLogger("framejudge.service")
MAX_BODY = 64 * 1024**2
MAX_JOB_ITEMS = 100_000
MAX_LISTED = 10_000_000  # an offset into one key's objects (a bound, so no number overflows the database)


@dataclass(frozen=True)
class Paging:
    offset: int
    limit: int


def paging(offset: int = Query(0, ge=0, le=MAX_LISTED, description="how many of the newest to pass over"),
           limit: int = Query(50, ge=1, le=500, description="how many to list")) -> Paging:
    """A page of one key's stored objects (jobs, videos, calibrations, leaderboards), newest first."""
    return Paging(offset, limit)


PageDep = Annotated[Paging, Depends(paging)]


class Service:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = engine_for(settings.database_url)
        self.limiter = RateLimiter(settings.requests_per_minute)
        self.sign_ins = SignInThrottle()
        self.trusted_proxies = networks(settings.trusted_proxies)
        self.metrics = Metrics()
        # every decode of a client's video runs in killable, memory-capped processes
        self.decoder = IsolatedSampler(workers=settings.decode_workers, timeout_s=settings.decode_timeout_s,
                                       max_memory_mb=settings.decode_memory_mb)
        configs = load_judges_file(settings.judges_file) if settings.judges_file else []
        self.judges = Judges(configs, api_base=settings.api_base)  # one adaptive gate per model endpoint
        self.allowed_judges = list(dict.fromkeys([*settings.judges, *(c.spec for c in configs)]))
        # judges load once, not per request or per job; a video wanted by several items decodes once
        self.graders = GraderCache(SharedDecodes(self.decoder.sample), self.judges, cut=self.decoder.cut)
        self.worker = QueueWorker(self.engine, self.graders, lease_s=settings.lease_s,
                                  max_in_flight=settings.worker_max_in_flight,
                                  on_records=self.metrics.record) if settings.run_worker else None
        self._stop = asyncio.Event()
        self._worker_task: asyncio.Task[None] | None = None
        self._retention_task: asyncio.Task[None] | None = None
        self.retained: list[Pruned] = []  # what each pass of the retention setting removed (the last few)
        assert settings.upload_dir is not None  # set by the settings validator
        self.store = UploadStore(settings.upload_dir, self.engine, settings.max_upload_bytes, self.decoder,
                                 Quota(int(settings.upload_quota_mb * 1024**2), settings.upload_quota_files))
        self.media = MediaResolver(settings, self.store)
        self.upload_limit = settings.max_files_per_request * settings.max_upload_bytes + MAX_BODY
        self.review_figures = FigureKeeper()  # the review queue's figures, refreshed in the background

    async def start(self) -> None:
        """The queue worker runs in the server's event loop (its model calls are I/O; the database
        calls go to threads); so does the retention setting's upkeep (its work in a thread)."""
        if self.worker is not None:
            self._stop.clear()
            self._worker_task = asyncio.create_task(self.worker.run(self._stop), name="framejudge-worker")
        if self.settings.upload_retention_days is not None:
            self._retention_task = asyncio.create_task(self._retain(), name="framejudge-retention")

    async def _retain(self) -> None:
        """Apply FRAMEJUDGE_UPLOAD_RETENTION_DAYS now and once every RETENTION_EVERY_S."""
        from ..frame_sampler.cache import default_cache_dir

        assert self.settings.upload_dir is not None and self.settings.upload_retention_days is not None
        days = timedelta(days=self.settings.upload_retention_days)
        while True:
            try:
                pruned = await asyncio.to_thread(apply_retention, self.engine, self.settings.upload_dir, days,
                                                 default_cache_dir())
            except Exception:  # a database that is away for a while: tried again at the next pass
                log.warning("retention: could not remove old uploads and frames", exc_info=True)
            else:
                self.retained = [*self.retained[-9:], pruned]
                if pruned.deleted or pruned.frames:
                    log.info("retention: %s", pruned.summary())
            await asyncio.sleep(RETENTION_EVERY_S)

    async def close(self) -> None:
        """Graceful: the items in hand are finished (or, past the worker's grace, handed back)."""
        if self._retention_task is not None:
            self._retention_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retention_task
            self._retention_task = None
        if self._worker_task is not None:
            self._stop.set()
            await self._worker_task
            self._worker_task = None
        self.review_figures.close()
        self.decoder.close()

    def authorize(self, authorization: str | None, scope: str | tuple[str, ...]) -> ApiKey:
        """The request's key, which must hold `scope` (or one of several; an admin key holds every
        scope): 401 without a live key, 403 without the scope, 429 past the key's rate limit."""
        if not authorization or not authorization.lower().startswith("bearer "):
            raise ProblemError(401, "Unauthorized", "send an API key as 'Authorization: Bearer <key>'",
                               {"WWW-Authenticate": "Bearer"})
        try:
            key = verify_key(self.engine, authorization.split(" ", 1)[1].strip())
        except KeyRefused as exc:
            raise ProblemError(401, "Unauthorized", str(exc), {"WWW-Authenticate": "Bearer"}, code=exc.code) from None
        scopes = (scope,) if isinstance(scope, str) else scope
        if not any(holds(key, one) for one in scopes):
            raise ProblemError(403, "Forbidden", f"this API key lacks the {' or the '.join(repr(s) for s in scopes)} "
                                                 "scope")
        wait = self.limiter.take(key.id)
        if wait is not None:
            raise ProblemError(429, "Too many requests", f"rate limit of {self.settings.requests_per_minute} per minute",
                               {"Retry-After": str(max(1, round(wait)))})
        return key

    def judge_and_rubric(self, judge: str, rubric_id: str) -> Rubric:
        """A judge this server allows and a rubric it knows, by id."""
        if judge not in self.allowed_judges:
            raise ProblemError(400, "Judge not allowed", f"this server allows: {', '.join(self.allowed_judges)}")
        if "/" in rubric_id or os.sep in rubric_id:
            raise ProblemError(400, "Unknown rubric", "give a rubric id; server-side rubric files are not read")
        try:
            found = rubric_by_id(rubric_id)
        except RubricError as exc:
            raise ProblemError(400, "Unknown rubric", str(exc), code=exc.code) from None
        try:
            return require_kind(found, "video_qa")
        except RubricError as exc:
            raise ProblemError(400, "Wrong kind of rubric", str(exc), code=exc.code) from None

    @staticmethod
    def _judge_class(spec: str) -> type[JudgeBase] | None:
        try:
            return judge_class(spec)
        except JudgeSpecError as exc:  # its libraries are not installed here
            raise ProblemError(400, "Judge not available", str(exc)) from None

    def check_options(self, spec: str, options: GradeOptions) -> None:
        """422 for options that would do nothing with this judge, as the CLI refuses them. Read
        from the judge's class: the judge is not made here (a local model would load inside the
        request; a judge that cannot be made fails a job's items, as it always has)."""
        judge = self._judge_class(spec)
        if judge is None:
            return
        unused = unused_options(judge, spec, options.samples, options.blind, flag="options.",
                                video_input=options.video_input)
        if unused:
            raise ProblemError(422, "Invalid options", unused)

    def check_triage(self, spec: str, rubric: Rubric, options: GradeOptions) -> None:
        """422 for thresholds (options.triage) calibrated for another judge, model or rubric, as the
        CLI refuses them before grading. The model is checked where the spec names it without
        making the judge (a local model's weights are checked by the worker, which then sends every
        verdict to review)."""
        if options.triage is None:
            return
        from ..calibration.triage import mismatch

        cls = self._judge_class(spec)
        if cls is None:
            return
        backend, target = parse(spec)
        model = target if backend.capabilities.calls_server else getattr(cls, "model_id", None)
        problem = mismatch(options.triage, cls.backend, model if isinstance(model, str) else None, rubric.content_hash)
        if problem:
            raise ProblemError(422, "Invalid options", f"options.triage: {problem}")

    def grader(self, spec: str, rubric: Rubric, options: GradeOptions) -> Grader:
        try:
            return self.graders.get(spec, rubric, options)
        except JudgeSpecError as exc:
            raise ProblemError(400, "Judge not available", str(exc), code=exc.code) from None

    async def resolved(self, items: list[Item], key: ApiKey,
                       fetched: list[Upload] | None = None) -> tuple[list[Item], list[str | None]]:
        """Items with their videos as server paths, and the client's references to show in records.
        Uploads and media-root paths are resolved (and the items copied) in a worker thread, so a
        job of 100,000 of them holds no other request; URLs are fetched by the event loop."""
        refs = list(dict.fromkeys(it.video for it in items if it.video))
        urls = [ref for ref in refs if "://" in ref]

        def local() -> dict[str, Path]:  # nothing here awaits: its own loop, in this thread
            return asyncio.run(self.media.resolve_many([ref for ref in refs if "://" not in ref], key.id))

        paths = await asyncio.to_thread(local) if len(urls) < len(refs) else {}
        if urls:
            paths |= await self.media.resolve_many(urls, key.id, fetched)

        def copies() -> list[Item]:
            with collector_paused():
                return [it.model_copy(update={"video": str(paths[it.video])}) if it.video else it for it in items]

        return (await asyncio.to_thread(copies) if len(items) > 100 else copies()), [it.video for it in items]

    async def multipart(self, request: Request, key: ApiKey) -> Form:
        content_type = request.headers.get("content-type", "")
        if not content_type.startswith("multipart/form-data"):
            raise ProblemError(415, "Multipart expected", "send videos as multipart/form-data file parts")
        return await read_multipart(capped_stream(request, self.upload_limit), content_type, self.store, key.id,
                                    MAX_BODY, self.settings.max_files_per_request)

    def own_job(self, job_id: str, key: ApiKey) -> JobStatus:
        """The job's status, for its owner (or an admin key); 404 for anyone else."""
        status = job_status(self.engine, job_id) if generated_id(job_id) else None
        if status is None or (job_owner(self.engine, job_id) != key.id and not holds(key, "admin")):
            raise ProblemError(404, "No such job", f"no job with id {job_id!r}")
        return status

    def graded_job(self, job_id: str, key: ApiKey) -> JobStatus:
        """own_job, for a job that graded items (what calibrations, reviews and leaderboards read);
        422 for another kind (an alignment)."""
        status = self.own_job(job_id, key)
        if status.kind != "grade":
            raise ProblemError(422, "Not a grading job", f"job {job_id} is an {status.kind} job; give a job that "
                                                         "graded items")
        return status


def service(request: Request) -> Service:
    return request.app.state.service


# The API key, as the OpenAPI document declares it (an HTTP bearer scheme: Swagger UI's Authorize
# button, a token argument in generated clients). It never refuses a request itself: the header is
# read as sent and checked by Service.authorize, which says what is wrong with it.
BEARER = HTTPBearer(scheme_name="bearer", auto_error=False, description="an API key (framejudge keys create)")


def authorization(request: Request,
                  _: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)] = None) -> str | None:
    """The request's Authorization header, as sent (None without one)."""
    return request.headers.get("authorization")


AuthorizationDep = Annotated[str | None, Depends(authorization)]


class KeyWith:
    """A dependency: the request's API key, which must hold one of `scopes` (an admin key holds
    every scope). With `optional`, a request without an Authorization header gets None (a key
    that is sent is checked all the same). The scopes are read from here by the API reference's
    test: every route's needs are what its dependencies say."""

    def __init__(self, *scopes: str, optional: bool = False) -> None:
        self.scopes, self.optional = scopes, optional

    def __call__(self, request: Request, authorization: AuthorizationDep) -> ApiKey | None:
        if authorization is None and self.optional:
            return None
        return service(request).authorize(authorization, self.scopes)


def authorized(*scopes: str) -> KeyWith:
    """A dependency: the request's API key, which must hold one of `scopes` (or admin)."""
    return KeyWith(*scopes)


ServiceDep = Annotated[Service, Depends(service)]
