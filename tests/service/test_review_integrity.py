"""What a review writes as gold and what its pages show: adopting the judge writes gold only for
the fields a person rated (or a triage put in doubt), a decision is held to the rubric's rules
for verdicts, and blind mode hides why a unit is in the queue. The real app on SQLite and on
PostgreSQL."""

from __future__ import annotations

import pytest

from tests.postgres import database_url  # noqa: F401
from tests.service.test_review import ITEMS, _turn, calibration, decide, load_rows, review_app, sign_in, unit_version


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture()
def env(tmp_path):
    with review_app(tmp_path) as e:
        e.update(calibration(e))
        yield e


def gold(env, tmp_path) -> dict:
    rows = load_rows(env["client"].get(f"/v1/calibrate/{env['id']}/labels", headers=bearer(env["owner"])),
                     env["engine"], "jsonl", tmp_path)
    return {(r.item_id, r.turn): r for r in rows}


@pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True)
def test_adopting_the_judge_writes_gold_only_for_the_fields_annotators_rated(tmp_path, database_url):
    with review_app(tmp_path, database_url) as env:
        env.update(calibration(env))  # the annotators rate category_a and category_b only
        client = env["client"]
        sign_in(client, env["owner"])
        assert decide(client, env["id"], "disputed", action="adopt_judge").status_code == 303
        made = client.post(f"/v1/calibrate/{env['id']}/decisions", headers=bearer(env["owner"]),
                           json={"item_id": "agreed", "action": "adopt_judge",
                                 "unit_version": unit_version(client, env["id"], env["owner"], "agreed")})
        assert made.status_code == 201, made.text
        assert set(made.json()["labels"]) >= {"category_a", "category_b"}
        assert {k for k, v in made.json()["labels"].items() if v is not None} == {"category_a", "category_b"}
        rows = gold(env, tmp_path)
        judged = env["judged"][("disputed", 0)]
        row = rows[("disputed", 0)]
        assert row.metadata["standing"] == "adjudicated" and row.category_a.value == judged["response_a"]["category"]
        for unrated in ("integrity_a", "integrity_b", "transcription_error", "multiturn", "preference"):
            assert getattr(row, unrated) is None, unrated  # the judge's own value would score it against itself
        figures = client.get(f"/review/{env['id']}").text.split('id="figures"')[1].split("</table>")[0]
        for unrated in ("integrity_a", "multiturn"):  # no gold after the review either: no figure
            assert figures.split(f'data-field="{unrated}">')[1].split("</tr>")[0].count("<td>0 / 0</td>") == 1
        unit = client.get(f"/review/{env['id']}/unit", params={"item": "split"}).text
        assert "the judge's category_a, category_b; the fields nobody rated stay unrated" in unit


def test_adopting_the_judge_on_a_triage_unit_takes_only_the_fields_in_doubt(tmp_path):
    import time

    from framejudge.service.store import create_key
    from tests.test_cli_triage import reference_thresholds

    with review_app(tmp_path, run_worker=True) as env:
        client = env["client"]
        owner = create_key(env["engine"], ["calibrate", "review", "grade"], "lead")
        options = {"triage": reference_thresholds(tmp_path / "t.json").model_dump(mode="json")}
        job = client.post("/v1/jobs", json={"items": ITEMS[:1], "options": options}, headers=bearer(owner)).json()["id"]
        deadline = time.time() + 60
        while client.get(f"/v1/jobs/{job}", headers=bearer(owner)).json()["state"] != "done":
            assert time.time() < deadline, "the job did not finish"
            time.sleep(0.05)
        queue = client.post("/v1/reviews", json={"job_id": job}, headers=bearer(owner)).json()["id"]
        made = client.post(f"/v1/calibrate/{queue}/decisions", headers=bearer(owner),
                           json={"item_id": "disputed", "action": "adopt_judge",
                                 "unit_version": unit_version(client, queue, owner, "disputed")})
        assert made.status_code == 201, made.text
        assert {k for k, v in made.json()["labels"].items() if v is not None} == {"category_a"}  # the thresholds' field


