"""The review queue against the real app and a real SQLite file: who may review, sessions and CSRF,
the queue's order and filters, a unit's page (frames at the verdict's timestamps, the conversation,
the judge in both orders, each annotator), decisions that survive a restart and two reviewers at
once, blind mode, and the adjudicated labels exported and measured."""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session

from framejudge.calibration.inputs import load_human_labels
from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from framejudge.frame_sampler import sample_frames
from framejudge.schema import SamplerParams
from framejudge.service.app import create_app
from framejudge.service.review.store import SessionRow
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for

OTHER = {"Successful": "Not Successful", "Not Successful": "Successful", "Irrelevant": "Successful",
         "Missing": "Successful", "Error message": "Successful"}


def _turn(q: str, golden: str, a: str, b: str, time: float | None = None) -> dict[str, Any]:
    t = {"question": q, "golden": golden, "response_a": a, "response_b": b}
    return {**t, "time": time} if time is not None else t


ITEMS = [
    {"id": "disputed", "video": "c.mp4", "domain": "text",
     "turns": [_turn("What number is shown?", "It shows 3.", "It shows 3.", "It shows 7.")]},
    {"id": "split", "video": "c.mp4", "domain": "text",
     "turns": [_turn("What colour is the text?", "White.", "The text is white.", "I cannot tell.")]},
    {"id": "agreed", "video": "c.mp4", "domain": "garden",
     "turns": [_turn("Is there a number?", "Yes, a countdown.", "Yes, a countdown.", "Sorry, I can't help with that.")]},
    {"id": "talk", "video": "c.mp4", "task_type": "multi_turn", "domain": "garden",
     "turns": [_turn("What is on screen?", "A countdown.", "A countdown.", "A cat.", time=0.5),
               _turn("And now?", "A lower number.", "A lower number.", "A dog.", time=1.5)]},
]


@contextmanager
def review_app(tmp_path: Path, database_url: str | None = None, **settings: Any) -> Iterator[dict[str, Any]]:
    """The real app on a SQLite file (or `database_url`) with a media root holding c.mp4."""
    media = tmp_path / "media"
    media.mkdir(exist_ok=True)
    if not (media / "c.mp4").exists():
        write_video(media / "c.mp4", countdown, cfr_times(2, 30), gop=30)
    s = Settings(database_url=database_url or f"sqlite:///{tmp_path / 'db.sqlite'}", media_root=media,
                 upload_dir=tmp_path / "uploads", **{"run_worker": False, **settings})
    engine = engine_for(s.database_url)
    with TestClient(create_app(s)) as client:
        yield {"client": client, "engine": engine, "settings": s, "media": media}


def calibration(env: dict[str, Any]) -> dict[str, Any]:
    """Verdicts from the real reference judge (one of them given a model judge's frames), and
    labels by three annotators: one unit where the judge and the majority disagree, one where the
    annotators split, the rest in agreement."""
    client, engine = env["client"], env["engine"]
    owner = create_key(engine, ["calibrate", "review", "grade"], "lead")
    second = create_key(engine, ["review"], "second")
    grader = create_key(engine, ["grade"], "grader")
    auth = {"Authorization": f"Bearer {owner}"}
    records = []
    for item in ITEMS:
        got = client.post("/v1/grade", json={"item": item}, headers=auth)
        assert got.status_code == 200, got.text
        records += got.json()["records"]
    params = SamplerParams(n=4)
    seen = sample_frames(env["media"] / "c.mp4", params, cache=None).timestamps
    for r in records:  # as a judge that looks at frames records them
        if r["item_id"] == "disputed":
            r["provenance"]["sampler"] = params.model_dump(mode="json")
            r["provenance"]["frame_timestamps"] = seen
            r["swap"] = {"consistent": False, "swapped": {k: r[k] for k in ("response_a", "response_b", "preference", "deciding_criterion")},
                         "resolution": "the orders disagreed; the stricter grade stands"}
    judged = {(r["item_id"], r["turn"]): r for r in records}
    labels = []
    for (item_id, turn), r in judged.items():
        ja, jb = r["response_a"]["category"], r["response_b"]["category"]
        for name in ("h1", "h2", "h3"):
            a = ja
            if item_id == "disputed":
                a = OTHER[ja]  # all three disagree with the judge
            elif item_id == "split":
                a = {"h1": ja, "h2": OTHER[ja], "h3": "Irrelevant" if ja != "Irrelevant" else "Missing"}[name]
            labels.append({"item_id": item_id, "turn": turn, "annotator": name, "category_a": a, "category_b": jb})
    body = {"labels": labels, "verdicts": records, "items": ITEMS, "replicates": 50,
            "reviewers": [second.split("_")[1]]}
    got = client.post("/v1/calibrate", json=body, headers=auth)
    assert got.status_code == 200, got.text
    return {"id": got.json()["id"], "owner": owner, "second": second, "grader": grader, "records": records,
            "labels": labels, "judged": judged, "seen": seen}


