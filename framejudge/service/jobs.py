"""Durable batch jobs as the API sees them: submitting (with idempotency), status and progress,
records, cancelling. The queue itself (claims, leases, fair shares) and its workers are in
framejudge.runner.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Sequence
from datetime import datetime, timezone
from itertools import islice
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import JSON, cast, delete, func, insert, select, type_coerce, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..errors import FramejudgeError
from ..files import NotJSON, strict_loads, utf8_text
from ..judge.batch import error_example
from ..runner.judges import judge_endpoint
from ..runner.queue import Job, JobItem, JobRecord, live_workers, throughput
from ..schema import GradeOptions, Item
from .store import owned_page


ITEM_BATCH = 5000  # job items written per statement (an executemany), not one object each


class IdempotencyMismatch(FramejudgeError, ValueError):
    """An Idempotency-Key reused for a different request."""

    code = "idempotency_key_reused"


def request_hash(judge: str, rubric: str, options: GradeOptions, priority: int, items: list[dict[str, Any]]) -> str:
    """What a job submission asks for, as one hash: a retry under the same Idempotency-Key
    must ask for the same (items as given, uploaded videos by their content)."""
    payload = {"judge": judge, "rubric": rubric, "options": options.model_dump(mode="json"), "priority": priority,
               "items": items}
    digest = hashlib.sha256()  # json.dumps(payload, sort_keys=True), hashed a piece at a time: the same
    for piece in json.JSONEncoder(sort_keys=True).iterencode(payload):  # bytes, never one long call
        digest.update(piece.encode())
    return digest.hexdigest()


def idempotent_job(engine: Engine, key_id: str, idempotency_key: str | None,
                   fingerprint: str | None = None) -> str | None:
    """The job this key already submitted under this Idempotency-Key, if any (an empty key is
    none); IdempotencyMismatch when that job was submitted with another request."""
    if not idempotency_key:
        return None
    with Session(engine) as s:
        found = s.execute(select(Job.id, Job.request_hash).where(
            Job.key_id == key_id, Job.idempotency_key == idempotency_key)).first()
    if found is None:
        return None
    if fingerprint is not None and found.request_hash is not None and found.request_hash != fingerprint:
        raise IdempotencyMismatch(f"Idempotency-Key {idempotency_key!r} was used for job {found.id} with a "
                                  "different request (items, judge, rubric, options or priority); use a new key "
                                  "for a new job")
    return found.id


def create_job(engine: Engine, key_id: str, items: Sequence[BaseModel], judge: str, rubric: str,
               options: GradeOptions, idempotency_key: str | None, video_refs: list[str | None] | None = None,
               priority: int = 0, fingerprint: str | None = None, judge_endpoint: str | None = None,
               kind: str = "grade") -> tuple[str, bool]:
    """(job id, created). A repeated Idempotency-Key from the same API key returns the same job
    when the request is the same (`fingerprint`, from request_hash) and raises
    IdempotencyMismatch when it is not, also when two such submissions race (the database's
    unique constraint decides). `video_refs` are the client's references for items whose video
    was resolved to a server path. `judge_endpoint`: where the server's judge sends its calls
    (Judges.endpoint_of): workers take the job only where theirs is the same. `kind`: grade (the
    items are Items) or align (one item: the alignment's task)."""
    idempotency_key = idempotency_key or None
    existing = idempotent_job(engine, key_id, idempotency_key, fingerprint)
    if existing is not None:
        return existing, False
    refs = video_refs or [None] * len(items)
    job_id = secrets.token_hex(8)
    try:
        with Session(engine) as s, s.begin():
            s.add(Job(id=job_id, key_id=key_id, idempotency_key=idempotency_key, request_hash=fingerprint,
                      created_at=datetime.now(timezone.utc), kind=kind, judge=judge,
                      judge_endpoint=judge_endpoint, rubric=rubric,
                      sampler_json=options.sampler.model_dump_json(), options_json=options.model_dump_json(),
                      cancelled=0, priority=priority, active=1))
            s.flush()  # the unique (key, Idempotency-Key) check, before the items are written
            rows = ({"job_id": job_id, "position": i, "item_json": it.model_dump_json(), "video_ref": ref,
                     "status": "pending", "attempts": 0} for i, (it, ref) in enumerate(zip(items, refs, strict=True)))
            while batch := list(islice(rows, ITEM_BATCH)):  # one transaction: no worker sees part of a job
                s.execute(insert(JobItem), batch)
    except IntegrityError:
        existing = idempotent_job(engine, key_id, idempotency_key, fingerprint)
        if existing is None:
            raise
        return existing, False
    return job_id, True


class JobStatus(BaseModel):
    id: str
    kind: str = Field("grade", description="grade: items graded; align: a calibration's alignment "
                                           "(GET /v1/calibrate/{id}/alignments lists it under this id when done)")
    state: str  # queued, running, done, cancelled
    items: int
    done: int
    pending: int
    running: int
    cancelled_items: int
    judge_errors: int
    errors: dict[str, int] = Field(default_factory=dict, description="the judge errors by kind")
    error_examples: dict[str, str] = Field(default_factory=dict, description="each kind's first message (by the "
                                                                             "item's position): item, turn and what happened")
    judge: str
    rubric: str
    options: GradeOptions
    priority: int = Field(description="order among this key's jobs (higher first); keys share workers fairly")
    created_at: datetime
    items_per_second: float | None = Field(description="over the last minute; null until items finish")
    eta_s: float | None = Field(description="seconds until the unfinished items are done, at that rate")
    waiting: str | None = Field(None, description="why no live worker can take the pending items (none runs, or "
                                                  "none makes this judge calling the server's endpoint); null "
                                                  "when one can")


def job_status(engine: Engine, job_id: str) -> JobStatus | None:
    with Session(engine) as s:
        job = s.get(Job, job_id)
        if job is None:
            return None
        counts = dict(s.execute(select(JobItem.status, func.count()).where(JobItem.job_id == job_id)
                                .group_by(JobItem.status)).all())
        by_kind, examples = _errors_by_kind(s, job_id)
        errors = sum(by_kind.values())
        total = sum(counts.values())
        done = counts.get("done", 0)
        if job.cancelled:
            state = "cancelled"
        elif done == total:
            state = "done"
        elif counts.get("running", 0) or done:
            state = "running"
        else:
            state = "queued"
        rate = throughput(s, job_id) if state == "running" else None
        left = counts.get("pending", 0) + counts.get("running", 0)
        waiting = untaken(s, job) if counts.get("pending", 0) and not job.cancelled else None
        return JobStatus(id=job.id, kind=job.kind or "grade", state=state, items=total, done=done,
                         pending=counts.get("pending", 0), running=counts.get("running", 0), cancelled_items=counts.get("cancelled", 0),
                         judge_errors=errors, errors=by_kind, error_examples=examples, judge=job.judge, rubric=job.rubric, options=job.options(),
                         priority=job.priority or 0, created_at=aware(job.created_at), items_per_second=rate,
                         eta_s=left / rate if rate else None, waiting=waiting)


def _errors_by_kind(s: Session, job_id: str) -> tuple[dict[str, int], dict[str, str]]:
    """A job's judge errors counted by kind, and each kind's first message (the lowest item position's), read
    from the records' JSON in the database (SQLite's json_extract, PostgreSQL's ->>) in one query."""
    column = JobRecord.record_json
    document = cast(column, JSON) if s.get_bind().dialect.name == "postgresql" else type_coerce(column, JSON)
    kind = document["kind"].as_string()
    ranked = (select(kind.label("kind"), column.label("record"), func.count().over(partition_by=kind).label("n"),
                     func.row_number().over(partition_by=kind, order_by=(JobRecord.position, JobRecord.turn))
                     .label("rank"))
              .where(JobRecord.job_id == job_id, JobRecord.kind == "judge_error").subquery())
    counts: dict[str, int] = {}
    examples: dict[str, str] = {}
    for name, n, first in s.execute(select(ranked.c.kind, ranked.c.n, ranked.c.record).where(ranked.c.rank == 1)):
        record = json.loads(first)
        counts[name or "unknown"] = n
        examples[name or "unknown"] = error_example(record.get("item_id"), record.get("turn"), record.get("message"))
    return counts, examples


def untaken(s: Session, job: Job) -> str | None:
    """Why no live worker can take this job's items (None: one can)."""
    live = live_workers(s)
    if not live:
        return "no worker is running: start `framejudge serve` with its worker, or `framejudge worker`"
    if job.judge_endpoint is None:  # from before endpoints were recorded: any worker takes it
        return None
    for worker in live:
        described = json.loads(worker.judges_json)
        if judge_endpoint(job.judge, described.get("judges", {}), described.get("api_base")) == job.judge_endpoint:
            return None
    where = job.judge_endpoint or "the provider's own endpoint"
    return (f"none of the {len(live)} live worker(s) makes judge {job.judge} calling {where}, as the server "
            "does: start a worker with the server's judges file (FRAMEJUDGE_JUDGES_FILE) and FRAMEJUDGE_API_BASE")


def list_jobs(engine: Engine, key_id: str, offset: int, limit: int) -> list[JobStatus]:
    """A page of this key's jobs, newest first (an admin key's own too: listing is per key)."""
    jobs = owned_page(engine, Job, key_id, offset, limit)
    return [status for status in (job_status(engine, job.id) for job in jobs) if status is not None]


def aware(moment: datetime) -> datetime:
    """SQLite hands back stored UTC times without their zone; every time the API returns has one."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def job_owner(engine: Engine, job_id: str) -> str | None:
    with Session(engine) as s:
        job = s.get(Job, job_id)
        return None if job is None else job.key_id


def job_records(engine: Engine, job_id: str, offset: int, limit: int | None) -> list[str]:
    with Session(engine) as s:
        rows = s.scalars(select(JobRecord.record_json).where(JobRecord.job_id == job_id)
                         .order_by(JobRecord.position, JobRecord.turn).offset(offset).limit(limit)).all()
        return list(rows)


def cancel_job(engine: Engine, job_id: str) -> bool:
    with Session(engine) as s, s.begin():
        job = s.get(Job, job_id)
        if job is None:
            return False
        job.cancelled = 1
        s.execute(update(JobItem).where(JobItem.job_id == job_id, JobItem.status == "pending").values(status="cancelled"))
        return True


def remove_job(engine: Engine, job_id: str) -> bool:
    """Delete a finished job with its items and records; False (nothing deleted) while any of its
    items is still pending or being graded."""
    with Session(engine) as s, s.begin():
        busy = s.scalar(select(func.count()).select_from(JobItem).where(
            JobItem.job_id == job_id, JobItem.status.in_(("pending", "running"))))
        if busy:
            return False
        s.execute(delete(JobRecord).where(JobRecord.job_id == job_id))
        s.execute(delete(JobItem).where(JobItem.job_id == job_id))
        s.execute(delete(Job).where(Job.id == job_id))
        return True


def parse_items_body(raw: bytes, content_type: str) -> tuple[list[dict], dict]:
    """The items of a JSON list, {"items": [...], "options": {...}, "priority": N} or JSONL
    (application/x-ndjson, or recognised by its lines), and the object form's other fields."""
    text = utf8_text(raw)  # with or without the byte-order mark spreadsheet programs write (a
    # UnicodeDecodeError is answered as for every other body: "body: not UTF-8 text (... at byte N)")
    if "ndjson" in content_type or "jsonl" in content_type:
        return _jsonl(text), {}
    try:
        data = strict_loads(text)
    except json.JSONDecodeError:
        if "json" in content_type:
            raise
        return _jsonl(text), {}
    except NotJSON as exc:
        raise ValueError(f"body: {exc}") from None
    except RecursionError:
        raise ValueError("the body is nested too deeply to read") from None
    extra: dict = {}
    if isinstance(data, dict):
        if "items" in data:
            unknown = set(data) - {"items", "options", "priority"}
            if unknown:
                raise ValueError(f"unknown field(s) beside items: {', '.join(sorted(unknown))}")
            extra = {k: data[k] for k in ("options", "priority") if k in data}
            data = data["items"]
        else:
            data = [data] if "turns" in data else None
    if not isinstance(data, list):
        raise ValueError("the body must be a JSON list of items, {\"items\": [...]}, or JSONL")
    return data, extra


def _jsonl(text: str) -> list[dict]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(strict_loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"JSONL line {number}: {exc.msg}") from None
            except NotJSON as exc:
                raise ValueError(f"JSONL line {number}: {exc}") from None
            except RecursionError:
                raise ValueError(f"JSONL line {number}: nested too deeply to read") from None
    return rows


def job_items(engine: Engine, job_id: str) -> list[Item]:
    """A job's items in order, with their videos as the server reads them."""
    with Session(engine) as s:
        rows = s.scalars(select(JobItem.item_json).where(JobItem.job_id == job_id).order_by(JobItem.position))
        return [Item.model_validate_json(r) for r in rows]
