"""A queue worker: grades job items from the database with as many in flight as its judges'
endpoints take now, keeps its leases alive, and writes each item's records once.

The same worker runs inside `framejudge serve` (beside the API, in its event loop) and alone as
`framejudge worker` on any machine that reaches the database.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable

from sqlalchemy.engine import Engine

from ..judge import JudgeSpecError
from ..records import Record
from ..rubrics import rubric_by_id
from ..schema import Item, JudgeError, JudgeErrorKind
from . import queue
from .graders import GraderCache

log = logging.getLogger("framejudge.worker")
MIN_HEARTBEAT_S = 1.0  # a heartbeat is a database write: not more often than this
MIN_LEASE_BEATS = 3  # heartbeats a lease lasts, at least
MIN_LEASE_S = MIN_HEARTBEAT_S * MIN_LEASE_BEATS
HELD_CHECK_S = 1.0  # how often a worker asks whether the items it grades are still its (a read)


def heartbeat_s(lease_s: float) -> float:
    """Seconds between a worker's heartbeats: a third of its lease, never under MIN_HEARTBEAT_S."""
    return max(MIN_HEARTBEAT_S, lease_s / MIN_LEASE_BEATS)


def lease_problem(lease_s: float) -> str | None:
    """Why a lease is too short to keep alive (None when it is long enough)."""
    if lease_s < MIN_LEASE_S:
        return (f"a lease of {lease_s:g} s is shorter than {MIN_LEASE_BEATS} heartbeats ({MIN_HEARTBEAT_S:g} s "
                f"apart): a worker would lose items it is grading; give at least {MIN_LEASE_S:g}")
    return None


def worker_name() -> str:
    return f"{socket.gethostname()[:40]}-{os.getpid()}-{secrets.token_hex(3)}"


def show_video_ref(records: list[Record], ref: str, server_path: str | None) -> None:
    """Records name the video as the client did (an upload id or URL), never by its server path,
    in provenance and in judge error messages alike."""
    for record in records:
        provenance = getattr(record, "provenance", None)
        if provenance is not None and provenance.video is not None:
            provenance.video = ref
        if server_path and isinstance(record, JudgeError) and server_path in record.message:
            record.message = record.message.replace(server_path, ref)


