"""Thresholds as a grading option of the API: job records and /v1/grade answers carry the marks,
and thresholds of another judge or rubric are refused before anything is queued."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from framejudge.calibration.triage import thresholds_hash
from framejudge.schema import Thresholds
from framejudge.service.app import create_app
from tests.service.test_jobs import auth, db, items, wait_done  # noqa: F401 - db is a fixture
from tests.test_cli_outputs import cli, refused
from tests.test_cli_triage import reference_thresholds


def test_a_job_with_thresholds_marks_every_verdict(db, tmp_path):
    settings, key, _, _ = db
    thresholds = reference_thresholds(tmp_path / "t.json")
    options = {"triage": thresholds.model_dump(mode="json")}
    with TestClient(create_app(settings())) as client:
        r = client.post("/v1/jobs", json={"items": items(6), "options": options}, headers=auth(key))
        assert r.status_code == 202, r.text
        assert Thresholds.model_validate(r.json()["options"]["triage"]) == thresholds
        wait_done(client, r.json()["id"], key)
        records = client.get(f"/v1/jobs/{r.json()['id']}/verdicts", headers=auth(key)).json()["records"]
        assert len(records) == 6
        for v in records:  # no confidence of the reference judge reaches 1.0: all to review
            assert v["triage"] == {"decision": "to_review", "below": ["category_a"],
                                   "thresholds": thresholds_hash(thresholds)}
            assert v["provenance"]["options"]["triage"] is None  # grading options, not the thresholds
        plain = client.post("/v1/jobs", json=items(2), headers=auth(key)).json()
        wait_done(client, plain["id"], key)
        unmarked = client.get(f"/v1/jobs/{plain['id']}/verdicts", headers=auth(key)).json()["records"]
        assert all(v["triage"] is None for v in unmarked)
        one = client.post("/v1/grade", json={"item": items(1)[0], "options": options}, headers=auth(key))
        assert one.status_code == 200, one.text
        assert one.json()["records"][0]["triage"]["decision"] == "to_review"


def test_thresholds_of_another_judge_or_rubric_are_refused(db, tmp_path):
    settings, key, _, _ = db
    other_model = reference_thresholds(tmp_path / "a.json", model_id="reference-0").model_dump(mode="json")
    other_rubric = {**reference_thresholds(tmp_path / "b.json").model_dump(mode="json"), "rubric_hash": "0" * 16}
    with TestClient(create_app(settings(run_worker=False))) as client:
        for bad, words in ((other_model, "calibrated for judge reference reference-0"), (other_rubric, "rubric")):
            r = client.post("/v1/jobs", json={"items": items(2), "options": {"triage": bad}}, headers=auth(key))
            assert r.status_code == 422 and words in r.json()["detail"], r.text
            assert r.json()["detail"].startswith("options.triage: ")
            g = client.post("/v1/grade", json={"item": items(1)[0], "options": {"triage": bad}}, headers=auth(key))
            assert g.status_code == 422 and words in g.json()["detail"], g.text
        r = client.post("/v1/jobs", json={"items": items(2), "options": {"triage": {"target": 2}}}, headers=auth(key))
        assert r.status_code == 422 and "triage.target" in r.json()["detail"], r.text


def test_the_default_thresholds_are_the_reference_judges_own(db):
    from framejudge.judge.rule_confidence import shipped_thresholds

    settings, key, _, _ = db
    shipped = shipped_thresholds()
    with TestClient(create_app(settings(judges=["reference", "litellm:openai/m"]))) as client:
        g = client.post("/v1/grade", json={"item": items(1)[0], "options": {"triage": "default"}}, headers=auth(key))
        assert g.status_code == 200, g.text
        [v] = g.json()["records"]
        assert v["confidence"]["informative"] and v["triage"]["thresholds"] == thresholds_hash(shipped)
        r = client.post("/v1/jobs", json={"items": items(2), "options": {"triage": "default"}}, headers=auth(key))
        assert r.status_code == 202, r.text
        assert Thresholds.model_validate(r.json()["options"]["triage"]) == shipped
        for path, body, params in (("/v1/grade", {"item": items(1)[0], "judge": "litellm:openai/m"}, {}),
                                   ("/v1/jobs", {"items": items(2)}, {"judge": "litellm:openai/m"})):
            refused = client.post(path, json={**body, "options": {"triage": "default"}}, params=params,
                                  headers=auth(key))
            assert refused.status_code == 422, refused.text
            assert refused.json()["detail"].startswith("options.triage: the default thresholds were earned by the "
                                                       "reference judge")


def test_a_threshold_outside_0_to_1_is_refused_by_the_api_and_the_cli(db, bundled_examples, tmp_path):
    settings, key, _, _ = db
    good = reference_thresholds(tmp_path / "t.json").model_dump(mode="json")
    field = next(iter(good["fields"]))
    with TestClient(create_app(settings(run_worker=False))) as client:
        for value, why in ((-0.5, "greater than or equal to 0"), (1.5, "less than or equal to 1"),
                           ("0.5", "a valid number")):
            bad = {**good, "fields": {field: {**good["fields"][field], "threshold": value}}}
            for path, body, named in (("/v1/jobs", {"items": items(2)}, ""), ("/v1/grade", {"item": items(1)[0]},
                                                                                "options.")):
                r = client.post(path, json={**body, "options": {"triage": bad}}, headers=auth(key))
                assert r.status_code == 422, r.text
                assert r.json()["detail"].startswith(f"{named}triage.fields.{field}.threshold: Input should be "
                                                     f"{why}"), r.text
    for bad, said in (({**good, "fields": {field: {**good["fields"][field], "threshold": -0.5}}},
                       f"fields.{field}.threshold: Input should be greater than or equal to 0"),
                      (json.dumps(good)[:-1] + ', "seed": 1}', "key 'seed' given twice")):
        (tmp_path / "bad.json").write_text(bad if isinstance(bad, str) else json.dumps(bad))
        refused(cli("grade", bundled_examples, "--out", tmp_path / "v.jsonl", "--triage", tmp_path / "bad.json"),
                said)
        assert not (tmp_path / "v.jsonl").exists()