def sign_in(client: TestClient, key: str) -> Any:
    page = client.get("/review/sign-in")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
    return client.post("/review/sign-in", data={"api_key": key, "csrf": token, "next": "/review"}, follow_redirects=False)


def csrf_of(page_text: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page_text).group(1)


def current_queue(client: TestClient, run_id: str, **params: str) -> Any:
    """The queue page once its figures count every decision (they refresh in the background)."""
    for _ in range(1200):
        page = client.get(f"/review/{run_id}", params=params)
        assert page.status_code == 200, page.text
        if 'id="figures-stale"' not in page.text and 'id="figures-pending"' not in page.text:
            return page
        time.sleep(0.05)
    raise AssertionError("the queue's figures were never refreshed")


def version_in(page_text: str) -> str:
    """The unit version a unit page's form carries (what the reviewer was shown)."""
    return re.search(r'name="version" value="([^"]+)"', page_text).group(1)


def unit_version(client: TestClient, run_id: str, key: str, item: str, turn: int = 0) -> str:
    """The unit's version as GET .../unit gives it to an API client."""
    got = client.get(f"/v1/calibrate/{run_id}/unit", params={"item": item, "turn": turn},
                     headers={"Authorization": f"Bearer {key}"})
    assert got.status_code == 200, got.text
    return got.json()["version"]


def decide(client: TestClient, run_id: str, item: str, turn: int = 0, **form: str) -> Any:
    """A decision made as the page makes it: the unit opened, then its form posted with what it carries."""
    page = client.get(f"/review/{run_id}/unit", params={"item": item, "turn": turn})
    assert page.status_code == 200, page.text
    return client.post(f"/review/{run_id}/decide", data={"csrf": csrf_of(page.text), "item": item, "turn": str(turn),
                                                         "version": version_in(page.text), **form},
                       follow_redirects=False)


@pytest.fixture()
def env(tmp_path):
    with review_app(tmp_path) as e:
        e.update(calibration(e))
        yield e


def test_a_key_lists_its_own_calibrations(env):
    client, engine = env["client"], env["engine"]
    listed = client.get("/v1/calibrate", headers={"Authorization": f"Bearer {env['owner']}"})
    assert listed.status_code == 200, listed.text
    [mine] = listed.json()["calibrations"]
    assert mine["id"] == env["id"] and mine["reviewers"] == [env["second"].split("_")[1]]
    other = create_key(engine, ["calibrate"])
    assert client.get("/v1/calibrate", headers={"Authorization": f"Bearer {other}"}).json()["calibrations"] == []
    assert client.get("/v1/calibrate", headers={"Authorization": f"Bearer {env['second']}"}).status_code == 403


def test_a_grade_key_cannot_review(env):
    client = env["client"]
    refused = sign_in(client, env["grader"])
    assert refused.status_code == 403 and "lacks the &#39;review&#39; scope" in refused.text
    assert "framejudge_review" not in refused.cookies
    api = client.post(f"/v1/calibrate/{env['id']}/decisions", headers={"Authorization": f"Bearer {env['grader']}"},
                      json={"item_id": "disputed", "action": "adopt_judge", "unit_version": "any"})
    assert api.status_code == 403 and "review" in api.json()["detail"]
    assert client.get("/review", follow_redirects=False).status_code == 303  # no session: to sign in


