"""One calibration behind the three doors: `framejudge calibrate`, `framejudge.calibrate()` and the
service's `POST /v1/calibrate` give the same result object, field by field, for the same labels,
verdicts, replicates and seed; and refuse labels that match no verdict in the same words."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from framejudge import calibrate, grade
from framejudge.calibration.audit import AuditResult
from framejudge.calibration.inputs import LabelsError
from framejudge.cli import app
from framejudge.service.app import create_app
from framejudge.service.settings import Settings
from framejudge.service.store import create_key, engine_for
from tests.test_python_api import ITEMS, _labels


@pytest.fixture()
def service(tmp_path):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", media_root=tmp_path)
    key = create_key(engine_for(settings.database_url), ["calibrate"])
    with TestClient(create_app(settings)) as client:
        yield client, {"Authorization": f"Bearer {key}"}


def test_the_three_doors_give_the_same_calibration(service, tmp_path):
    client, auth = service
    records = grade(ITEMS, options={"cache": False})
    labels = _labels()
    by_python = calibrate(labels, records, replicates=60, seed=7)
    assert by_python.reliability is not None  # the verdicts carry confidence: there is a reliability to show
    r = client.post("/v1/calibrate", json={"labels": labels, "verdicts": [x.model_dump(mode="json") for x in records],
                                           "replicates": 60, "seed": 7}, headers=auth)
    assert r.status_code == 200, r.text
    by_service = AuditResult.model_validate(r.json()["result"])
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    (tmp_path / "verdicts.jsonl").write_text("".join(x.model_dump_json() + "\n" for x in records))
    res = CliRunner().invoke(app, ["calibrate", "--human", str(tmp_path / "labels.jsonl"), "--judge",
                                   str(tmp_path / "verdicts.jsonl"), "--replicates", "60", "--seed", "7",
                                   "--out", str(tmp_path / "result.json")])
    assert res.exit_code == 0, res.output
    by_cli = AuditResult.model_validate_json((tmp_path / "result.json").read_text())
    for name in AuditResult.model_fields:
        assert getattr(by_service, name) == getattr(by_python, name), name
        assert getattr(by_cli, name) == getattr(by_python, name), name


def test_labels_that_match_no_verdict_are_refused_in_the_same_words(service, tmp_path):
    client, auth = service
    records = grade(ITEMS[:1], options={"cache": False})
    labels = [{"item_id": "elsewhere", "turn": 0, "annotator": "ann1", "category_a": "Successful"}]
    with pytest.raises(LabelsError) as by_python:
        calibrate(labels, records, replicates=10)
    r = client.post("/v1/calibrate", json={"labels": labels, "verdicts": [x.model_dump(mode="json") for x in records],
                                           "replicates": 10}, headers=auth)
    assert r.status_code == 422 and r.json()["title"] == "Labels match no verdict", r.text
    words = ("none of the 1 labelled turn(s) has a verdict in the verdicts (the labels name items such as "
             "'elsewhere' turn 0): are these the labels of these verdicts?")
    assert str(by_python.value) == words and r.json()["detail"] == f"labels: {words}"
    (tmp_path / "labels.jsonl").write_text(json.dumps(labels[0]) + "\n")
    verdicts = tmp_path / "verdicts.jsonl"
    verdicts.write_text("".join(x.model_dump_json() + "\n" for x in records))
    res = CliRunner().invoke(app, ["calibrate", "--human", str(tmp_path / "labels.jsonl"), "--judge", str(verdicts)])
    assert res.exit_code == 2
    with pytest.raises(LabelsError) as from_file:
        calibrate(tmp_path / "labels.jsonl", verdicts, replicates=10)
    assert str(from_file.value) == words.replace("in the verdicts", f"in {verdicts}")
    assert f"error: {from_file.value}" in " ".join(res.output.split())
