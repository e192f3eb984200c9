"""The durable queue of job items, shared by every worker on one SQLite or PostgreSQL database.

- A claim takes up to N pending items of one job in one transaction and leases them to the
  worker (`lease_owner`, `lease_expires`); the worker's heartbeat extends its leases. On
  PostgreSQL the items are selected `FOR UPDATE SKIP LOCKED`, so concurrent claimers take
  different items without waiting; on SQLite (which ignores that clause) writers are serialized
  by the database, and the claim's update only takes rows still pending. One code path.
- A claim takes only the items of jobs whose API key lives (neither revoked nor expired: checked
  in the claim's own query, so a key revoked between two claims gets nothing more); revoking a
  key stops its unfinished jobs (stop_key_jobs), and an expired key's are stopped by the workers'
  housekeeping. A worker stops grading an item it no longer holds (dropped).
- A claim costs the same whatever the queue's length: the job is chosen among the active jobs
  (few), and its items are read through the (job, status, position) index, never sorted.
- Fair shares: the job comes from the API key served least recently (round-robin across keys,
  so one key's 100,000-item job cannot hold back another key's small one); among one key's
  jobs, higher `priority` first, then the oldest.
- An item is finished only by the worker that holds its lease: records written and the item
  marked done in one transaction, on the condition that the lease is still this worker's. A
  worker that died loses its leases when they expire; any worker then puts those items back
  (and only those: a live worker's items are never taken). An item is therefore graded once,
  unless its worker died holding it, and it has exactly one record per turn either way.

Times are seconds since the epoch from the workers' clocks (keep them in sync; leases are long
compared with clock drift).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, cast

from sqlalchemy import (DateTime, Float, Index, Integer, Select, String, Text, UniqueConstraint, Update, and_, delete,
                        exists, func, insert, or_, select, update)
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.orm import Mapped, Session, mapped_column

from ..db import Base
from ..schema import GradeOptions, SamplerParams
from .keys import ApiKey, dead, owner_lives


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    key_id: Mapped[str] = mapped_column(String(16))
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    request_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)  # what was submitted under it
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    kind: Mapped[str | None] = mapped_column(String(16), nullable=True)  # grade (None: from before) or align
    judge: Mapped[str] = mapped_column(String(500))
    # where the server's judge sends its calls (judges.judge_endpoint; '' the provider's own or
    # none): a worker takes the job only where its judge is the same (None: from before, any worker)
    judge_endpoint: Mapped[str | None] = mapped_column(Text, nullable=True)
    rubric: Mapped[str] = mapped_column(String(200))
    sampler_json: Mapped[str] = mapped_column(Text)  # the sampler alone (what older versions stored)
    options_json: Mapped[str | None] = mapped_column(Text, nullable=True)  # GradeOptions
    cancelled: Mapped[int] = mapped_column(Integer, default=0)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    active: Mapped[int] = mapped_column(Integer, default=1, index=True)  # may have pending items
    __table_args__ = (UniqueConstraint("key_id", "idempotency_key"),
                      Index("ix_jobs_key_created", "key_id", "created_at"))  # a key's jobs, newest first

    def options(self) -> GradeOptions:
        if self.options_json:
            return GradeOptions.model_validate_json(self.options_json)
        return GradeOptions(sampler=SamplerParams.model_validate_json(self.sampler_json))


class JobItem(Base):
    __tablename__ = "job_items"

    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_json: Mapped[str] = mapped_column(Text)  # with the video resolved to a server path; an align job's task
    video_ref: Mapped[str | None] = mapped_column(Text, nullable=True)  # the client's reference, shown in records
    status: Mapped[str] = mapped_column(String(16), index=True)  # pending, running, done, cancelled
    lease_owner: Mapped[str | None] = mapped_column(String(80), nullable=True, index=True)
    lease_expires: Mapped[float | None] = mapped_column(Float, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    __table_args__ = (Index("ix_job_items_claim", "job_id", "status", "position"),
                      Index("ix_job_items_lease", "status", "lease_expires"),
                      Index("ix_job_items_finished", "job_id", "finished_at"))


class JobRecord(Base):
    __tablename__ = "job_records"

    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    turn: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # verdict or judge_error
    record_json: Mapped[str] = mapped_column(Text)


class WorkerRow(Base):
    """A live worker and what decides where its judges' calls go (Judges.described): the job
    status tells from these when no live worker can take a job's items."""

    __tablename__ = "queue_workers"

    name: Mapped[str] = mapped_column(String(80), primary_key=True)
    judges_json: Mapped[str] = mapped_column(Text)
    lease_s: Mapped[float] = mapped_column(Float)
    seen: Mapped[float] = mapped_column(Float)  # its last heartbeat


