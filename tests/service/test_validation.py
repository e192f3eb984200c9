"""The HTTP API validates what it is sent as the CLI does: the same models and the same rules
(unique item ids, one label per annotator and turn, no unknown fields or parameters), and every
refusal says why. Against the real app and a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import json

import pytest
from fastapi.testclient import TestClient

from framejudge.calibration.inputs import LabelsError, load_human_labels
from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from framejudge.service.app import create_app
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for

TURN = {"question": "What number?", "golden": "10", "response_a": "It shows 10.", "response_b": "I cannot answer that."}
ITEM = {"id": "a", "turns": [TURN]}
LABEL = {"item_id": "a", "turn": 0, "annotator": "h1", "preference": "A"}


@contextmanager
def api_client(tmp_path: Path, **client: Any) -> Iterator[TestClient]:
    """The real app on a SQLite file, a media root holding c.mp4, signed in with a grade and
    calibrate key; `client` goes to the TestClient."""
    media = tmp_path / "media"
    media.mkdir()
    write_video(media / "c.mp4", countdown, cfr_times(2, 30), gop=30)
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", media_root=media,
                        upload_dir=tmp_path / "uploads", run_worker=False)
    key = create_key(engine_for(settings.database_url), ["grade", "calibrate"])
    with TestClient(create_app(settings), **client) as c:
        c.headers["Authorization"] = f"Bearer {key}"
        yield c


@pytest.fixture()
def api(tmp_path):
    with api_client(tmp_path) as client:
        yield client


def graded(client) -> list[dict]:
    r = client.post("/v1/grade", json={"item": ITEM})
    assert r.status_code == 200, r.text
    return r.json()["records"]


def test_calibrate_refuses_a_turn_one_annotator_labelled_twice_as_the_cli_does(api, tmp_path):
    twice = [LABEL, {**LABEL, "preference": "B"}]
    labels_file = tmp_path / "labels.jsonl"
    labels_file.write_text("\n".join(json.dumps(x) for x in twice) + "\n")
    with pytest.raises(LabelsError) as cli:
        load_human_labels(labels_file)
    r = api.post("/v1/calibrate", json={"labels": twice, "verdicts": graded(api), "replicates": 10})
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json", r.text[:300]
    assert r.json()["detail"] == "labels: label 1: h1 labelled item a turn 0 twice"
    assert str(cli.value) == f"{labels_file}:2: h1 labelled item a turn 0 twice"
    # the same labels twice over are refused too (the CLI refuses any repeat)
    r = api.post("/v1/calibrate", json={"labels": [LABEL, LABEL], "verdicts": graded(api), "replicates": 10})
    assert r.status_code == 422 and "labelled item a turn 0 twice" in r.json()["detail"]
    # another annotator, or another turn, is no repeat
    ok = [LABEL, {**LABEL, "annotator": "h2"}, {**LABEL, "turn": 1}]
    assert api.post("/v1/calibrate", json={"labels": ok, "verdicts": graded(api), "replicates": 10}).status_code == 200


@pytest.mark.parametrize("path, body", [
    ("/v1/calibrate", {"labels": [LABEL], "verdicts": None, "replicates": 10, "seeds": 3}),
    ("/v1/frames", {"video": "c.mp4", "n": 3}),
    ("/v1/grade", {"item": ITEM, "rubirc": "video-qa"}),
])
def test_request_bodies_refuse_unknown_fields(api, path, body):
    if path == "/v1/calibrate":
        body = {**body, "verdicts": graded(api)}
    r = api.post(path, json=body)
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json", r.text[:300]
    unknown = next(k for k in body if k in ("seeds", "n", "rubirc"))
    assert r.json()["detail"] == f"{unknown}: Extra inputs are not permitted"


@pytest.mark.parametrize("method, path", [
    ("post", "/v1/jobs?rubirc=mcq-letter"),
    ("post", "/v1/jobs?judge=reference&samples=3"),
    ("post", "/v1/grade?judge=reference"),
    ("get", "/v1/rubrics?kind=mcq"),
])
def test_unknown_query_parameters_are_refused(api, method, path):
    """A misspelt parameter is an error, as a misspelt option is for the CLI, not the default."""
    r = getattr(api, method)(path, **({"json": [ITEM] if "jobs" in path else {"item": ITEM}} if method == "post" else {}))
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json", r.text[:300]
    name = path.split("?")[1].split("&")[-1].split("=")[0]
    assert r.json()["detail"].startswith(f"query.{name}: unknown parameter"), r.json()["detail"]


def test_known_query_parameters_still_work(api):
    r = api.post("/v1/jobs?judge=reference&rubric=video-qa&n=4&lookback=2&priority=3", json=[ITEM])
    assert r.status_code == 202, r.text[:300]
    job = r.json()["id"]
    assert api.get(f"/v1/jobs/{job}/verdicts?offset=0&limit=10").status_code == 200


def test_job_items_keep_unique_ids_on_every_body_form(api):
    twice = [ITEM, {**ITEM, "turns": [{**TURN, "response_a": "Ten."}]}]
    forms = [{"json": twice}, {"json": {"items": twice}},
             {"content": "\n".join(json.dumps(x) for x in twice), "headers": {"Content-Type": "application/x-ndjson"}},
             {"files": [("items", (None, json.dumps(twice)))]}]
    for form in forms:
        r = api.post("/v1/jobs", **form)
        assert r.status_code == 422 and r.json()["detail"] == "item 1: duplicate item id 'a'", (form, r.text[:300])


SAMPLER_ERRORS = [
    ({"n": 0}, "sampler: frame budget must be at least 1, got 0"),
    ({"lookback": -1}, "sampler: lookback must be a positive number of seconds, got -1.0"),
    ({"start": 5, "end": 1}, "sampler: window end 1.0 s must be after its start 5.0 s"),
    ({"strategy": "bogus"}, "sampler.strategy: Input should be 'uniform', 'fps', 'keyframes' or 'scene'"),
]


@pytest.mark.parametrize("form, sampler, reason", [
    (form, sampler, reason) for form in ("body", "query", "multipart", "shorthand") for sampler, reason in SAMPLER_ERRORS
    if form != "shorthand" or set(sampler) <= {"n", "lookback"}  # only n and lookback have shorthands
])
def test_sampler_errors_say_why_on_jobs_as_on_grade(api, form, sampler, reason):
    options = json.dumps({"sampler": sampler})
    if form == "body":
        r = api.post("/v1/jobs", json={"items": [ITEM], "options": {"sampler": sampler}})
    elif form == "query":
        r = api.post("/v1/jobs", params={"options": options}, json=[ITEM])
    elif form == "multipart":
        r = api.post("/v1/jobs", files=[("items", (None, json.dumps([ITEM]))), ("options", (None, options))])
    else:
        r = api.post("/v1/jobs", params=sampler, json=[ITEM])
    assert r.status_code == 422 and r.json()["detail"] == reason, r.text[:300]
    r = api.post("/v1/grade", json={"item": ITEM, "options": {"sampler": sampler}})
    assert r.status_code == 422 and r.json()["detail"] == f"options.{reason}", r.text[:300]


@pytest.mark.parametrize("path", ["/v1/grade", "/v1/frames", "/v1/calibrate", "/v1/jobs"])
def test_unreadable_bodies_say_what_is_wrong(api, path):
    r = api.post(path, content=b'{"item": ', headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["detail"] == "body: not JSON (Expecting value at character 9)", r.json()
    r = api.post(path, content=b'\xff{}', headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
    assert r.json()["detail"] == "line 1: not UTF-8 text (byte 0xff at column 1); save the file as UTF-8", r.json()


def test_record_problems_name_the_field_not_pydantic_internals(api):
    [verdict] = graded(api)
    del verdict["response_a"]
    r = api.post("/v1/calibrate", json={"labels": [LABEL], "verdicts": [verdict], "replicates": 10})
    assert r.status_code == 422 and r.json()["detail"] == "verdicts.0.response_a: Field required", r.text[:300]
    error = {"record": "judge_error", "item_id": "a", "turn": 0, "kind": "no_such_kind", "message": "x"}
    r = api.post("/v1/calibrate", json={"labels": [LABEL], "verdicts": [error], "replicates": 10})
    assert r.status_code == 422 and r.json()["detail"].startswith("verdicts.0.kind: Input should be"), r.text[:300]


def test_a_clip_for_a_judge_without_video_is_refused_as_the_cli_refuses_it(api):
    for path, body in (("/v1/grade", {"item": ITEM, "options": {"video_input": "clip"}}),
                       ("/v1/jobs", {"items": [ITEM], "options": {"video_input": "clip"}})):
        r = api.post(path, json=body)
        assert r.status_code == 422, r.text
        assert "options.video_input clip: the reference judge sends frames only" in r.json()["detail"], r.text
