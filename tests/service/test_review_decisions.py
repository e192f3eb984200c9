"""A decision is made on what its reviewer saw, and stands only while its reviewer may review: the
real app on a SQLite file. A decision without the unit's version, or on a version the unit no
longer has (another decision since, a replay, a reviewer removed), is refused and saves nothing;
the version is stored and exported. A reviewer removed from a queue keeps their decisions on
record, but they decide no gold, state or figure until they are named again; the export says so.
The unit page's key legend lists exactly the keys that work on it, blind or not."""

from __future__ import annotations

import html
import re

import pytest
from fastapi.testclient import TestClient

from framejudge.service.store import create_key
from tests.service.test_review import (csrf_of, current_queue, decide, load_rows, sign_in,
                                       unit_version, version_in)
from tests.service.test_review_integrity import bearer, env  # noqa: F401 - env is the fixture


def listed(env) -> list[dict]:
    got = env["client"].get(f"/v1/calibrate/{env['id']}/decisions", headers=bearer(env["owner"]))
    assert got.status_code == 200, got.text
    return got.json()


def gold(env, tmp_path, form: str = "jsonl") -> dict:
    rows = load_rows(env["client"].get(f"/v1/calibrate/{env['id']}/labels", params={"format": form},
                                       headers=bearer(env["owner"])), env["engine"], form, tmp_path)
    return {(r.item_id, r.turn): r for r in rows}


# ------------------------------------------------------------------------ what the reviewer saw

def test_an_api_decision_without_the_units_version_is_refused(env):
    got = env["client"].post(f"/v1/calibrate/{env['id']}/decisions", headers=bearer(env["owner"]),
                             json={"item_id": "disputed", "action": "adopt_judge"})
    assert got.status_code == 422 and "unit_version" in got.json()["detail"], got.text
    assert listed(env) == []


def test_a_stale_or_replayed_api_decision_is_refused_and_saves_nothing(env, tmp_path):
    client, run = env["client"], env["id"]
    seen = unit_version(client, run, env["owner"], "split")
    body = {"item_id": "split", "action": "adopt_annotator", "source": "h2", "unit_version": seen}
    first = client.post(f"/v1/calibrate/{run}/decisions", headers=bearer(env["owner"]), json=body)
    assert first.status_code == 201 and first.json()["unit_version"] == seen, first.text
    replayed = client.post(f"/v1/calibrate/{run}/decisions", headers=bearer(env["owner"]), json=body)
    assert replayed.status_code == 409 and replayed.json()["code"] == "stale_decision", replayed.text
    assert "has changed since it was shown" in replayed.json()["detail"] and "nothing was saved" in replayed.json()["detail"]
    other = client.post(f"/v1/calibrate/{run}/decisions", headers=bearer(env["second"]),  # saw it before the first
                        json={**body, "source": "h3"})
    assert other.status_code == 409 and f"key {env['owner'].split('_')[1]}'s" in other.json()["detail"]
    forged = client.post(f"/v1/calibrate/{run}/decisions", headers=bearer(env["owner"]),
                         json={**body, "unit_version": "0" * 20})
    assert forged.status_code == 409
    assert [(d["item_id"], d["source"]) for d in listed(env)] == [("split", "h2")]
    now = unit_version(client, run, env["owner"], "split")
    assert now != seen
    again = client.post(f"/v1/calibrate/{run}/decisions", headers=bearer(env["second"]),
                        json={**body, "source": "h3", "unit_version": now})  # on what stands now: taken
    assert again.status_code == 201, again.text
    rows = gold(env, tmp_path)
    assert rows[("split", 0)].metadata["standing"] == "unresolved"  # two reviewers, two answers
    assert unit_version(client, run, env["owner"], "disputed") == unit_version(client, run, env["second"], "disputed")


def test_the_unit_api_shows_what_the_page_shows(env):
    client, run = env["client"], env["id"]
    got = client.get(f"/v1/calibrate/{run}/unit", params={"item": "disputed"}, headers=bearer(env["second"]))
    assert got.status_code == 200, got.text
    unit = got.json()
    assert set(unit["annotators"]) == {"h1", "h2", "h3"} and unit["reasons"][0] == "judge_vs_majority"
    assert unit["standing"] == unit["majority"] and unit["decisions"] == []
    sign_in(client, env["owner"])
    page = client.get(f"/review/{run}/unit", params={"item": "disputed"}).text
    assert version_in(page) == unit["version"]
    missing = client.get(f"/v1/calibrate/{run}/unit", params={"item": "nope"}, headers=bearer(env["owner"]))
    assert missing.status_code == 404 and "no labelled turn 0 of item 'nope'" in missing.json()["detail"]