WORKERS_FORGOTTEN_S = 3600.0  # a worker unseen this long past its lease is no longer listed


class KeyTurn(Base):
    """When each API key was last served by a claim (a sequence number): the round-robin's state."""

    __tablename__ = "queue_turns"

    key_id: Mapped[str] = mapped_column(String(16), primary_key=True)
    served: Mapped[int] = mapped_column(Integer, default=0)


@dataclass
class Claimed:
    """A leased item, with what its job says about grading it."""

    job_id: str
    key_id: str
    judge: str
    rubric: str
    options: GradeOptions
    position: int
    item_json: str
    video_ref: str | None
    kind: str = "grade"  # or align: item_json is the alignment's task


CANDIDATE_JOBS = 16  # active jobs looked at per claim; a job found empty is marked inactive


def claim(engine: Engine, worker: str, want: int, lease_s: float,
          endpoint: Callable[[str], str] | None = None) -> list[Claimed]:
    """Lease up to `want` pending items of one job (the fair share's next) to `worker`. With
    `endpoint` (the worker's Judges.endpoint_of), only jobs whose judge the worker makes exactly as
    the server did: the same spec, calling the same endpoint; the others wait for a worker that
    can (a job from before endpoints were recorded goes to any worker)."""
    now = time.time()
    lives = owner_lives(Job.key_id, datetime.fromtimestamp(now, timezone.utc))  # no revoked or expired key's
    with Session(engine) as s, s.begin():
        takes = and_(Job.active == 1, lives)
        if endpoint is not None:
            pairs = s.execute(select(Job.judge, Job.judge_endpoint).where(Job.active == 1, Job.cancelled == 0, lives)
                              .distinct()).all()  # few: the active jobs' judges
            able = [(judge, at) for judge, at in pairs if at is None or endpoint(judge) == at]
            if not able:
                return []
            takes = and_(takes, or_(*(and_(Job.judge == judge, Job.judge_endpoint.is_(None) if at is None
                                           else Job.judge_endpoint == at) for judge, at in able)))
        jobs = s.execute(
            select(Job).outerjoin(KeyTurn, KeyTurn.key_id == Job.key_id)
            .where(takes, Job.cancelled == 0)
            .order_by(func.coalesce(KeyTurn.served, 0), Job.priority.desc(), Job.created_at, Job.id)
            .limit(CANDIDATE_JOBS)).scalars().all()
        for job in jobs:
            rows = s.execute(pending_items(job.id, want)).scalars().all()
            if not rows:
                still = s.scalar(select(func.count()).select_from(
                    select(JobItem.position).where(JobItem.job_id == job.id, JobItem.status == "pending")
                    .limit(1).subquery()))
                if not still:  # nothing left to claim; a reclaimed lease makes it active again
                    s.execute(update(Job).where(Job.id == job.id).values(active=0))
                continue
            taken = s.execute(
                update(JobItem).where(JobItem.job_id == job.id, JobItem.position.in_(rows), JobItem.status == "pending")
                .values(status="running", lease_owner=worker, lease_expires=now + lease_s,
                        attempts=JobItem.attempts + 1)
                .returning(JobItem.position, JobItem.item_json, JobItem.video_ref)).all()
            if not taken:
                continue
            _served(s, job.key_id)
            options = job.options()
            return [Claimed(job.id, job.key_id, job.judge, job.rubric, options, position, item_json, ref,
                            job.kind or "grade") for position, item_json, ref in sorted(taken)]
    return []


