"""A queue worker in this process, on a real SQLite file and a real PostgreSQL server, grading
against a model server on loopback: its leases outlive an event loop held by CPU work."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bench.model_server import ModelServer
from framejudge.db import engine_for
from framejudge.frame_sampler import sample_frames
from framejudge.runner import queue
from framejudge.runner.graders import GraderCache
from framejudge.runner.judges import Judges
from framejudge.runner.queue import JobItem, JobRecord
from framejudge.runner.worker import QueueWorker
from framejudge.schema import GradeOptions, Item, JudgeConfig
from framejudge.service.jobs import create_job, job_status

pytest.importorskip("litellm")

JUDGE = "litellm:openai/bench"


def items(n: int) -> list[Item]:
    return [Item(id=f"i{k}", turns=[{"question": f"[item i{k}] How many people?", "golden": "2 people.",
                                     "response_a": "There are 2 people."}]) for k in range(n)]


def judges(base_url: str | None, api_base: str | None = None) -> Judges:
    configs = [] if base_url is None else [JudgeConfig(spec=JUDGE, api_base=base_url, concurrency=4,
                                                        max_concurrency=4, timeout_s=30, price={})]
    return Judges(configs, api_base=api_base)


@contextmanager
def running(worker: QueueWorker) -> Iterator[asyncio.AbstractEventLoop]:
    """The worker in a thread of its own event loop (as `framejudge worker` runs it); stopped on exit."""
    started: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def main() -> None:
        started.append((asyncio.get_running_loop(), asyncio.Event()))
        await worker.run(started[0][1])

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    wait_until(lambda: bool(started))
    loop, stop = started[0]
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=60)


def wait_until(condition, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def held(engine, worker: QueueWorker) -> int:
    with Session(engine) as s:
        return s.scalar(select(func.count()).select_from(JobItem).where(JobItem.lease_owner == worker.name,
                                                                       JobItem.status == "running")) or 0


def test_a_worker_whose_event_loop_is_held_by_cpu_work_keeps_its_leases(database_url):
    """CPU work in the event loop (a model load, OCR) holds it for longer than a lease: the
    heartbeats go on beside it, so another worker's reclaim takes nothing from this live one."""
    engine = engine_for(database_url)
    with ModelServer(latency=0.5) as model:
        job, _ = create_job(engine, "k", items(12), JUDGE, "video-qa", GradeOptions(swap=False, cache=False), None)
        worker = QueueWorker(engine, GraderCache(sample_frames, judges(model.base_url)), lease_s=3.0)
        with running(worker) as loop:
            wait_until(lambda: held(engine, worker) > 0)
            loop.call_soon_threadsafe(time.sleep, 5.0)  # the loop is held for longer than a lease
            taken, until = 0, time.time() + 5.0
            while time.time() < until:  # another worker, reclaiming expired leases meanwhile
                taken += queue.reclaim_expired(engine)
                time.sleep(0.2)
            assert taken == 0
            wait_until(lambda: job_status(engine, job).state == "done")
        assert worker.lost == 0 and worker.graded == 12
        assert sorted(model.stats()["by_tag"].values()) == [1] * 12  # each item graded once
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(JobRecord).where(JobRecord.job_id == job)) == 12


@pytest.mark.parametrize("lease", [0.5, 2.0, 2.99])
def test_a_lease_shorter_than_three_heartbeats_is_refused(database_url, lease):
    with pytest.raises(ValueError, match="shorter than 3 heartbeats"):
        QueueWorker(engine_for(database_url), GraderCache(sample_frames, Judges()), lease_s=lease)