def test_a_form_without_a_chosen_decision_or_the_units_version_saves_nothing(env):
    client, run = env["client"], env["id"]
    sign_in(client, env["owner"])
    page = client.get(f"/review/{run}/unit", params={"item": "disputed"}).text
    form = {"csrf": csrf_of(page), "item": "disputed", "turn": "0", "version": version_in(page)}
    # what the untouched page sends when submitted: its prefilled fields, a cause, and no decision chosen
    untouched = client.post(f"/review/{run}/decide", data={**form, "category_a": "Successful", "cause": "judge_wrong"},
                            follow_redirects=False)
    assert untouched.status_code == 422 and "no decision chosen" in untouched.text
    assert "nothing was saved" in untouched.text and 'id="decision"' in untouched.text  # the unit again
    unversioned = client.post(f"/review/{run}/decide", data={**form, "version": "", "action": "adopt_judge"},
                              follow_redirects=False)
    assert unversioned.status_code == 422 and "unit_version" in unversioned.text
    assert listed(env) == []


def test_a_stale_or_replayed_form_shows_the_unit_as_it_now_stands(env, tmp_path):
    client, run = env["client"], env["id"]
    other = TestClient(client.app)
    sign_in(client, env["owner"])
    sign_in(other, env["second"])
    page = client.get(f"/review/{run}/unit", params={"item": "disputed"}).text
    form = {"csrf": csrf_of(page), "item": "disputed", "turn": "0", "version": version_in(page), "action": "adopt_judge",
            "cause": "humans_wrong"}
    theirs = other.get(f"/review/{run}/unit", params={"item": "disputed"}).text
    assert decide(other, run, "disputed", action="adopt_annotator:h1").status_code == 303  # decided meanwhile
    stale = client.post(f"/review/{run}/decide", data=form, follow_redirects=False)
    assert stale.status_code == 409
    text = html.unescape(stale.text)
    assert "has changed since it was shown" in text and "nothing was saved" in text
    assert version_in(stale.text) != form["version"] and "adopt annotator h1" in text  # the other decision shown
    fresh = client.post(f"/review/{run}/decide", data={**form, "version": version_in(stale.text)},
                        follow_redirects=False)
    assert fresh.status_code == 303
    replayed = other.post(f"/review/{run}/decide", data={"csrf": csrf_of(theirs), "item": "disputed", "turn": "0",
                                                         "version": version_in(theirs), "action": "adopt_annotator:h1"},
                          follow_redirects=False)
    assert replayed.status_code == 409
    made = listed(env)
    assert [(d["reviewer"], d["action"]) for d in made] == [(env["second"].split("_")[1], "adopt_annotator"),
                                                            (env["owner"].split("_")[1], "adopt_judge")]
    assert made[0]["unit_version"] == version_in(theirs) and made[1]["unit_version"] == version_in(stale.text)
    assert made[1]["blind"] is False


def test_the_version_a_decision_was_made_on_is_exported_with_the_gold(env, tmp_path):
    client, run = env["client"], env["id"]
    sign_in(client, env["owner"])
    page = client.get(f"/review/{run}/unit", params={"item": "disputed", "blind": "1"}).text
    assert client.post(f"/review/{run}/decide", data={
        "csrf": csrf_of(page), "item": "disputed", "turn": "0", "version": version_in(page), "blind": "1",
        "action": "manual", "category_a": "Successful"}, follow_redirects=False).status_code == 303
    [made] = listed(env)
    assert made["unit_version"] == version_in(page) and made["blind"] is True
    for form in ("jsonl", "csv"):
        row = gold(env, tmp_path, form)[("disputed", 0)]
        assert row.metadata["standing"] == "adjudicated" and row.metadata["unit_version"] == version_in(page)
        assert row.metadata["blind"] in (True, "true")
        assert "unit_version" not in gold(env, tmp_path, form)[("split", 0)].metadata  # undecided


# ------------------------------------------------------------------------ a reviewer removed