def pending_items(job_id: str, want: int) -> Select[int]:
    """The first `want` pending positions of a job, read through the claim index; locked rows are
    skipped on PostgreSQL (SQLite serializes writers and has no row locks)."""
    return (select(JobItem.position).where(JobItem.job_id == job_id, JobItem.status == "pending")
            .order_by(JobItem.position).limit(want).with_for_update(skip_locked=True))


def _changed(s: Session, statement: Update) -> int:
    """The number of rows an UPDATE matched (Session.execute returns a DML statement's CursorResult,
    which its type does not say)."""
    return cast(CursorResult[Any], s.execute(statement)).rowcount


def _served(s: Session, key_id: str) -> None:
    latest = s.scalar(select(func.max(KeyTurn.served))) or 0
    if _changed(s, update(KeyTurn).where(KeyTurn.key_id == key_id).values(served=latest + 1)) == 0:
        s.add(KeyTurn(key_id=key_id, served=latest + 1))


def announce(engine: Engine, worker: str, judges_json: str, lease_s: float) -> None:
    """`worker` is alive (at its start and each heartbeat), with its judges' endpoints."""
    now = time.time()
    with Session(engine) as s, s.begin():
        if not _changed(s, update(WorkerRow).where(WorkerRow.name == worker)
                        .values(seen=now, judges_json=judges_json, lease_s=lease_s)):
            s.add(WorkerRow(name=worker, judges_json=judges_json, lease_s=lease_s, seen=now))


def live_workers(s: Session) -> list[WorkerRow]:
    """The workers whose last heartbeat is within their lease."""
    return list(s.scalars(select(WorkerRow).where(WorkerRow.seen + WorkerRow.lease_s >= time.time())))


def heartbeat(engine: Engine, worker: str, lease_s: float) -> int:
    """Extend every lease `worker` holds; the number of items it still holds."""
    with Session(engine) as s, s.begin():
        return _changed(s, update(JobItem).where(JobItem.lease_owner == worker, JobItem.status == "running")
                        .values(lease_expires=time.time() + lease_s)) or 0


@dataclass
class Stopped:
    """What stopping a key's jobs stopped: its jobs with items still to grade, their items that
    had not started (cancelled) and those being graded (cancelled: their workers stop them, and
    their records are not written)."""

    jobs: int = 0
    pending: int = 0
    running: int = 0


_unfinished = exists(select(JobItem.position).where(JobItem.job_id == Job.id,
                                                   JobItem.status.in_(("pending", "running"))))


def stop_key_jobs(s: Session, key_ids: Iterable[str]) -> Stopped:
    """Cancel the unfinished jobs of these keys, in the caller's transaction: every item not yet
    done is cancelled, those being graded too (finish writes nothing for them, and their workers
    stop grading them)."""
    keys = list(key_ids)
    jobs = list(s.scalars(select(Job.id).where(Job.key_id.in_(keys), _unfinished))) if keys else []
    if not jobs:
        return Stopped()
    s.execute(update(Job).where(Job.id.in_(jobs)).values(cancelled=1, active=0))
    counts = {state: _changed(s, update(JobItem).where(JobItem.job_id.in_(jobs), JobItem.status == state)
                              .values(status="cancelled", lease_owner=None, lease_expires=None))
              for state in ("pending", "running")}
    return Stopped(jobs=len(jobs), pending=counts["pending"], running=counts["running"])


def reclaim_expired(engine: Engine) -> int:
    """Put back items whose worker's lease ran out (it died or lost the database); a live worker's
    items are never touched. Items left running by a version without leases count as expired.
    Also stops the unfinished jobs of keys that have expired since (as revoking a key does)."""
    now = time.time()
    with Session(engine) as s, s.begin():
        back = s.execute(update(JobItem).where(JobItem.status == "running",
                                               or_(JobItem.lease_expires < now, JobItem.lease_expires.is_(None)))
                         .values(status="pending", lease_owner=None, lease_expires=None)
                         .returning(JobItem.job_id)).scalars().all()
        for job_id in set(back):
            s.execute(update(Job).where(Job.id == job_id).values(active=1))
        s.execute(delete(WorkerRow).where(WorkerRow.seen + WorkerRow.lease_s < now - WORKERS_FORGOTTEN_S))
        gone = s.scalars(select(Job.key_id).join(ApiKey, ApiKey.id == Job.key_id)  # revoked or expired since
                         .where(Job.cancelled == 0, dead(datetime.fromtimestamp(now, timezone.utc)), _unfinished)
                         .distinct())
        stop_key_jobs(s, list(gone))
        return len(back)


