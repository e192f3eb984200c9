"""The durable queue on a real SQLite file and a real PostgreSQL server: leases, fair shares,
finishing under one's own lease only, and claims that do not sort the queue."""

from __future__ import annotations

import time

from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from framejudge.db import engine_for
from framejudge.runner import queue
from framejudge.runner.queue import JobItem, JobRecord
from framejudge.schema import GradeOptions, Item, JudgeError, JudgeErrorKind, SamplerParams
from framejudge.service.jobs import create_job, job_status


def _items(n: int, prefix: str = "i") -> list[Item]:
    return [Item(id=f"{prefix}{k}", turns=[{"question": "Q?", "response_a": "A."}]) for k in range(n)]


def _record(item_id: str) -> JudgeError:
    return JudgeError(item_id=item_id, kind=JudgeErrorKind.backend_error, message="x")


def _job(engine, key: str, n: int, prefix: str = "i", priority: int = 0) -> str:
    job, _ = create_job(engine, key, _items(n, prefix), "reference", "video-qa", GradeOptions(), None,
                        priority=priority)
    return job


def test_a_claim_leases_items_and_only_the_holder_finishes_them(database_url):
    engine = engine_for(database_url)
    job = _job(engine, "k1", 5)
    mine = queue.claim(engine, "w1", 3, lease_s=60)
    assert [c.position for c in mine] == [0, 1, 2] and all(c.job_id == job for c in mine)
    theirs = queue.claim(engine, "w2", 10, lease_s=60)
    assert [c.position for c in theirs] == [3, 4]  # never an item another worker holds
    assert queue.claim(engine, "w3", 10, lease_s=60) == []
    # w2 may not finish w1's item; w1 may
    stolen = queue.finish(engine, "w2", [queue.Finished(job, 0, [_record("i0")])])
    assert len(stolen) == 1
    assert queue.finish(engine, "w1", [queue.Finished(job, 0, [_record("i0")])]) == []
    with Session(engine) as s:
        assert s.scalar(select(JobRecord.record_json).where(JobRecord.job_id == job, JobRecord.position == 0))
        assert s.get(JobItem, (job, 0)).status == "done"
    assert queue.heartbeat(engine, "w1", 60) == 2  # the two it still holds


def test_only_expired_leases_are_put_back(database_url):
    engine = engine_for(database_url)
    job = _job(engine, "k1", 4)
    queue.claim(engine, "dead", 2, lease_s=0.2)
    queue.claim(engine, "alive", 2, lease_s=60)
    time.sleep(0.3)
    assert queue.reclaim_expired(engine) == 2  # the dead worker's two, not the live one's
    again = queue.claim(engine, "new", 10, lease_s=60)
    assert [c.position for c in again] == [0, 1]
    # the dead worker comes back and tries to finish: its lease is gone, nothing is written
    assert len(queue.finish(engine, "dead", [queue.Finished(job, 0, [_record("i0")])])) == 1
    with Session(engine) as s:
        assert s.scalar(select(JobRecord.record_json).where(JobRecord.job_id == job)) is None
        attempts = s.get(JobItem, (job, 0)).attempts
    assert attempts == 2


def test_a_clean_stop_hands_back_what_it_holds(database_url):
    engine = engine_for(database_url)
    _job(engine, "k1", 3)
    queue.claim(engine, "w1", 3, lease_s=60)
    assert queue.release(engine, "w1") == 3
    assert len(queue.claim(engine, "w2", 3, lease_s=60)) == 3


def test_a_small_job_from_another_key_is_not_held_back_by_a_big_one(database_url):
    engine = engine_for(database_url)
    big = _job(engine, "heavy", 2000, "h")
    taken = [queue.claim(engine, "w", 50, lease_s=60) for _ in range(3)]  # the big job is running
    small = _job(engine, "light", 3, "s")
    later = queue.claim(engine, "w", 50, lease_s=60)
    assert {c.job_id for c in later} == {small} and len(later) == 3  # served at the next claim
    after = queue.claim(engine, "w", 50, lease_s=60)
    assert {c.job_id for c in after} == {big} and all(len(t) == 50 for t in taken)