def test_a_removed_reviewers_decisions_stay_on_record_but_decide_no_gold(env, tmp_path):
    client, run = env["client"], env["id"]
    second_id = env["second"].split("_")[1]
    reviewer = TestClient(client.app)
    sign_in(reviewer, env["second"])
    assert decide(reviewer, run, "split", action="adopt_annotator:h2", cause="humans_wrong").status_code == 303
    assert decide(reviewer, run, "agreed", action="adopt_annotator:h1").status_code == 303
    admin = create_key(env["engine"], ["admin"], "admin")  # named nowhere, yet may review: it counts throughout
    assert client.post(f"/v1/calibrate/{run}/decisions", headers=bearer(admin), json={
        "item_id": "disputed", "action": "adopt_judge",
        "unit_version": unit_version(client, run, admin, "disputed")}).status_code == 201
    before = gold(env, tmp_path)
    assert before[("split", 0)].metadata["standing"] == "adjudicated" and before[("split", 0)].metadata["reviewer"] == second_id
    version = unit_version(client, run, env["owner"], "talk")
    owner_saw = unit_version(client, run, env["owner"], "split")

    removed = client.put(f"/v1/calibrate/{run}/reviewers", json={"reviewers": []}, headers=bearer(env["owner"]))
    assert removed.status_code == 200, removed.text
    after = gold(env, tmp_path)
    for key in (("split", 0), ("agreed", 0)):
        assert after[key].metadata["withdrawn"] == [second_id] and "reviewer" not in after[key].metadata
    assert after[("split", 0)].metadata["standing"] == "unresolved"  # the annotators' majority again, and said why
    assert after[("agreed", 0)].metadata["standing"] == "unanimous"
    csv_row = gold(env, tmp_path, "csv")[("split", 0)]
    assert second_id in csv_row.metadata["withdrawn"]
    made = listed(env)
    assert [d["reviewer_removed"] for d in made] == [True, True, False]  # kept, and marked
    sign_in(client, env["owner"])
    page = client.get(f"/review/{run}/unit", params={"item": "split"}).text
    assert 'class="withdrawn"' in page and "removed: not counted" in page
    assert re.search(r'id="state">to review<', page)  # to be decided again by someone who may
    queue = current_queue(client, run, state="to_review").text
    assert "unit?item=split" in queue
    assert unit_version(client, run, env["owner"], "talk") == version  # no decision of theirs on it
    assert after[("disputed", 0)].metadata["standing"] == "adjudicated" and "withdrawn" not in after[("disputed", 0)].metadata
    stale = client.post(f"/v1/calibrate/{run}/decisions", headers=bearer(env["owner"]),
                        json={"item_id": "split", "action": "adopt_judge", "unit_version": owner_saw})
    assert stale.status_code == 409  # the unit shows their decision as not counted now: look again

    # the owner re-confirms by naming the reviewer again: their decisions stand as they were
    back = client.put(f"/v1/calibrate/{run}/reviewers", json={"reviewers": [second_id]}, headers=bearer(env["owner"]))
    assert back.status_code == 200
    again = gold(env, tmp_path)
    assert again[("split", 0)].metadata["standing"] == "adjudicated" and "withdrawn" not in again[("split", 0)].metadata
    assert not any(d["reviewer_removed"] for d in listed(env))


def test_a_unit_decided_again_by_a_reviewer_who_may_stands_on_that_decision(env, tmp_path):
    client, run = env["client"], env["id"]
    second_id, owner_id = env["second"].split("_")[1], env["owner"].split("_")[1]
    reviewer = TestClient(client.app)
    sign_in(reviewer, env["second"])
    assert decide(reviewer, run, "split", action="adopt_annotator:h2").status_code == 303
    client.put(f"/v1/calibrate/{run}/reviewers", json={"reviewers": []}, headers=bearer(env["owner"]))
    sign_in(client, env["owner"])
    assert decide(client, run, "split", action="adopt_annotator:h3").status_code == 303
    row = gold(env, tmp_path)[("split", 0)]
    assert row.metadata["standing"] == "adjudicated" and row.metadata["reviewer"] == owner_id
    assert row.metadata["withdrawn"] == [second_id] and row.metadata.get("conflict") is None
    [theirs, mine] = listed(env)
    assert theirs["reviewer_removed"] is True and mine["reviewer_removed"] is False
    assert mine["replaced"] == gold_majority(env)  # it replaced the majority: the withdrawn decision stood for nothing


def gold_majority(env) -> dict:
    got = env["client"].get(f"/v1/calibrate/{env['id']}/unit", params={"item": "split"}, headers=bearer(env["owner"]))
    return got.json()["majority"]


# ------------------------------------------------------------------------ the key legend

def legend_keys(page: str) -> set[str]:
    """The keys the page's legend lists ('1–3' as 1, 2, 3; 'p / n' as p and n)."""
    legend = page.split('id="shortcuts"')[1].split("</aside>")[0]
    keys: set[str] = set()
    for term in re.findall(r"<dt>([^<]+)</dt>", legend):
        for part in html.unescape(term).replace("/", " ").split():
            low, _, high = part.partition("–")
            keys |= {str(n) for n in range(int(low), int(high) + 1)} if high else {part}
    return keys


def page_keys(page: str) -> set[str]:
    """The keys the page's script presses something for (Esc: leave a field, close a frame)."""
    return set(re.findall(r'data-key="?([^" >]+)', page)) | {"Esc"}


@pytest.mark.parametrize(("item", "turn", "blind"), [("disputed", 0, False), ("disputed", 0, True), ("talk", 1, True),
                                                     ("talk", 1, False), ("split", 0, True)])
def test_the_legend_lists_exactly_the_keys_that_work_on_the_page(env, item, turn, blind):
    client = env["client"]
    sign_in(client, env["owner"])
    page = client.get(f"/review/{env['id']}/unit", params={"item": item, "turn": turn, **({"blind": "1"} if blind else {})})
    assert page.status_code == 200
    assert legend_keys(page.text) == page_keys(page.text)
    if blind:  # the adopt choices are hidden, and so are their keys
        assert not {"j", "1", "2", "3"} & legend_keys(page.text)
        assert "j," not in page.text.split('id="shortcuts"')[1] and "1–" not in page.text.split('id="shortcuts"')[1]
    else:
        assert {"j", "1", "2", "3"} <= legend_keys(page.text)