class QueueWorker:
    def __init__(self, engine: Engine, graders: GraderCache, name: str | None = None, lease_s: float = 60.0,
                 max_in_flight: int = 256, local_concurrency: int = 64, prefetch: int = 2,
                 on_records: Callable[[list[Record]], None] | None = None, poll_s: float = 0.2,
                 grace_s: float = 30.0) -> None:
        """`local_concurrency`: items at once for judges without an endpoint (the reference judge,
        a local model); `prefetch`: items beyond the endpoints' limits, decoding while calls wait."""
        problem = lease_problem(lease_s)
        if problem:
            raise ValueError(problem)
        self.engine = engine
        self.graders = graders
        self.name = name or worker_name()
        self.lease_s = lease_s
        self.max_in_flight = max_in_flight
        self.local_concurrency = local_concurrency
        self.prefetch = prefetch
        self.on_records = on_records
        self.poll_s = poll_s
        self.grace_s = grace_s
        # where its judges send their calls: it takes only jobs whose judge goes where the server's does
        self._described = json.dumps(graders.judges.described())
        self.graded = 0  # items this worker finished (records written)
        self.lost = 0  # items finished after their lease had gone to another worker (not written)
        self._jobs_seen: set[str] = set()  # jobs this worker has taken items of (logged once each)

    def capacity(self) -> int:
        limits = [endpoint.limit for endpoint in self.graders.judges.endpoints()]  # every loop: no copies
        wanted = sum(limits) + self.prefetch if limits else self.local_concurrency
        return max(1, min(self.max_in_flight, wanted))

    async def run(self, stop: asyncio.Event) -> None:
        """Until `stop` is set; then the items in hand are finished (for up to `grace_s`) and any
        still unfinished are handed back to the queue. The judges file's judges are made first
        (imports, model loads), so that no item waits on them while its lease runs."""
        for problem in await asyncio.to_thread(self.graders.judges.warm):
            log.error("judge cannot be made: %s", problem)
        await self._db(queue.reclaim_expired, self.engine)
        await self._db(queue.announce, self.engine, self.name, self._described, self.lease_s)
        beating = threading.Event()
        keeper = threading.Thread(target=self._keep_leases, args=(beating,), name=f"leases-{self.name}", daemon=True)
        keeper.start()
        running: dict[asyncio.Task[queue.Finished], tuple[str, int]] = {}  # each grading task's (job, position)
        checked = time.monotonic()
        finished: list[queue.Finished] = []
        writing: asyncio.Task[list[queue.Finished]] | None = None  # one write at a time, beside the grading
        being_written = 0
        try:
            while not stop.is_set():
                # in hand = claimed and not yet written: what a killed worker would cost again
                room = self.capacity() - len(running) - len(finished) - being_written
                claimed = await self._db(queue.claim, self.engine, self.name, room, self.lease_s,
                                         self.graders.judges.endpoint_of) if room > 0 else []
                for c in claimed or []:
                    if c.job_id not in self._jobs_seen:
                        self._jobs_seen.add(c.job_id)
                        log.info("job %s: taken up (%s, judge %s)", c.job_id, c.kind, c.judge,
                                 extra={"job": c.job_id, "event": "job_taken", "judge": c.judge, "worker": self.name})
                    running[asyncio.create_task(self._grade(c))] = (c.job_id, c.position)
                if running and time.monotonic() - checked >= HELD_CHECK_S:
                    checked = time.monotonic()
                    await self._stop_dropped(running)
                if running:
                    done, _ = await asyncio.wait(running, timeout=self.poll_s, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        del running[task]
                    finished += [task.result() for task in done if not task.cancelled()]
                elif writing is None:
                    await _sleep_until(stop, self.poll_s)
                if writing is not None and writing.done():
                    finished = writing.result() + finished  # what could not be written goes again
                    writing, being_written = None, 0
                if finished and writing is None:
                    writing, being_written = asyncio.create_task(self._finish(finished)), len(finished)
                    finished = []
                elif writing is not None and not running:
                    await asyncio.wait([writing], timeout=self.poll_s)
            if running:
                done, pending = await asyncio.wait(running, timeout=self.grace_s)
                finished += [task.result() for task in done if not task.cancelled()]
                for task in pending:
                    task.cancel()
            if writing is not None:
                finished = await writing + finished
            deadline = time.monotonic() + self.grace_s
            while finished and not await self._flushed(finished):
                if time.monotonic() > deadline:  # stopping, and the database is still away: these items
                    log.error("stopping with %d item(s) graded but not written: the database did not come "
                              "back; they are graded again when their leases expire", len(finished))
                    break
                await asyncio.sleep(1.0)  # the database is away: keep the records until it is back
        finally:
            beating.set()
            await asyncio.to_thread(keeper.join)
            await self._db(queue.release, self.engine, self.name)

    async def _stop_dropped(self, running: dict[asyncio.Task[queue.Finished], tuple[str, int]]) -> None:
        """Stop grading the items this worker no longer holds: their job was stopped (its API key
        revoked or expired; their records would not be written) or their lease went to another
        worker. Their model calls end with them."""
        held = await self._db(queue.held, self.engine, self.name)
        if held is None:  # the database is away: the leases decide later
            return
        dropped = [task for task, item in running.items() if not task.done() and item not in held]
        for task in dropped:
            task.cancel()
        for job_id in sorted({running[task][0] for task in dropped}):
            n = sum(1 for task in dropped if running[task][0] == job_id)
            log.info("job %s: stopped grading %d item(s) no longer held (the job was stopped, or their lease "
                     "expired)", job_id, n, extra={"job": job_id, "event": "items_dropped", "worker": self.name})

    async def _finish(self, finished: list[queue.Finished]) -> list[queue.Finished]:
        """Write what is finished; what could not be written (the database is away) is kept."""
        return [] if await self._flushed(finished) else finished

    async def _flushed(self, finished: list[queue.Finished]) -> bool:
        lost = await self._db(queue.finish, self.engine, self.name, finished)
        if lost is None:
            return False
        self.lost += len(lost)
        gone = {id(f) for f in lost}
        written = [f for f in finished if id(f) not in gone]
        self.graded += len(written)
        if self.on_records is not None:
            for f in written:
                self.on_records(f.records)
        for f in lost:
            log.warning("job %s item %d: no longer held by this worker (its lease expired and another worker "
                        "took it, or its job was stopped); these records were not written", f.job_id, f.position,
                        extra={"job": f.job_id, "item": f.position, "event": "lease_lost", "worker": self.name})
        if written and log.isEnabledFor(logging.INFO):
            left = await self._db(queue.unfinished, self.engine, sorted({f.job_id for f in written}))
            for job_id, n in (left or {}).items():
                if n == 0:
                    log.info("job %s: finished (its last item written by %s)", job_id, self.name,
                             extra={"job": job_id, "event": "job_finished", "worker": self.name})
        return True

    def _keep_leases(self, stop: threading.Event) -> None:
        """In a thread of its own, until `stop`: also while CPU work (a model load, OCR) holds the
        event loop, and while a stopping worker finishes what it holds. A lease lasts at least
        MIN_LEASE_BEATS heartbeats, so a late one or two cost no item."""
        beats = 0
        while not stop.wait(heartbeat_s(self.lease_s)):
            for fn, args in ((queue.heartbeat, (self.engine, self.name, self.lease_s)),
                             (queue.announce, (self.engine, self.name, self._described, self.lease_s)),
                             *(((queue.reclaim_expired, (self.engine,)),) if beats % 2 else ())):
                try:  # other workers' expired leases, every other beat
                    fn(*args)
                except Exception as exc:
                    log.warning("queue: %s failed (%s: %s); will retry", fn.__name__, type(exc).__name__,
                                str(exc)[:200])
            beats += 1

    async def _db(self, fn, *args):
        """A queue call in a thread; a database that is away is logged and answered with None."""
        try:
            return await asyncio.to_thread(fn, *args)
        except Exception as exc:
            log.warning("queue: %s failed (%s: %s); will retry", fn.__name__, type(exc).__name__, str(exc)[:200])
            await asyncio.sleep(min(self.poll_s * 5, 1.0))
            return None

    async def _grade(self, c: queue.Claimed) -> queue.Finished:
        """The item's records. A judge that cannot be made, or a failure the pipeline did not turn
        into a record, becomes a backend_error per turn: the worker goes on with the next item.
        An align job's item is its calibration's alignment (framejudge.service.review)."""
        if c.kind == "align":
            from ..service.review.alignments import align_job

            records, rows = await asyncio.to_thread(align_job, self.engine, self.graders, c.job_id, c.key_id,
                                                    c.item_json)
            return queue.Finished(c.job_id, c.position, records, rows)
        item = Item.model_validate_json(c.item_json)
        thresholds = c.options.triage  # marks the verdicts; the grading does not depend on it
        options = c.options.model_copy(update={"triage": None}) if thresholds is not None else c.options
        try:
            # in a thread: a judge made on first use (an import, a model load) must not hold up
            # the other items in flight (the heartbeats have a thread of their own)
            grader = await asyncio.to_thread(self.graders.get, c.judge, rubric_by_id(c.rubric), options)
            records = await grader.grade(item)
            if thresholds is not None:
                from ..calibration.triage import mark_graded

                records = mark_graded(records, thresholds, grader)
        except Exception as exc:
            log.error("job %s item %s: %s", c.job_id, item.id, exc, exc_info=not isinstance(exc, JudgeSpecError))
            records = [JudgeError(item_id=item.id, turn=turn, kind=JudgeErrorKind.backend_error,
                                  message=f"{type(exc).__name__}: {exc}", metadata=dict(item.metadata))
                       for turn in range(len(item.turns))]
        if c.video_ref is not None:
            show_video_ref(records, c.video_ref, item.video)
        return queue.Finished(c.job_id, c.position, records)


async def _sleep_until(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        pass