def test_keys_take_turns_and_priority_orders_one_keys_jobs(database_url):
    engine = engine_for(database_url)
    a_low = _job(engine, "a", 10, "al", priority=0)
    a_high = _job(engine, "a", 10, "ah", priority=5)
    b = _job(engine, "b", 10, "b")
    order = [queue.claim(engine, "w", 2, lease_s=60)[0].job_id for _ in range(6)]
    # a and b alternate; a's high-priority job goes first although it was submitted later
    assert order[0::2] == [a_high, a_high, a_high] or order[1::2] == [a_high, a_high, a_high]
    assert order.count(b) == 3 and a_low not in order


def test_a_cancelled_job_is_not_claimed_and_an_emptied_job_stops_being_looked_at(database_url):
    from framejudge.service.jobs import cancel_job

    engine = engine_for(database_url)
    gone = _job(engine, "k", 5, "g")
    cancel_job(engine, gone)
    assert queue.claim(engine, "w", 5, lease_s=60) == []
    job = _job(engine, "k", 2)
    assert len(queue.claim(engine, "w", 5, lease_s=0.1)) == 2
    assert queue.claim(engine, "w", 5, lease_s=60) == []
    with Session(engine) as s:
        assert s.get(queue.Job, job).active == 0  # nothing pending: not a candidate any more
    time.sleep(0.2)
    assert queue.reclaim_expired(engine) == 2
    with Session(engine) as s:
        assert s.get(queue.Job, job).active == 1  # its items came back
    assert len(queue.claim(engine, "w", 5, lease_s=60)) == 2


def test_the_claim_reads_pending_items_through_the_index_without_sorting(tmp_path):
    """The O(n^2) job came from sorting every pending row on every claim; the claim's item query
    must be answered from the (job, status, position) index, with no sort step."""
    engine = engine_for(f"sqlite:///{tmp_path / 'q.sqlite'}")
    job = _job(engine, "k", 500)
    statement = queue.pending_items(job, 16)
    sql = str(statement.compile(engine, compile_kwargs={"literal_binds": True}))
    with engine.connect() as conn:
        plan = " | ".join(row[-1] for row in conn.execute(text("EXPLAIN QUERY PLAN " + sql)))
    assert "ix_job_items_claim" in plan and "TEMP B-TREE" not in plan, plan


def test_job_options_round_trip(database_url):
    engine = engine_for(database_url)
    options = GradeOptions(sampler=SamplerParams(n=5, strategy="scene", lookback=12.0), swap=True, samples=3,
                           blind=True, cache=False, jpeg_quality=70)
    job, _ = create_job(engine, "k", _items(2), "reference", "video-qa", options, None, priority=7)
    [claimed, _] = queue.claim(engine, "w", 2, lease_s=60)
    assert claimed.options == options
    status = job_status(engine, job)
    assert status.options == options and status.priority == 7


def test_throughput_and_eta_appear_once_items_finish(database_url):
    engine = engine_for(database_url)
    job = _job(engine, "k", 6)
    base = time.time() - 10
    for position in range(4):
        [c] = queue.claim(engine, "w", 1, lease_s=60)
        queue.finish(engine, "w", [queue.Finished(job, c.position, [_record(f"i{c.position}")])])
        with Session(engine) as s, s.begin():  # finished a second apart, as a slow model would
            s.execute(update(JobItem).where(JobItem.job_id == job, JobItem.position == c.position)
                      .values(finished_at=base + position))
    status = job_status(engine, job)
    assert status.state == "running" and status.items_per_second is not None
    assert abs(status.items_per_second - 1.0) < 0.01 and abs(status.eta_s - 2.0) < 0.05