@pytest.mark.parametrize(("labels", "rule"), [
    ({"category_a": "Error message"}, "response A is not one of the fixed error strings, so it cannot be Error message"),
    ({"category_a": "Successful", "category_b": "Not Successful", "preference": "B"},
     "a Successful response always wins, so the preference must be A"),
    ({"category_a": "Successful", "category_b": "Not Successful", "preference": "Both"},
     "Both is only allowed when the two responses share a category"),
])
def test_a_manual_decision_that_breaks_the_rubrics_rules_is_refused(env, labels, rule):
    client = env["client"]
    version = unit_version(client, env["id"], env["owner"], "disputed")
    got = client.post(f"/v1/calibrate/{env['id']}/decisions", headers=bearer(env["owner"]),
                      json={"item_id": "disputed", "action": "manual", "labels": labels, "unit_version": version})
    assert got.status_code == 422 and rule in got.json()["detail"], got.text
    assert "these labels break the rubric's rules" in got.json()["detail"]
    sign_in(client, env["owner"])
    page = decide(client, env["id"], "disputed", action="manual", **labels)
    assert page.status_code == 422 and rule in page.text.replace("&#39;", "'")
    assert client.get(f"/v1/calibrate/{env['id']}/decisions", headers=bearer(env["owner"])).json() == []
    ok = client.post(f"/v1/calibrate/{env['id']}/decisions", headers=bearer(env["owner"]),
                     json={"item_id": "disputed", "action": "manual", "unit_version": version,
                           "labels": {"category_a": "Successful", "category_b": "Not Successful", "preference": "A"}})
    assert ok.status_code == 201, ok.text


def test_an_annotators_labels_that_break_the_rules_cannot_be_adopted(tmp_path):
    from framejudge.service.store import create_key

    with review_app(tmp_path) as env:
        client = env["client"]
        owner = create_key(env["engine"], ["calibrate", "review", "grade"], "lead")
        item = {"id": "refusal", "video": "c.mp4",
                "turns": [_turn("What number?", "3.", "I cannot answer that.", "It shows 3.")]}
        records = client.post("/v1/grade", json={"item": item}, headers=bearer(owner)).json()["records"]
        labels = [{"item_id": "refusal", "annotator": "h1", "category_a": "Missing", "category_b": "Successful"},
                  {"item_id": "refusal", "annotator": "h2", "category_a": "Error message", "category_b": "Successful"},
                  {"item_id": "refusal", "annotator": "h3", "category_a": "Error message", "category_b": "Successful",
                   "preference": "A"}]
        run = client.post("/v1/calibrate", json={"labels": labels, "verdicts": records, "items": [item],
                                                 "replicates": 20}, headers=bearer(owner)).json()["id"]
        version = unit_version(client, run, owner, "refusal")
        for source, rule in (("h1", "response A is the fixed error string 'I cannot answer that.', so its category "
                                    "must be Error message"),
                             ("h3", "a Successful response always wins, so the preference must be B")):
            got = client.post(f"/v1/calibrate/{run}/decisions", headers=bearer(owner),
                              json={"item_id": "refusal", "action": "adopt_annotator", "source": source,
                                    "unit_version": version})
            assert got.status_code == 422 and f"{source}'s labels break the rubric's rules" in got.json()["detail"]
            assert rule in got.json()["detail"], got.text
        assert client.post(f"/v1/calibrate/{run}/decisions", headers=bearer(owner),
                           json={"item_id": "refusal", "action": "adopt_annotator", "source": "h2",
                                 "unit_version": version}).status_code == 201


def test_blind_mode_says_nothing_of_the_judge_or_the_annotators(env):
    client = env["client"]
    sign_in(client, env["owner"])
    told = ("the judge disagrees with the human majority", "the annotators disagree")
    unit = client.get(f"/review/{env['id']}/unit", params={"item": "disputed", "blind": "1"}).text
    assert not any(t in unit for t in told) and 'id="reasons"' not in unit
    queue = client.get(f"/review/{env['id']}", params={"blind": "1"}).text.split('id="units"')[1]
    assert not any(t in queue for t in told) and "category_a" not in queue and "fields in dispute" not in queue
    seeing = client.get(f"/review/{env['id']}").text.split('id="units"')[1]
    assert told[0] in seeing and "fields in dispute" in seeing
    decide(client, env["id"], "disputed", action="manual", category_a="Successful", blind="1")
    revealed = client.get(f"/review/{env['id']}/unit", params={"item": "disputed", "blind": "1"}).text
    assert told[0] in revealed  # decided: nothing left to anchor