def release(engine: Engine, worker: str) -> int:
    """A worker stopping cleanly hands back the items it has not finished, at once."""
    with Session(engine) as s, s.begin():
        s.execute(delete(WorkerRow).where(WorkerRow.name == worker))
        back = s.execute(update(JobItem).where(JobItem.lease_owner == worker, JobItem.status == "running")
                         .values(status="pending", lease_owner=None, lease_expires=None)
                         .returning(JobItem.job_id)).scalars().all()
        for job_id in set(back):
            s.execute(update(Job).where(Job.id == job_id).values(active=1))
        return len(back)


def held(engine: Engine, worker: str) -> set[tuple[str, int]]:
    """The (job, position) of every item `worker` holds now: an item it is grading that is not
    among them was taken from it (its job stopped, or its lease expired and went to another)."""
    with Session(engine) as s:
        return {(job_id, position) for job_id, position in s.execute(
            select(JobItem.job_id, JobItem.position).where(JobItem.lease_owner == worker, JobItem.status == "running"))}


@dataclass
class Finished:
    job_id: str
    position: int
    records: list  # Verdict | JudgeError
    rows: list = field(default_factory=list)  # other rows the item's result is (an alignment), written with them


def finish(engine: Engine, worker: str, done: list[Finished]) -> list[Finished]:
    """Write each item's records and mark it done, where `worker` still holds its lease; the
    items it no longer held (their records were not written) are returned. One transaction,
    one statement per job for the items and one insert for all the records."""
    now = time.time()
    held: set[tuple[str, int]] = set()
    with Session(engine) as s, s.begin():
        by_job: dict[str, list[int]] = {}
        for f in done:
            by_job.setdefault(f.job_id, []).append(f.position)
        for job_id, positions in by_job.items():
            marked = s.execute(update(JobItem).where(JobItem.job_id == job_id, JobItem.position.in_(positions),
                                                     JobItem.lease_owner == worker, JobItem.status == "running")
                               .values(status="done", finished_at=now, lease_owner=None, lease_expires=None)
                               .returning(JobItem.position)).scalars().all()
            held.update((job_id, position) for position in marked)
        rows = [{"job_id": f.job_id, "position": f.position, "turn": r.turn, "kind": r.record,
                 "record_json": r.model_dump_json()}
                for f in done if (f.job_id, f.position) in held for r in f.records]
        if rows:  # an item is finished once, under its lease: its records are new
            s.execute(insert(JobRecord), rows)
        s.add_all(row for f in done if (f.job_id, f.position) in held for row in f.rows)
    return [f for f in done if (f.job_id, f.position) not in held]


def unfinished(engine: Engine, job_ids: list[str]) -> dict[str, int]:
    """Per job, its items not yet done (pending or running)."""
    with Session(engine) as s:
        counts = dict(s.execute(select(JobItem.job_id, func.count()).where(JobItem.job_id.in_(job_ids),
                                                                            JobItem.status != "done")
                                .group_by(JobItem.job_id)).all())
    return {job_id: counts.get(job_id, 0) for job_id in job_ids}


def throughput(s: Session, job_id: str, window_s: float = 60.0) -> float | None:
    """Items per second this job finished over the last `window_s` seconds (None: too few)."""
    since = time.time() - window_s
    count, first, last = s.execute(select(func.count(), func.min(JobItem.finished_at), func.max(JobItem.finished_at))
                                   .where(and_(JobItem.job_id == job_id, JobItem.finished_at >= since))).one()
    if count < 2 or first is None or not last or last <= first:
        return None
    return (count - 1) / (last - first)
