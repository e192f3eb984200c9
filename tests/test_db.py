"""A database made by an older framejudge gains the columns and indexes a newer one defines."""

from __future__ import annotations

import sqlite3

from sqlalchemy import inspect

from framejudge.db import engine_for
from framejudge.runner import queue
from framejudge.schema import GradeOptions, Item
from framejudge.service.jobs import create_job, job_status


def test_an_older_database_is_brought_up_to_date(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as conn:  # the tables as the version before leases made them
        conn.executescript("""
            CREATE TABLE jobs (id VARCHAR(32) PRIMARY KEY, key_id VARCHAR(16), idempotency_key VARCHAR(200),
                               created_at DATETIME, judge VARCHAR(500), rubric VARCHAR(200), sampler_json TEXT NOT NULL,
                               cancelled INTEGER, UNIQUE (key_id, idempotency_key));
            CREATE TABLE job_items (job_id VARCHAR(32), position INTEGER, item_json TEXT, video_ref TEXT,
                                    status VARCHAR(16), PRIMARY KEY (job_id, position));
            INSERT INTO jobs VALUES ('a1', 'k', NULL, '2026-11-01 10:00:00', 'reference', 'video-qa',
                                     '{"n": 8}', 0);
            INSERT INTO job_items VALUES ('a1', 0, '{"id": "x", "turns": [{"question": "Q?", "response_a": "A."}]}',
                                          NULL, 'running');
        """)
    engine = engine_for(f"sqlite:///{path}")
    columns = {c["name"] for c in inspect(engine).get_columns("job_items")}
    assert {"lease_owner", "lease_expires", "attempts", "finished_at"} <= columns
    assert "ix_job_items_claim" in {i["name"] for i in inspect(engine).get_indexes("job_items")}
    old = job_status(engine, "a1")
    assert old.options.sampler.n == 8 and old.priority == 0  # read from the old sampler column
    assert queue.reclaim_expired(engine) == 1  # left running without a lease: back to pending
    [claimed] = queue.claim(engine, "w", 5, lease_s=60)
    assert claimed.job_id == "a1" and claimed.position == 0
    new, _ = create_job(engine, "k", [Item(id="y", turns=[{"question": "Q?", "response_a": "A."}])], "reference",
                        "video-qa", GradeOptions(), None)
    assert job_status(engine, new).state == "queued"
