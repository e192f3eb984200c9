"""Durable batch jobs: items and their verdicts live in the database; workers take items from it.

An item is claimed (pending -> running) in one transaction and finished (records written,
running -> done) in another, so a server killed at any moment loses nothing finished and
repeats nothing finished: on start, items left running are put back to pending, and their
records, never written, are written once when they are graded again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
from datetime import datetime, timezone

from pydantic import BaseModel
from sqlalchemy import DateTime, Integer, String, Text, UniqueConstraint, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Mapped, Session, mapped_column

from ..judge import JudgeSpecError
from ..rubrics import get_rubric
from ..judge.pipeline import Record
from ..schema import Item, JudgeError, JudgeErrorKind, SamplerParams
from .graders import GraderCache
from .store import Base


log = logging.getLogger("framejudge.service")


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    key_id: Mapped[str] = mapped_column(String(16))
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    judge: Mapped[str] = mapped_column(String(500))
    rubric: Mapped[str] = mapped_column(String(200))
    sampler_json: Mapped[str] = mapped_column(Text)
    cancelled: Mapped[int] = mapped_column(Integer, default=0)
    __table_args__ = (UniqueConstraint("key_id", "idempotency_key"),)


class JobItem(Base):
    __tablename__ = "job_items"

    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_json: Mapped[str] = mapped_column(Text)  # with the video resolved to a server path
    video_ref: Mapped[str | None] = mapped_column(Text, nullable=True)  # the client's reference, shown in records
    status: Mapped[str] = mapped_column(String(16), index=True)  # pending, running, done, cancelled


class JobRecord(Base):
    __tablename__ = "job_records"

    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    turn: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # verdict or judge_error
    record_json: Mapped[str] = mapped_column(Text)


def idempotent_job(engine: Engine, key_id: str, idempotency_key: str | None) -> str | None:
    """The job this key already submitted under this Idempotency-Key, if any (an empty key is none)."""
    if not idempotency_key:
        return None
    with Session(engine) as s:
        return s.scalar(select(Job.id).where(Job.key_id == key_id, Job.idempotency_key == idempotency_key))


def create_job(engine: Engine, key_id: str, items: list[Item], judge: str, rubric: str, sampler: SamplerParams,
               idempotency_key: str | None, video_refs: list[str | None] | None = None) -> tuple[str, bool]:
    """(job id, created). A repeated Idempotency-Key from the same API key returns the same job,
    also when two such submissions race (the database's unique constraint decides).
    `video_refs` are the client's references for items whose video was resolved to a server path."""
    idempotency_key = idempotency_key or None
    existing = idempotent_job(engine, key_id, idempotency_key)
    if existing is not None:
        return existing, False
    refs = video_refs or [None] * len(items)
    job_id = secrets.token_hex(8)
    try:
        with Session(engine) as s, s.begin():
            s.add(Job(id=job_id, key_id=key_id, idempotency_key=idempotency_key,
                      created_at=datetime.now(timezone.utc), judge=judge, rubric=rubric,
                      sampler_json=sampler.model_dump_json(), cancelled=0))
            s.flush()  # the unique (key, Idempotency-Key) check, before the items are written
            s.add_all(JobItem(job_id=job_id, position=i, item_json=it.model_dump_json(), video_ref=ref,
                              status="pending") for i, (it, ref) in enumerate(zip(items, refs, strict=True)))
    except IntegrityError:
        existing = idempotent_job(engine, key_id, idempotency_key)
        if existing is None:
            raise
        return existing, False
    return job_id, True


class JobStatus(BaseModel):
    id: str
    state: str  # queued, running, done, cancelled
    items: int
    done: int
    pending: int
    running: int
    cancelled_items: int
    judge_errors: int
    judge: str
    rubric: str
    created_at: datetime


def job_status(engine: Engine, job_id: str) -> JobStatus | None:
    with Session(engine) as s:
        job = s.get(Job, job_id)
        if job is None:
            return None
        counts = dict(s.execute(select(JobItem.status, func.count()).where(JobItem.job_id == job_id)
                                .group_by(JobItem.status)).all())
        errors = s.scalar(select(func.count()).select_from(JobRecord).where(JobRecord.job_id == job_id,
                                                                           JobRecord.kind == "judge_error")) or 0
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
        return JobStatus(id=job.id, state=state, items=total, done=done, pending=counts.get("pending", 0),
                         running=counts.get("running", 0), cancelled_items=counts.get("cancelled", 0),
                         judge_errors=errors, judge=job.judge, rubric=job.rubric, created_at=aware(job.created_at))


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


def release_running(engine: Engine) -> int:
    """Items a killed server left running go back to pending."""
    with Session(engine) as s, s.begin():
        result = s.execute(update(JobItem).where(JobItem.status == "running").values(status="pending"))
        return result.rowcount or 0


def _claim(engine: Engine) -> tuple[Job, JobItem] | None:
    with Session(engine) as s, s.begin():
        row = s.execute(select(JobItem, Job).join(Job, Job.id == JobItem.job_id)
                        .where(JobItem.status == "pending", Job.cancelled == 0)
                        .order_by(Job.created_at, JobItem.position).limit(1)).first()
        if row is None:
            return None
        item, job = row
        claimed = s.execute(update(JobItem).where(JobItem.job_id == item.job_id, JobItem.position == item.position,
                                                  JobItem.status == "pending").values(status="running"))
        if not claimed.rowcount:
            return None  # another worker took it
        s.expunge(item)
        s.expunge(job)
        return job, item


def _finish(engine: Engine, job_id: str, position: int, records: list) -> None:
    with Session(engine) as s, s.begin():
        for r in records:
            s.merge(JobRecord(job_id=job_id, position=position, turn=r.turn, kind=r.record, record_json=r.model_dump_json()))
        s.execute(update(JobItem).where(JobItem.job_id == job_id, JobItem.position == position).values(status="done"))


class Worker:
    """Takes items from the database one at a time in a background thread."""

    def __init__(self, engine: Engine, graders: GraderCache, on_records=None) -> None:  # type: ignore[no-untyped-def]
        self.engine = engine
        self.graders = graders
        self.on_records = on_records
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="framejudge-worker", daemon=True)

    def start(self) -> None:
        release_running(self.engine)
        self.thread.start()

    def close(self, timeout: float = 30.0) -> None:
        """Graceful: the item in hand is finished (or, past the timeout, left to be released)."""
        self.stop.set()
        self.thread.join(timeout)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            while not self.stop.is_set():
                claimed = _claim(self.engine)
                if claimed is None:
                    self.stop.wait(0.2)
                    continue
                job, row = claimed
                item = Item.model_validate_json(row.item_json)
                records = loop.run_until_complete(self._grade(job, item))
                if row.video_ref is not None:
                    show_video_ref(records, row.video_ref, item.video)
                _finish(self.engine, job.id, row.position, records)
                if self.on_records is not None:
                    self.on_records(records)
        finally:
            loop.close()

    async def _grade(self, job: Job, item: Item) -> list[Record]:
        """The item's records. A judge that cannot be made, or a failure the pipeline did not turn
        into a record, becomes a backend_error per turn: the worker goes on with the next item."""
        try:
            grader = self.graders.get(job.judge, get_rubric(job.rubric),
                                      SamplerParams.model_validate_json(job.sampler_json))
            return await grader.grade(item)
        except Exception as exc:  # noqa: BLE001 - one item's failure must not stop the worker
            log.error("job %s item %s: %s", job.id, item.id, exc, exc_info=not isinstance(exc, JudgeSpecError))
            return [JudgeError(item_id=item.id, turn=turn, kind=JudgeErrorKind.backend_error,
                               message=f"{type(exc).__name__}: {exc}", metadata=dict(item.metadata))
                    for turn in range(len(item.turns))]


def show_video_ref(records: list, ref: str, server_path: str | None) -> None:
    """Records name the video as the client did (an upload id or URL), never by its server path,
    in provenance and in judge error messages alike."""
    for record in records:
        provenance = getattr(record, "provenance", None)
        if provenance is not None and provenance.video is not None:
            provenance.video = ref
        message = getattr(record, "message", None)
        if server_path and isinstance(message, str) and server_path in message:
            record.message = message.replace(server_path, ref)


def parse_items_body(raw: bytes, content_type: str) -> list[dict]:
    """A JSON list of items, {"items": [...]} or JSONL (application/x-ndjson, or recognised by its lines)."""
    text = raw.decode("utf-8")
    if "ndjson" in content_type or "jsonl" in content_type:
        return _jsonl(text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        if "json" in content_type:
            raise
        return _jsonl(text)
    if isinstance(data, dict):
        data = data.get("items", [data] if "turns" in data else None)
    if not isinstance(data, list):
        raise ValueError("the body must be a JSON list of items, {\"items\": [...]}, or JSONL")
    return data


def _jsonl(text: str) -> list[dict]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"JSONL line {number}: {exc.msg}") from None
    return rows