def test_session_cookie_is_http_only_and_same_site(env):
    signed = sign_in(env["client"], env["owner"])
    assert signed.status_code == 303 and signed.headers["location"] == "/review"
    cookie = next(v for k, v in signed.headers.multi_items() if k == "set-cookie" and v.startswith("framejudge_review="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/review" in cookie
    index = env["client"].get("/review")
    assert index.status_code == 200 and env["id"] in index.text
    assert "default-src 'self'" in index.headers["content-security-policy"]


def test_forms_without_the_csrf_token_are_refused(env):
    client = env["client"]
    # signing in itself needs the form's own token
    assert client.post("/review/sign-in", data={"api_key": env["owner"]}, follow_redirects=False).status_code == 403
    sign_in(client, env["owner"])
    for data in ({}, {"csrf": "forged"}):
        refused = client.post(f"/review/{env['id']}/decide", data={"item": "disputed", "turn": "0",
                                                                   "action": "adopt_judge", **data})
        assert refused.status_code == 403 and "security token" in refused.text
    assert client.get(f"/v1/calibrate/{env['id']}/decisions", headers={"Authorization": f"Bearer {env['owner']}"}).json() == []
    assert decide(client, env["id"], "disputed", action="adopt_judge").status_code == 303


def test_an_expired_session_is_sent_to_sign_in(env):
    client = env["client"]
    sign_in(client, env["owner"])
    assert client.get(f"/review/{env['id']}").status_code == 200
    with Session(env["engine"]) as s, s.begin():
        s.execute(update(SessionRow).values(expires_at=datetime.now(timezone.utc) - timedelta(seconds=1)))
    gone = client.get(f"/review/{env['id']}?state=to_review", follow_redirects=False)
    assert gone.status_code == 303
    assert gone.headers["location"].startswith("/review/sign-in?next=%2Freview%2F") and "expired=1" in gone.headers["location"]
    page = client.get(gone.headers["location"])
    assert "expired" in page.text and 'name="api_key"' in page.text
    posted = client.post(f"/review/{env['id']}/decide", data={"csrf": "x"}, follow_redirects=False)
    assert posted.status_code == 303 and "sign-in" in posted.headers["location"]


def test_the_queue_puts_disagreements_first_and_filters(env):
    client = env["client"]
    sign_in(client, env["owner"])
    page = current_queue(client, env["id"])
    order = re.findall(r'unit\?item=([a-z]+)&amp;turn=(\d)', page.text.split('id="units"')[1])
    assert order[0] == ("disputed", "0") and order[1] == ("split", "0")
    assert set(order) == {("disputed", "0"), ("split", "0"), ("agreed", "0"), ("talk", "0"), ("talk", "1")}
    assert "<strong>5</strong> units" in page.text and 'id="figures"' in page.text
    multi = client.get(f"/review/{env['id']}", params={"slice": "task_type:multi_turn"})
    assert re.findall(r'unit\?item=([a-z]+)', multi.text.split('id="units"')[1]) == ["talk", "talk"]
    food = client.get(f"/review/{env['id']}", params={"field": "category_a"})
    assert re.findall(r'unit\?item=([a-z]+)', food.text.split('id="units"')[1]) == ["disputed", "split"]
    bad = client.get(f"/review/{env['id']}", params={"state": "finished"})
    assert bad.status_code == 422 and "state" in bad.text and bad.headers["content-type"].startswith("text/html")


def test_a_unit_shows_what_the_judge_saw_and_every_label(env):
    client = env["client"]
    sign_in(client, env["owner"])
    page = client.get(f"/review/{env['id']}/unit", params={"item": "disputed"}).text
    times = [float(t) for t in re.findall(r'data-time="([0-9.]+)"', page)]
    assert times == pytest.approx(env["seen"], abs=1e-3) and len(times) == 4
    assert page.count('src="data:image/jpeg;base64,') == 4
    assert 'id="frames-note"' not in page  # the frames are the judge's own
    assert "What number is shown?" in page and "It shows 7." in page and "It shows 3." in page
    assert "The two orders disagreed" in page and "the stricter grade stands" in page
    for name in ("h1", "h2", "h3"):
        assert f"<th>{name}</th>" in page
    assert 'tr class="dispute" data-field="category_a"' in page
    later = client.get(f"/review/{env['id']}/unit", params={"item": "talk", "turn": 1}).text
    assert "The conversation so far" in later and "What is on screen?" in later and "asked at 1.50 s" in later
    window = [float(t) for t in re.findall(r'data-time="([0-9.]+)"', later)]
    assert window and max(window) <= 1.5  # the window ends when the question was asked
    assert "saw no frames" in later  # the reference judge reads text only: said so


def test_decisions_are_kept_with_the_labels_they_replaced_across_a_restart(tmp_path):
    with review_app(tmp_path) as env:
        made = calibration(env)
        client = env["client"]
        sign_in(client, made["owner"])
        done = decide(client, made["id"], "disputed", action="adopt_judge", cause="humans_wrong", note="the 3 is clear",
                      flag_rubric="on")
        assert done.status_code == 303 and "item=split" in done.headers["location"]  # next to review
        hand = decide(client, made["id"], "split", action="manual", category_a="Irrelevant", category_b="Successful",
                      cause="guideline_ambiguous")
        assert hand.status_code == 303
        adopted = decide(client, made["id"], "agreed", action="adopt_annotator:h2")
        assert adopted.status_code == 303
        unknown = decide(client, made["id"], "agreed", action="adopt_annotator:h9")
        assert unknown.status_code == 422 and "no annotator &#39;h9&#39;" in unknown.text
        empty = decide(client, made["id"], "agreed", action="manual")
        assert empty.status_code == 422 and "no label set" in empty.text
    with review_app(tmp_path) as env:  # a new server on the same database
        got = env["client"].get(f"/v1/calibrate/{made['id']}/decisions",
                                headers={"Authorization": f"Bearer {made['owner']}"}).json()
    assert [d["action"] for d in got] == ["adopt_judge", "manual", "adopt_annotator"]
    first = got[0]
    judge_a = made["judged"][("disputed", 0)]["response_a"]["category"]
    assert first["labels"]["category_a"] == judge_a and first["replaced"]["category_a"] == OTHER[judge_a]
    assert first["reviewer"] == made["owner"].split("_")[1] and first["cause"] == "humans_wrong"
    assert first["note"] == "the 3 is clear" and first["flag_rubric"] is True and first["decided_at"]
    assert got[1]["labels"]["category_a"] == "Irrelevant" and got[2]["source"] == "h2"


def test_two_reviewers_on_one_unit_keep_both_decisions_and_show_a_conflict(env):
    first, second = env["client"], TestClient(env["client"].app)
    sign_in(first, env["owner"])
    sign_in(second, env["second"])
    assert decide(first, env["id"], "split", action="manual", category_a="Successful").status_code == 303
    assert decide(second, env["id"], "split", action="manual", category_a="Irrelevant").status_code == 303
    page = first.get(f"/review/{env['id']}/unit", params={"item": "split"}).text
    assert 'id="conflict"' in page and page.count("<li>key <code>") == 2
    queue = first.get(f"/review/{env['id']}", params={"state": "conflicting"}).text
    assert re.findall(r'unit\?item=([a-z]+)', queue.split('id="units"')[1]) == ["split"]
    rows = load_rows(first.get(f"/v1/calibrate/{env['id']}/labels", headers={"Authorization": f"Bearer {env['owner']}"}),
                     env["engine"], "jsonl")
    split = next(r for r in rows if r.item_id == "split")
    assert split.metadata["standing"] == "unresolved" and split.metadata.get("conflict") is True


def test_blind_mode_hides_the_judge_and_annotators_until_the_reviewer_decides(env):
    client = env["client"]
    sign_in(client, env["owner"])
    blind = client.get(f"/review/{env['id']}/unit", params={"item": "disputed", "blind": "1"}).text
    assert 'id="judge"' not in blind and 'id="labels"' not in blind and 'id="adopt-judge"' not in blind
    assert "<th>h1</th>" not in blind and 'id="hidden-note"' in blind
    assert 'selected' not in blind.split('id="manual"')[1].split("</fieldset>")[0]  # nothing prefilled
    done = decide(client, env["id"], "disputed", action="manual", category_a="Successful", blind="1")
    assert done.status_code == 303 and "item=disputed" in done.headers["location"]  # revealed, then on
    revealed = client.get(done.headers["location"]).text
    assert 'id="judge"' in revealed and "<th>h1</th>" in revealed


def load_rows(response: Any, _engine: Any, form: str, tmp: Path | None = None) -> list[Any]:
    assert response.status_code == 200, response.text
    path = Path(tmp or "/tmp") / f"gold-{id(response)}.{form}"
    path.write_text(response.text, encoding="utf-8")
    try:
        return load_human_labels(path)
    finally:
        path.unlink()


def test_export_marks_each_unit_and_loads_as_labels(env, tmp_path):
    client = env["client"]
    sign_in(client, env["owner"])
    decide(client, env["id"], "disputed", action="adopt_judge", cause="humans_wrong")
    for form in ("jsonl", "csv"):
        page_export = client.get(f"/review/{env['id']}/labels", params={"format": form})
        api_export = client.get(f"/v1/calibrate/{env['id']}/labels", params={"format": form},
                                headers={"Authorization": f"Bearer {env['owner']}"})
        assert page_export.text == api_export.text
        rows = {(r.item_id, r.turn): r for r in load_rows(api_export, env["engine"], form, tmp_path)}
        assert len(rows) == 5
        assert rows[("disputed", 0)].metadata["standing"] == "adjudicated"
        assert rows[("disputed", 0)].metadata["reviewer"] == env["owner"].split("_")[1]
        assert rows[("split", 0)].metadata["standing"] == "unresolved"
        assert rows[("agreed", 0)].metadata["standing"] == "unanimous"


def test_a_decision_that_the_humans_were_wrong_moves_the_judges_figure(env):
    client = env["client"]
    sign_in(client, env["owner"])

    def after(field: str) -> str:
        page = current_queue(client, env["id"]).text
        row = page.split(f'<tr data-field="{field}">')[1].split("</tr>")[0]
        return re.search(r'class="after-percent">([^<]+)<', row).group(1)

    start = after("category_a")
    decide(client, env["id"], "disputed", action="manual", category_a=OTHER[env["judged"][("disputed", 0)]["response_a"]["category"]],
           cause="judge_wrong")  # the humans were right: the judge's figure stays
    assert after("category_a") == start
    decide(client, env["id"], "disputed", action="adopt_judge", cause="humans_wrong")  # now the judge was right
    assert float(after("category_a")) > float(start)


def test_other_keys_cannot_see_a_calibration_they_were_not_given(env):
    client = env["client"]
    stranger = create_key(env["engine"], ["review"], "stranger")
    sign_in(client, stranger)
    assert env["id"] not in client.get("/review").text
    assert client.get(f"/review/{env['id']}").status_code == 404
    assert client.get(f"/v1/calibrate/{env['id']}/labels", headers={"Authorization": f"Bearer {stranger}"}).status_code == 404
    # the owner may name the stranger as a reviewer afterwards; an unknown id is refused
    owner = {"Authorization": f"Bearer {env['owner']}"}
    assert client.put(f"/v1/calibrate/{env['id']}/reviewers", json={"reviewers": ["abcdef123456"]},
                      headers=owner).status_code == 422
    assert client.put(f"/v1/calibrate/{env['id']}/reviewers", json={"reviewers": [stranger.split("_")[1]]},
                      headers=owner).status_code == 200
    assert client.get(f"/review/{env['id']}").status_code == 200


def test_bad_page_parameters_get_a_page_that_says_why(env):
    client = env["client"]
    sign_in(client, env["owner"])
    bad = client.get(f"/review/{env['id']}/unit", params={"item": "disputed", "turn": "first"})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("text/html") and "turn" in bad.text
    missing = client.get(f"/review/{env['id']}/unit", params={"item": "nobody"})
    assert missing.status_code == 404 and "no labelled turn 0 of item &#39;nobody&#39;" in missing.text


def wait_job(client: TestClient, auth: dict[str, str], job_id: str, timeout: float = 120) -> dict[str, Any]:
    import time

    deadline = time.time() + timeout
    while (status := client.get(f"/v1/jobs/{job_id}", headers=auth).json())["state"] not in ("done", "cancelled"):
        assert time.time() < deadline, f"job {job_id} did not finish: {status}"
        time.sleep(0.05)
    return status


def test_aligning_from_the_queue_measures_on_items_held_apart(tmp_path):
    import yaml

    from framejudge.rubrics.model import Rubric

    with review_app(tmp_path, run_worker=True) as env:
        env.update(calibration(env))
        client = env["client"]
        auth = {"Authorization": f"Bearer {env['owner']}"}
        made = []
        for seed in range(12):  # seeds whose example half holds one of the judge's mistakes can align
            got = client.post(f"/v1/calibrate/{env['id']}/alignments", json={"seed": seed, "replicates": 50},
                              headers=auth)
            assert got.status_code == 202 and got.json()["kind"] == "align", got.text
            status = wait_job(client, auth, got.json()["id"])
            assert status["state"] == "done" and status["items"] == 1, status
            if status["judge_errors"]:
                [error] = client.get(f"/v1/jobs/{status['id']}/verdicts", headers=auth).json()["records"]
                assert "no mistake to correct" in error["message"] and error["message"].startswith("not aligned: ")
                assert tempfile.gettempdir() not in error["message"]
            else:
                made.append(status["id"])
        assert made, "no seed put a mistake among the examples"
        listed = client.get(f"/v1/calibrate/{env['id']}/alignments", headers=auth).json()
        assert [a["id"] for a in listed] == list(reversed(made))  # the alignment is its job's id
        # no server path in what a client reads: the labels as the calibration's, not the file they were written to
        shown = json.dumps(listed) + json.dumps(client.get(f"/v1/jobs/{made[-1]}", headers=auth).json())
        assert tempfile.gettempdir() not in shown and str(tmp_path) not in shown
        assert {a["result"]["labels"] for a in listed} == {f"the labels of calibration {env['id']} (as reviewed)"}
        for a in listed:
            r = a["result"]
            corrected = {u["item_id"] for u in r["corrections"]}
            assert corrected and corrected.isdisjoint(r["held_apart_items"])  # never measured on its own examples
            assert {u["item_id"] for u in r["held_apart_units"]} <= set(r["held_apart_items"])
            assert r["judge"] == "reference" and r["rubric_version"] == "1.2.0"
            assert "split" not in {u["item_id"] for u in r["example_units"] + r["held_apart_units"]}  # no gold
        text = client.get(f"/v1/calibrate/{env['id']}/alignments/{made[-1]}/rubric", headers=auth).text
        rubric = Rubric.model_validate(yaml.safe_load(text))
        assert rubric.content_hash == listed[0]["result"]["rubric_hash"] and rubric.corrections
        sign_in(client, env["owner"])
        page = client.get(f"/review/{env['id']}").text
        assert 'id="alignment"' in page and f'/alignments/{made[-1]}/rubric.yaml' in page
        assert f'<span id="held-apart">{len(listed[0]["result"]["held_apart_units"])}</span>' in page
        refused = client.post(f"/v1/calibrate/{env['id']}/alignments", json={"judge": "litellm:gpt-x"}, headers=auth)
        assert refused.status_code == 400 and "allows: reference" in refused.json()["detail"]
        for body in ({"seed": "4"}, {"holdout": "0.5"}, {"replicates": True}):  # numbers are JSON numbers
            refused = client.post(f"/v1/calibrate/{env['id']}/alignments", json=body, headers=auth)
            assert refused.status_code == 422 and next(iter(body)) in refused.json()["detail"], (body, refused.text)
        # an alignment job is no grading job: what reads a job's verdicts and items refuses it
        for path, body in (("/v1/reviews", {"job_id": made[-1]}), ("/v1/calibrate", {"job_id": made[-1], "labels": env["labels"]}),
                           ("/v1/leaderboards", {"job_id": made[-1]})):
            r = client.post(path, json=body, headers=auth)
            assert r.status_code == 422 and r.json()["title"] == "Not a grading job", (path, r.text)


def test_a_jobs_calibration_is_reviewed_with_the_jobs_items_and_kept_across_a_restart(tmp_path, database_url):
    with review_app(tmp_path, database_url, run_worker=True) as env:
        client = env["client"]
        owner = create_key(env["engine"], ["calibrate", "review", "grade"], "lead")
        auth = {"Authorization": f"Bearer {owner}"}
        job = client.post("/v1/jobs", json=ITEMS, headers=auth)
        assert job.status_code == 202, job.text
        job_id = job.json()["id"]
        deadline = time.time() + 60
        while client.get(f"/v1/jobs/{job_id}", headers=auth).json()["state"] != "done":
            assert time.time() < deadline, "the job did not finish"
            time.sleep(0.05)
        records = client.get(f"/v1/jobs/{job_id}/verdicts", headers=auth).json()["records"]
        labels = [{"item_id": r["item_id"], "turn": r["turn"], "annotator": a,
                   "category_a": OTHER[r["response_a"]["category"]] if r["item_id"] == "disputed" else
                   r["response_a"]["category"]} for r in records for a in ("h1", "h2")]
        made = client.post("/v1/calibrate", json={"job_id": job_id, "labels": labels, "replicates": 20}, headers=auth)
        assert made.status_code == 200, made.text
        run_id = made.json()["id"]
        sign_in(client, owner)
        page = client.get(f"/review/{run_id}/unit", params={"item": "talk", "turn": 1}).text
        assert "And now?" in page and page.count('src="data:image/jpeg;base64,') > 0  # the job's resolved video
        assert decide(client, run_id, "disputed", action="adopt_judge", cause="humans_wrong").status_code == 303
        client.delete(f"/v1/jobs/{job_id}", headers=auth)  # the job goes; the review keeps its inputs
    with review_app(tmp_path, database_url) as env:
        client = env["client"]
        sign_in(client, owner)
        assert "What number is shown?" in client.get(f"/review/{run_id}/unit", params={"item": "disputed"}).text
        rows = load_rows(client.get(f"/review/{run_id}/labels"), env["engine"], "jsonl", tmp_path)
        assert next(r for r in rows if r.item_id == "disputed").metadata["standing"] == "adjudicated"


def test_the_turns_a_triage_sent_to_review_become_a_queue(tmp_path):
    from tests.test_cli_triage import reference_thresholds

    with review_app(tmp_path, run_worker=True) as env:
        client = env["client"]
        owner = create_key(env["engine"], ["calibrate", "review", "grade"], "lead")
        auth = {"Authorization": f"Bearer {owner}"}
        plain = client.post("/v1/jobs", json=ITEMS, headers=auth).json()["id"]
        options = {"triage": reference_thresholds(tmp_path / "t.json").model_dump(mode="json")}
        job = client.post("/v1/jobs", json={"items": ITEMS, "options": options}, headers=auth).json()["id"]
        for j in (plain, job):
            deadline = time.time() + 60
            while client.get(f"/v1/jobs/{j}", headers=auth).json()["state"] != "done":
                assert time.time() < deadline, "the job did not finish"
                time.sleep(0.05)
        unmarked = client.post("/v1/reviews", json={"job_id": plain}, headers=auth)
        assert unmarked.status_code == 422 and "none carries a triage mark" in unmarked.json()["detail"]
        made = client.post("/v1/reviews", json={"job_id": job}, headers=auth)
        assert made.status_code == 201, made.text
        queue = made.json()
        assert queue["units"] == 5  # the reference judge's confidence says nothing: every turn to review
        sign_in(client, owner)
        page = client.get(f"/review/{queue['id']}").text
        assert 'id="no-figures"' in page and "<strong>5</strong> units" in page
        assert "below the triage threshold" in page
        unit = client.get(f"/review/{queue['id']}/unit", params={"item": "talk", "turn": 1}).text
        assert "And now?" in unit and 'id="judge"' in unit and "<th>majority</th>" in unit
        assert decide(client, queue["id"], "disputed", action="manual", category_a="Successful",
                      category_b="Not Successful").status_code == 303
        assert decide(client, queue["id"], "agreed", action="adopt_judge").status_code == 303
        rows = load_rows(client.get(f"/v1/calibrate/{queue['id']}/labels", headers=auth), env["engine"], "jsonl",
                         tmp_path)
        by = {(r.item_id, r.turn): r for r in rows}
        assert len(by) == 5 and by[("disputed", 0)].metadata["standing"] == "adjudicated"
        assert by[("disputed", 0)].category_a.value == "Successful" and by[("agreed", 0)].metadata["standing"] == "adjudicated"
        assert by[("talk", 1)].metadata["standing"] == "unresolved" and by[("talk", 1)].category_a is None


def test_aligning_needs_the_grade_scope_and_runs_as_a_cancellable_job(tmp_path, database_url):
    """A review-only key named as a calibration's reviewer cannot align (the API and the page's
    form alike): aligning grades items with the judge, 80 paid calls on a large queue. A grade key's
    alignment is a job of its own: queued, listed, visible in job status and cancellable (then it
    makes no more model calls), graded by a worker; the model server on loopback counts the calls."""
    import time

    from bench.model_server import ModelServer
    from framejudge.runner.decode import SharedDecodes
    from framejudge.runner.graders import GraderCache
    from framejudge.runner.judges import Judges, load_judges_file
    from framejudge.runner.worker import QueueWorker
    from tests.runner.test_worker import running, wait_until

    pytest.importorskip("litellm")
    judge = "litellm:openai/bench"
    with ModelServer(latency=0.3) as model:
        judges_file = tmp_path / "judges.yaml"
        judges_file.write_text(f"judges:\n  - spec: {judge}\n    api_base: {model.base_url}\n    price: {{}}\n")
        with review_app(tmp_path, database_url, judges_file=judges_file, requests_per_minute=10_000) as env:
            env.update(calibration(env))
            client, run = env["client"], env["id"]
            owner, reviewer = ({"Authorization": f"Bearer {env[k]}"} for k in ("owner", "second"))
            r = client.post(f"/v1/calibrate/{run}/alignments", json={"judge": judge}, headers=reviewer)
            assert r.status_code == 403 and "lacks the 'grade' scope" in r.json()["detail"], r.text
            sign_in(client, env["second"])
            page = client.get(f"/review/{run}")
            assert 'id="align-needs-grade"' in page.text and 'action="/review/' + run + '/align"' not in page.text
            r = client.post(f"/review/{run}/align", data={"csrf": csrf_of(page.text), "judge": judge})
            assert r.status_code == 403 and "grade" in r.text
            assert client.get("/v1/jobs", headers=reviewer).status_code == 403
            assert model.stats()["requests"] == 0  # nothing was spent

            def align(seed: int) -> dict[str, Any]:
                got = client.post(f"/v1/calibrate/{run}/alignments", json={"judge": judge, "seed": seed,
                                                                            "replicates": 20}, headers=owner)
                assert got.status_code == 202, got.text
                return got.json()

            first = align(0)
            assert first["kind"] == "align" and first["state"] == "queued" and first["judge"] == judge
            assert first["waiting"].startswith("no worker is running")
            assert [j["id"] for j in client.get("/v1/jobs", headers=owner).json()["jobs"]] == [first["id"]]
            assert client.delete(f"/v1/jobs/{first['id']}", headers=owner).json()["state"] == "cancelled"
            graders = GraderCache(SharedDecodes(sample_frames), Judges(load_judges_file(judges_file)))
            worker = QueueWorker(env["engine"], graders, lease_s=3.0, poll_s=0.05, max_in_flight=1)
            made, stopped = [], None
            with running(worker):
                for seed in range(1, 12):  # one at a time: the first that calls the model is cancelled as it runs
                    job = align(seed)["id"]
                    wait_until(lambda job=job: model.stats()["in_flight"] > 0 or
                               client.get(f"/v1/jobs/{job}", headers=owner).json()["state"] == "done")
                    if stopped is None and model.stats()["in_flight"] > 0:
                        client.delete(f"/v1/jobs/{job}", headers=owner)
                        wait_until(lambda job=job: client.get(f"/v1/jobs/{job}", headers=owner).json()["running"] == 0)
                        calls, stopped = model.stats()["requests"], job
                        time.sleep(1.5)
                        assert model.stats()["requests"] == calls  # its calls stopped
                        [error] = client.get(f"/v1/jobs/{job}/verdicts", headers=owner).json()["records"]
                        assert "cancelled before it finished" in error["message"], error
                        continue
                    status = wait_job(client, owner, job)
                    assert status["state"] == "done", status
                    if not status["judge_errors"]:
                        made.append(job)
                # the jobs after the cancelled one ran to the end (each waited for above); whether they called the
                # model again depends on which of their items the cancelled job's calls had put in the verdict cache
                assert stopped is not None and made
                listed = {a["id"] for a in client.get(f"/v1/calibrate/{run}/alignments", headers=owner).json()}
                assert listed == set(made)  # neither cancelled one aligned anything
                sign_in(client, env["owner"])  # the page's form queues a job too, and the page says where it is
                page = client.get(f"/review/{run}")
                posted = client.post(f"/review/{run}/align", data={"csrf": csrf_of(page.text), "judge": judge, "seed": "3",
                                                                   "replicates": "50", "holdout": "0.5"},
                                     follow_redirects=False)  # a form's fields are text, read as numbers
                assert posted.status_code == 303 and "aligning=" in posted.headers["location"], posted.text
                assert 'id="aligning"' in client.get(posted.headers["location"]).text
                by_form = posted.headers["location"].split("aligning=")[1].split("#")[0]
                assert wait_job(client, owner, by_form)["kind"] == "align"


def test_what_an_alignment_says_names_videos_and_labels_as_clients_do():
    from framejudge.service.review.alignments import unpathed

    folder = "/tmp/framejudge-align-x1"
    names = {"/srv/uploads/abc.video": "upload:abc", "/srv/media/clips/a.mp4": "clips/a.mp4"}
    said = unpathed(f"{folder}/calibration-c1-gold.jsonl: item 3 (/srv/uploads/abc.video) and "
                    "/srv/media/clips/a.mp4 were not read", names, folder)
    assert said == "calibration-c1-gold.jsonl: item 3 (upload:abc) and clips/a.mp4 were not read"
