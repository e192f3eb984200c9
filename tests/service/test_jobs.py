"""Durable batch jobs through the real app, on a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import json
import time

import pytest
from fastapi.testclient import TestClient

from sqlalchemy import text

from framejudge.service.app import create_app
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for


def items(n: int) -> list[dict]:
    return [{"id": f"i{k}", "turns": [{"question": "How many people?", "golden": f"{k % 4} people.",
                                       "response_a": f"There are {k % 4} people.",
                                       "response_b": "I cannot answer that."}]} for k in range(n)]


@pytest.fixture()
def db(database_url, tmp_path):
    engine = engine_for(database_url)
    key = create_key(engine, ["grade"])
    other = create_key(engine, ["grade"])

    def settings(**overrides) -> Settings:
        return Settings(database_url=database_url, upload_dir=tmp_path / "uploads", **overrides)

    return settings, key, other, engine


def auth(key):
    return {"Authorization": f"Bearer {key}"}


def wait_done(client, job_id, key, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = client.get(f"/v1/jobs/{job_id}", headers=auth(key)).json()
        if status["state"] in ("done", "cancelled"):
            return status
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish: {status}")


def test_submit_poll_and_page(db):
    settings, key, other, _ = db
    with TestClient(create_app(settings())) as client:
        r = client.post("/v1/jobs", json=items(30), headers=auth(key))
        assert r.status_code == 202 and r.json()["items"] == 30
        job = r.json()["id"]
        status = wait_done(client, job, key)
        assert status["done"] == 30 and status["judge_errors"] == 0
        page = client.get(f"/v1/jobs/{job}/verdicts?offset=10&limit=5", headers=auth(key)).json()
        assert [r["item_id"] for r in page["records"]] == [f"i{k}" for k in range(10, 15)]
        stream = client.get(f"/v1/jobs/{job}/verdicts", headers={**auth(key), "Accept": "application/x-ndjson"})
        lines = [json.loads(x) for x in stream.text.splitlines()]
        assert stream.headers["content-type"].startswith("application/x-ndjson") and len(lines) == 30
        assert all(v["preference"] == "A" for v in lines)
        # the stream takes offset and limit as the page does (from offset; all by default)
        ndjson = {**auth(key), "Accept": "application/x-ndjson"}
        for query, expected in (("offset=10&limit=5", range(10, 15)), ("offset=25", range(25, 30)),
                                ("limit=2", range(2)), ("offset=40", range(0)), ("limit=1200", range(30))):
            part = client.get(f"/v1/jobs/{job}/verdicts?{query}", headers=ndjson).text.splitlines()
            assert [json.loads(x)["item_id"] for x in part] == [f"i{k}" for k in expected], query
        assert client.get(f"/v1/jobs/{job}/verdicts", headers=auth(key)).json()["limit"] == 100
        big = client.get(f"/v1/jobs/{job}/verdicts?limit=1200", headers=auth(key))
        assert big.status_code == 422 and big.json()["detail"].startswith("query.limit: a JSON page holds at most 1000")
        # another key cannot see it
        assert client.get(f"/v1/jobs/{job}", headers=auth(other)).status_code == 404


def test_jsonl_body_and_idempotency(db):
    settings, key, *_ = db
    body = "\n".join(json.dumps(i) for i in items(3))
    with TestClient(create_app(settings(run_worker=False))) as client:
        h = {**auth(key), "Content-Type": "application/x-ndjson", "Idempotency-Key": "batch-7"}
        a = client.post("/v1/jobs", content=body, headers=h).json()
        b = client.post("/v1/jobs", content=body, headers=h).json()
        assert a["id"] == b["id"] and a["items"] == 3
        c = client.post("/v1/jobs", content=body, headers={**h, "Idempotency-Key": "batch-8"}).json()
        assert c["id"] != a["id"]
        cancelled = client.delete(f"/v1/jobs/{a['id']}", headers=auth(key)).json()
        assert cancelled["state"] == "cancelled" and cancelled["cancelled_items"] == 3


def test_bad_submissions(db):
    settings, key, *_ = db
    with TestClient(create_app(settings(run_worker=False))) as client:
        r = client.post("/v1/jobs", content="not json", headers={**auth(key), "Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["title"] == "Invalid body"
        r = client.post("/v1/jobs", json=[{"id": "x", "turns": []}], headers=auth(key))
        assert r.status_code == 422 and r.json()["detail"].startswith("item 0: turns")
        r = client.post("/v1/jobs", json=[], headers=auth(key))
        assert r.status_code == 422
        r = client.post("/v1/jobs?judge=litellm:x", json=items(1), headers=auth(key))
        assert r.status_code == 400


def test_restart_resumes_without_losing_or_repeating(db):
    settings, key, _, engine = db
    with TestClient(create_app(settings(run_worker=False))) as client:
        job = client.post("/v1/jobs", json=items(20), headers=auth(key)).json()["id"]
    # A server killed mid-run: 5 items finished, 1 taken but not finished.
    with TestClient(create_app(settings())) as client:
        deadline = time.time() + 30
        while client.get(f"/v1/jobs/{job}", headers=auth(key)).json()["done"] < 5 and time.time() < deadline:
            time.sleep(0.01)
    with engine.begin() as conn:
        conn.execute(text("update job_items set status='running' where job_id=:j and position=(select min(position) "
                          "from job_items where job_id=:j and status!='done')"), {"j": job})
    with TestClient(create_app(settings())) as client:
        status = wait_done(client, job, key)
        assert status["done"] == 20
        lines = client.get(f"/v1/jobs/{job}/verdicts", headers={**auth(key), "Accept": "application/x-ndjson"}).text.splitlines()
    ids = [json.loads(x)["item_id"] for x in lines]
    assert sorted(ids) == sorted(f"i{k}" for k in range(20)) and len(ids) == len(set(ids))


def test_metrics(db):
    settings, key, _, engine = db
    with TestClient(create_app(settings())) as client:
        job = client.post("/v1/jobs", json=items(4), headers=auth(key)).json()["id"]
        wait_done(client, job, key)
        client.post("/v1/grade", json={"item": items(1)[0]}, headers=auth(key))
        client.get("/v1/rubrics")  # 401
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers=auth(key)).status_code == 403  # a grade key
        scraper = create_key(engine, ["metrics"])
        text = client.get("/metrics", headers=auth(scraper)).text
    assert 'framejudge_job_items{state="done"} 4.0' in text
    assert "framejudge_verdicts_total 5.0" in text
    assert 'framejudge_http_requests_total{method="GET",route="/v1/rubrics",status="401"} 1.0' in text
    assert 'framejudge_http_request_seconds_count{route="/v1/grade"} 1.0' in text


def test_idempotency_edge_cases_and_malformed_ids(db):
    """An empty Idempotency-Key is no key (each submit is a new job); ids this server could not
    have generated (a NUL, which PostgreSQL refuses outright) are 404, never a database error."""
    settings, key, _, engine = db
    with TestClient(create_app(settings(run_worker=False))) as client:
        h = {**auth(key), "Idempotency-Key": ""}
        a = client.post("/v1/jobs", json=items(1), headers=h)
        b = client.post("/v1/jobs", json=items(1), headers=h)
        assert a.status_code == b.status_code == 202 and a.json()["id"] != b.json()["id"]
        admin = create_key(engine, ["admin"])  # every scope: the id itself is what is refused
        for path in ("/v1/jobs/ab%00cd", "/v1/jobs/NOT-HEX", "/v1/calibrate/ab%00cd/report"):
            r = client.get(path, headers=auth(admin))
            assert r.status_code == 404 and r.json()["title"] in ("No such job", "No such calibration"), path
        assert client.delete("/v1/videos/upload:ab%00cd", headers=auth(key)).status_code == 404
        r = client.post("/v1/grade", json={"item": {**items(1)[0], "video": "a\x00b.mp4"}}, headers=auth(key))
        assert r.status_code == 422 and "NUL" in r.json()["detail"]  # refused by the item's own validation


def test_racing_submissions_with_one_idempotency_key_make_one_job(db):
    from concurrent.futures import ThreadPoolExecutor

    from framejudge.schema import GradeOptions, Item
    from framejudge.service.jobs import create_job

    settings, key, _, engine = db
    item = [Item.model_validate(items(1)[0])]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: create_job(engine, "k1", item, "reference", "video-qa", GradeOptions(),
                                                     "same-key"), range(16)))
    assert len({job for job, _ in results}) == 1 and sum(created for _, created in results) == 1


def test_a_judge_that_cannot_be_made_fails_its_items_not_the_worker(db, tmp_path):
    settings, key, *_ = db
    missing = f"transformers:{tmp_path / 'no-such-model'}"
    with TestClient(create_app(settings(judges=["reference", missing]))) as client:
        broken = client.post(f"/v1/jobs?judge={missing}", json=items(2), headers=auth(key)).json()["id"]
        fine = client.post("/v1/jobs", json=items(2), headers=auth(key)).json()["id"]
        status = wait_done(client, broken, key)
        assert status["judge_errors"] == 2 and status["errors"] == {"backend_error": 2}
        assert status["error_examples"]["backend_error"].startswith("item ") and "cannot use model" in status["error_examples"]["backend_error"]
        fine_status = wait_done(client, fine, key)
        assert fine_status["judge_errors"] == 0 and fine_status["errors"] == {}  # the worker went on
        records = client.get(f"/v1/jobs/{broken}/verdicts", headers=auth(key)).json()["records"]
    assert all(r["record"] == "judge_error" and r["kind"] == "backend_error" for r in records)
    assert "cannot use model" in records[0]["message"]



def test_idempotency_key_reused_for_another_request_is_refused(db):
    settings, key, other, engine = db
    with TestClient(create_app(settings(run_worker=False))) as client:
        h = {**auth(key), "Idempotency-Key": "nightly-1"}
        first = client.post("/v1/jobs", json=items(3), headers=h)
        assert first.status_code == 202
        assert client.post("/v1/jobs", json=items(3), headers=h).json()["id"] == first.json()["id"]
        edited = items(3)
        edited[1]["turns"][0]["response_a"] = "There are 9 people."
        for body, query in ((edited, ""), (items(4), ""), (items(3), "?rubric=video-qa&n=4"), (items(3), "?priority=5")):
            r = client.post(f"/v1/jobs{query}", json=body, headers=h)
            assert r.status_code == 422 and r.json()["title"] == "Idempotency-Key reused", (query, r.text)
            assert first.json()["id"] in r.json()["detail"]
        # the same key name is another key's own
        assert client.post("/v1/jobs", json=edited, headers={**auth(other), "Idempotency-Key": "nightly-1"}
                           ).status_code == 202
        # uploads: the same bytes under the same name are the same request; other bytes are not
        from framejudge.examples.clips import countdown
        from framejudge.examples.synth import cfr_times, write_video
        from pathlib import Path
        video = Path(settings().upload_dir).parent / "c.mp4"
        write_video(video, countdown, cfr_times(1, 10))
        row = json.dumps({**items(1)[0], "video": "c.mp4"})
        hu = {**auth(key), "Idempotency-Key": "upload-1"}
        def send(data: bytes):
            return client.post("/v1/jobs", headers=hu, data={"items": row},
                               files=[("video", ("c.mp4", data, "video/mp4"))])
        a = send(video.read_bytes())
        assert a.status_code == 202, a.text
        uploads_before = sorted(p.name for p in Path(settings().upload_dir).rglob("*.video"))
        assert send(video.read_bytes()).json()["id"] == a.json()["id"]
        write_video(video, countdown, cfr_times(2, 10))
        assert send(video.read_bytes()).status_code == 422
        # neither retry left an upload behind
        assert sorted(p.name for p in Path(settings().upload_dir).rglob("*.video")) == uploads_before


def test_mcq_rubric_is_refused_by_grade_and_jobs(db):
    settings, key, *_ = db
    with TestClient(create_app(settings(run_worker=False))) as client:
        r = client.post("/v1/jobs?rubric=mcq-letter", json=items(1), headers=auth(key))
        assert r.status_code == 400 and "is a mcq rubric" in r.json()["detail"]
        body = {"item": items(1)[0], "rubric": "mcq-letter"}
        r = client.post("/v1/grade", json=body, headers=auth(key))
        assert r.status_code == 400 and r.json()["title"] == "Wrong kind of rubric"


@pytest.mark.parametrize("query", ["offset=9223372036854775808", "offset=-1", "offset=1e3", "limit=0",
                                   "limit=9223372036854775808"])
def test_paging_numbers_out_of_range_are_422(db, query):
    settings, key, _, _ = db
    with TestClient(create_app(settings())) as client:
        job = client.post("/v1/jobs", json=items(2), headers=auth(key)).json()["id"]
        wait_done(client, job, key)
        r = client.get(f"/v1/jobs/{job}/verdicts?{query}", headers=auth(key))
        assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json", r.text
        assert r.json()["detail"].startswith(f"query.{query.split('=')[0]}:")
        last = client.get(f"/v1/jobs/{job}/verdicts?offset=1", headers=auth(key)).json()
        assert [rec["item_id"] for rec in last["records"]] == ["i1"]


def test_a_key_lists_its_own_jobs_newest_first_a_page_at_a_time(db):
    settings, key, other, engine = db
    with TestClient(create_app(settings(run_worker=False))) as client:
        mine = [client.post("/v1/jobs", json=items(k + 1), headers=auth(key)).json()["id"] for k in range(5)]
        theirs = client.post("/v1/jobs", json=items(1), headers=auth(other)).json()["id"]
        first = client.get("/v1/jobs?limit=2", headers=auth(key))
        assert first.status_code == 200, first.text
        assert [j["id"] for j in first.json()["jobs"]] == mine[::-1][:2]
        rest = client.get("/v1/jobs?offset=2&limit=10", headers=auth(key)).json()["jobs"]
        assert [j["id"] for j in rest] == mine[::-1][2:] and [j["items"] for j in rest] == [3, 2, 1]
        assert all(j["state"] == "queued" for j in rest)
        assert [j["id"] for j in client.get("/v1/jobs", headers=auth(other)).json()["jobs"]] == [theirs]
        client.delete(f"/v1/jobs/{mine[0]}", headers=auth(key))  # cancelled: still listed, as cancelled
        assert client.get("/v1/jobs?offset=4", headers=auth(key)).json()["jobs"][0]["state"] == "cancelled"
        assert client.get("/v1/jobs?offset=5", headers=auth(key)).json()["jobs"] == []
        assert client.get("/v1/jobs", headers=auth(create_key(engine, ["review"]))).status_code == 403
        for query in ("limit=0", "limit=501", "offset=-1"):
            r = client.get(f"/v1/jobs?{query}", headers=auth(key))
            assert r.status_code == 422 and r.json()["detail"].startswith(f"query.{query.split('=')[0]}:"), r.text


def test_a_jobs_errors_are_counted_by_kind_with_the_lowest_positions_message(db):
    """Each kind's count and its first message by item position and turn, whatever order the records were
    written in; other jobs' errors and the job's verdicts count for nothing."""
    from sqlalchemy.orm import Session

    from framejudge.runner.queue import JobRecord
    from framejudge.service.jobs import _errors_by_kind

    engine = db[3]

    def error(job, position, turn, kind, message):
        record = {"record": "judge_error", "item_id": f"i{position}", "turn": turn, "kind": kind, "message": message}
        return JobRecord(job_id=job, position=position, turn=turn, kind="judge_error", record_json=json.dumps(record))

    with Session(engine) as s, s.begin():
        s.add_all([error("j1", 5, 0, "timeout", "late five"), error("j1", 2, 1, "timeout", "late two-one"),
                   error("j1", 2, 0, "timeout", "late two"), error("j1", 7, 0, "invalid_output", "bad seven"),
                   error("j1", 3, 0, "invalid_output", "bad three"), error("j2", 0, 0, "timeout", "other job"),
                   JobRecord(job_id="j1", position=0, turn=0, kind="verdict", record_json='{"record": "verdict"}')])
    with Session(engine) as s:
        counts, examples = _errors_by_kind(s, "j1")
        assert _errors_by_kind(s, "j3") == ({}, {})
    assert counts == {"timeout": 3, "invalid_output": 2}
    assert examples == {"timeout": "item i2 turn 0: late two", "invalid_output": "item i3 turn 0: bad three"}
