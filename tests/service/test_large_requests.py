"""Large submissions are read, checked and stored off the event loop: the server answers other
requests meanwhile. Through a real uvicorn server on loopback, on SQLite and PostgreSQL. Each
test holds the submission inside its processing (an event set from there, released by the test)
and asks /healthz meanwhile: nothing here is timed."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from framejudge.runner.queue import JobItem
from framejudge.service import bodies
from framejudge.service.app import create_app
from framejudge.service.models import CalibrateRequest
from framejudge.service.review.store import ReviewInputs
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for
from tests.service.servers import uvicorn_server

HELD = 60  # seconds a held submission waits for the test to let it go (only if the test itself fails)


def items(n: int) -> list[dict]:
    return [{"id": f"i{k}", "turns": [{"question": "How many people?", "golden": f"{k % 4} people.",
                                       "response_a": f"There are {k % 4} people.",
                                       "response_b": "I cannot answer that."}]} for k in range(n)]


@pytest.fixture()
def server(database_url, tmp_path) -> Iterator[tuple[str, str, Any]]:
    engine = engine_for(database_url)
    key = create_key(engine, ["grade", "calibrate", "review"])
    app = create_app(Settings(database_url=database_url, upload_dir=tmp_path / "uploads", run_worker=False,
                              requests_per_minute=100_000))
    with uvicorn_server(app) as base:
        yield base, key, engine


@contextmanager
def held(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> Iterator[tuple[threading.Event, threading.Event]]:
    """`module.name`, made to stop inside (setting `inside`) until `go` is set."""
    inside, go = threading.Event(), threading.Event()
    original: Callable[..., Any] = getattr(module, name)

    def holding(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        go.wait(HELD)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, holding)
    try:
        yield inside, go
    finally:
        go.set()


def answered_meanwhile(base: str, inside: threading.Event, go: threading.Event, send: Callable[[], httpx.Response]
                       ) -> tuple[httpx.Response, httpx.Response]:
    """Send the large request in a thread; once it is inside its processing, ask /healthz; then
    let the request go on. (/healthz's answer, the large request's answer.)"""
    answers: dict[str, httpx.Response] = {}
    sender = threading.Thread(target=lambda: answers.setdefault("big", send()))
    sender.start()
    try:
        while not inside.wait(0.05):
            assert sender.is_alive(), f"answered without reaching its processing: {answers['big'].text[:300]}"
        health = httpx.get(base + "/healthz", timeout=HELD)  # times out only when the loop is held
    finally:
        go.set()
        sender.join()
    return health, answers["big"]


def test_healthz_answers_while_a_large_job_is_read_and_stored(server, monkeypatch):
    from framejudge.service.routes import jobs

    base, key, engine = server
    body = json.dumps({"items": items(12_000)})  # more than one batch of rows (ITEM_BATCH)
    with held(monkeypatch, jobs, "parse_items_body") as (inside, go):
        health, job = answered_meanwhile(base, inside, go, lambda: httpx.post(
            base + "/v1/jobs", content=body, timeout=HELD,
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"}))
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert job.status_code == 202, job.text
    assert job.json()["items"] == job.json()["pending"] == 12_000
    with Session(engine) as s:
        positions = s.execute(select(func.count(), func.min(JobItem.position), func.max(JobItem.position))
                              .where(JobItem.job_id == job.json()["id"])).one()
    assert tuple(positions) == (12_000, 0, 11_999)


def verdict(item_id: str) -> dict:
    return {"record": "verdict", "item_id": item_id, "turn": 0, "task_type": "single_turn",
            "response_a": {"category": "Successful", "rationale": "agrees"},
            "response_b": {"category": "Not Successful", "rationale": "differs"}, "preference": "A",
            "deciding_criterion": "category",
            "provenance": {"rubric_id": "video-qa", "rubric_version": "1.1.0", "rubric_hash": "0e605a728abbee35",
                           "judge_backend": "reference", "model_id": "reference-5",
                           "created_at": "2026-01-01T00:00:00Z"}}


def calibration(units: int) -> dict:
    return {"labels": [{"item_id": f"i{k}", "turn": 0, "annotator": "ann", "category_a": "Successful",
                        "category_b": "Successful" if k % 3 == 0 else "Not Successful", "preference": "A"}
                       for k in range(units)],
            "verdicts": [verdict(f"i{k}") for k in range(units)], "replicates": 20}


def test_healthz_answers_while_a_large_calibration_is_computed(server, monkeypatch):
    from framejudge.service.routes import calibration as route

    base, key, _ = server
    body = calibration(1200)  # more than one chunk of each list (LIST_CHUNK)
    with held(monkeypatch, route, "check_judged") as (inside, go):  # inside the calibration, in its thread
        health, answer = answered_meanwhile(base, inside, go, lambda: httpx.post(
            base + "/v1/calibrate", json=body, timeout=HELD, headers={"Authorization": f"Bearer {key}"}))
    assert health.status_code == 200
    assert answer.status_code == 200, answer.text
    fields = {f["field"]: f for f in answer.json()["result"]["fields"]}
    assert fields["category_a"]["units"] == 1200


def test_healthz_answers_while_a_large_body_is_checked(server, monkeypatch):
    """The body's own check (the route's model) runs off the loop too, not just the route."""
    base, key, _ = server
    body = calibration(1200)
    with held(monkeypatch, bodies, "checked_lists") as (inside, go):
        health, answer = answered_meanwhile(base, inside, go, lambda: httpx.post(
            base + "/v1/calibrate", json=body, timeout=HELD, headers={"Authorization": f"Bearer {key}"}))
    assert health.status_code == 200
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_healthz_answers_while_a_review_queue_is_read(server, monkeypatch):
    """A review queue's inputs (a large calibration's labels and verdicts) are read off the loop
    the first time a page or a decision needs them."""
    from framejudge.service.review import routes as review

    base, key, _ = server
    headers = {"Authorization": f"Bearer {key}"}
    made = httpx.post(base + "/v1/calibrate", json=calibration(600), headers=headers, timeout=HELD)
    assert made.status_code == 200, made.text
    shown = httpx.get(base + f"/v1/calibrate/{made.json()['id']}/unit", params={"item": "i5"}, headers=headers,
                      timeout=HELD)
    assert shown.status_code == 200, shown.text
    review.CALIBRATIONS.clear()  # as a server that has not read it yet
    decision = {"item_id": "i5", "turn": 0, "action": "adopt_judge", "unit_version": shown.json()["version"]}
    with held(monkeypatch, review, "_calibration") as (inside, go):
        health, answer = answered_meanwhile(base, inside, go, lambda: httpx.post(
            base + f"/v1/calibrate/{made.json()['id']}/decisions", json=decision, timeout=HELD, headers=headers))
    assert health.status_code == 200
    assert answer.status_code == 201, answer.text


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_long_list_checked_in_chunks_is_refused_as_a_whole_body_is(server):
    """A problem in a long list's element is named by its place in the whole list, as before;
    and a body refused by the model's own checks (after its lists) still is."""
    base, key, _ = server
    headers = {"Authorization": f"Bearer {key}"}
    body = calibration(1200)
    body["labels"][1100]["category_a"] = "Brilliant"
    bad = httpx.post(base + "/v1/calibrate", json=body, headers=headers, timeout=HELD)
    assert bad.status_code == 422
    assert bad.json()["detail"].startswith("labels.1100.category_a: Input should be")
    body = calibration(1200)
    body["verdicts"][777]["preference"] = "C"
    bad = httpx.post(base + "/v1/calibrate", json=body, headers=headers, timeout=HELD)
    assert bad.status_code == 422 and bad.json()["detail"].startswith("verdicts.777.preference: Input should be")
    body = calibration(1200)
    body["labels"].append(dict(body["labels"][3]))  # a label given twice: the model's validator says so
    bad = httpx.post(base + "/v1/calibrate", json=body, headers=headers, timeout=HELD)
    assert bad.status_code == 422 and "label 1200" in bad.json()["detail"], bad.json()
    body = calibration(1200)
    body["job_id"] = "0123456789abcdef"  # both sources: the model's own check, after the lists
    bad = httpx.post(base + "/v1/calibrate", json=body, headers=headers, timeout=HELD)
    assert bad.status_code == 422 and "exactly one of" in bad.json()["detail"]


def test_inputs_written_in_pieces_are_the_same_text():
    model = CalibrateRequest.model_validate(calibration(1300))
    inputs = ReviewInputs(labels=model.labels, records=model.verdicts, items=[], job_id="abc", resolved=True)
    assert bodies.json_in_pieces(inputs) == inputs.model_dump_json()
    small = ReviewInputs(labels=model.labels[:3], records=model.verdicts[:3])
    assert bodies.json_in_pieces(small) == small.model_dump_json()


def test_the_collector_runs_again_once_no_large_body_is_read():
    import gc

    assert gc.isenabled()
    with bodies.collector_paused():
        with bodies.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # another body is still being read
    assert gc.isenabled()