def test_a_worker_takes_only_jobs_whose_judge_it_makes_as_the_server_does(database_url, tmp_path):
    """The server's judges file sends litellm:openai/bench to a self-hosted server. A worker
    started without that file (its judge would call another endpoint: here a decoy standing for
    the provider's public one) takes none of the job's items, and the job's status says why; a
    worker with the server's judges file grades them all."""
    from fastapi.testclient import TestClient

    from framejudge.runner.judges import load_judges_file
    from framejudge.service.app import create_app
    from framejudge.service.settings import Settings
    from framejudge.service.store import create_key

    engine = engine_for(database_url)
    key = {"Authorization": f"Bearer {create_key(engine, ['grade'])}"}
    with ModelServer(latency=0.05) as model, ModelServer(latency=0.05) as decoy:
        judges_file = tmp_path / "judges.yaml"
        judges_file.write_text(f"judges:\n  - spec: {JUDGE}\n    api_base: {model.base_url}\n    price: {{}}\n")
        settings = Settings(database_url=database_url, upload_dir=tmp_path / "uploads", run_worker=False,
                            judges_file=judges_file, requests_per_minute=10_000)
        with TestClient(create_app(settings)) as client:
            def status() -> dict:
                return client.get(f"/v1/jobs/{job}", headers=key).json()

            body = {"items": [it.model_dump(mode="json") for it in items(6)], "options": {"swap": False}}
            job = client.post(f"/v1/jobs?judge={JUDGE}", json=body, headers=key).json()["id"]
            assert status()["waiting"].startswith("no worker is running")
            elsewhere = QueueWorker(engine, GraderCache(sample_frames, judges(None, api_base=decoy.base_url)),
                                    lease_s=3.0, poll_s=0.05)
            with running(elsewhere):
                wait_until(lambda: "none of the 1 live worker(s)" in (status()["waiting"] or ""))
                assert f"makes judge {JUDGE} calling {model.base_url}" in status()["waiting"]
                time.sleep(1.0)  # many chances to claim
                assert status()["pending"] == 6 and decoy.stats()["requests"] == 0
                right = QueueWorker(engine, GraderCache(sample_frames, Judges(load_judges_file(judges_file))),
                                    lease_s=3.0, poll_s=0.05)
                with running(right):
                    wait_until(lambda: status()["state"] == "done")
                    assert status()["waiting"] is None
            assert right.graded == 6 and elsewhere.graded == 0
            assert decoy.stats()["requests"] == 0 and sorted(model.stats()["by_tag"].values()) == [1] * 6
            records = client.get(f"/v1/jobs/{job}/verdicts", headers=key).json()["records"]
            assert [r["record"] for r in records] == ["verdict"] * 6
            again = client.post(f"/v1/jobs?judge={JUDGE}", json=body, headers=key).json()["id"]
            assert client.get(f"/v1/jobs/{again}", headers=key).json()["waiting"].startswith("no worker is running")


def test_a_worker_stops_grading_the_items_of_a_revoked_keys_job(database_url):
    """A key revoked while a worker grades its items against a model that never answers: the
    worker stops those items (their calls in flight are dropped, the items waiting for a call
    never make one) and writes nothing for them."""
    from framejudge.service.store import create_key, revoke_key

    engine = engine_for(database_url)
    with ModelServer(hang=True) as model:
        key_id = create_key(engine, ["grade"]).split("_")[1]
        job, _ = create_job(engine, key_id, items(10), JUDGE, "video-qa", GradeOptions(swap=False, cache=False), None)
        worker = QueueWorker(engine, GraderCache(sample_frames, judges(model.base_url)), lease_s=30.0)
        with running(worker):
            wait_until(lambda: model.stats()["in_flight"] == 4 and held(engine, worker) == 6)  # 4 calls, 2 waiting
            revoked = revoke_key(engine, key_id)
            assert revoked is not None and (revoked.stopped.pending, revoked.stopped.running) == (4, 6)
            wait_until(lambda: model.stats()["in_flight"] == 0)  # the calls end with their items
        assert model.stats()["requests"] == 4 and worker.graded == 0
    status = job_status(engine, job)
    assert status is not None and status.state == "cancelled" and status.done == 0
