"""Text files as spreadsheet programs write them: UTF-8 with a byte-order mark is read like UTF-8
everywhere (items, labels, predictions, rubrics, judges files; the API's items bodies), and a file
that is not UTF-8 is refused naming its line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from framejudge.calibration.inputs import LabelsError, load_human_labels
from framejudge.judge import ItemsError, load_items
from framejudge.rubrics import RubricError, load_rubric
from framejudge.rubrics.mcq import MCQScoreError, score_files
from framejudge.runner.judges import JudgesFileError, load_judges_file

ROOT = Path(__file__).parents[1]
EXAMPLES = ROOT / "examples" / "items.jsonl"
BOM = b"\xef\xbb\xbf"
LATIN1 = "Café".encode("latin-1")  # é is 0xe9: not UTF-8


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_items_with_a_bom_grade(tmp_path, bundled_examples):
    items = write(tmp_path / "items.jsonl", BOM + EXAMPLES.read_bytes())
    assert len(load_items(items)) == 12
    proc = subprocess.run([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out",
                           str(tmp_path / "v.jsonl"), "--media-root", str(bundled_examples.parent)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    summary = json.loads(proc.stdout)
    assert proc.returncode == 0 and summary["items"] == 12 and summary["errors"] == {}, proc.stderr


def test_labels_csv_and_jsonl_with_a_bom(tmp_path):
    csv = write(tmp_path / "labels.csv", BOM + b"item_id,annotator,category_a\nx,h1,Successful\n")
    [label] = load_human_labels(csv)
    assert label.item_id == "x" and label.metadata == {}  # the first column is item_id, not '\ufeffitem_id'
    jsonl = write(tmp_path / "labels.jsonl", BOM + b'{"item_id": "x", "annotator": "h1"}\n')
    assert load_human_labels(jsonl)[0].annotator == "h1"


def test_yaml_files_and_predictions_with_a_bom(tmp_path):
    rubric = write(tmp_path / "r.yaml", BOM + (ROOT / "framejudge/rubrics/builtin/mcq-letter.yaml").read_bytes())
    assert load_rubric(rubric).id == "mcq-letter"
    judges = write(tmp_path / "j.yaml", BOM + b"judges:\n  - spec: reference\n")
    assert [c.spec for c in load_judges_file(judges)] == ["reference"]
    pred = write(tmp_path / "p.jsonl", BOM + b'{"video_path": "a", "mcq_answer": "B"}\n')
    gold = write(tmp_path / "g.jsonl", BOM + b'{"video_path": "a", "mcq_answer": "B", "mcq_options": ["x", "y"]}\n')
    assert score_files(pred, gold, "video_path", "mcq_answer", "mcq_answer", "mcq_options").accuracy == 1.0


@pytest.mark.parametrize("bom", [b"", BOM])
def test_a_file_that_is_not_utf8_names_its_line(tmp_path, bom):
    good = json.dumps({"id": "a", "turns": [{"question": "q?", "response_a": "a"}]}).encode()
    bad = b'{"id": "' + LATIN1 + b'", "turns": [{"question": "q?", "response_a": "a"}]}'
    items = write(tmp_path / "items.jsonl", bom + good + b"\n" + good.replace(b'"a"', b'"b"', 1) + b"\n" + bad + b"\n")
    with pytest.raises(ItemsError, match=r"items.jsonl:3: not UTF-8 text \(byte 0xe9 at column 12\)"):
        load_items(items)
    cases = [(write(tmp_path / "l.csv", bom + b"item_id,annotator\n" + LATIN1 + b",h\n"), load_human_labels,
              LabelsError, "l.csv:2:"),
             (write(tmp_path / "r.yaml", bom + b"id: x\ntitle: " + LATIN1 + b"\n"), load_rubric, RubricError, "r.yaml:2:"),
             (write(tmp_path / "j.yaml", bom + b"judges:\n  - spec: reference\n# " + LATIN1 + b"\n"), load_judges_file,
              JudgesFileError, "j.yaml:3:")]
    for path, load, error, where in cases:
        with pytest.raises(error, match=f"{where} not UTF-8 text"):
            load(path)
    with pytest.raises(MCQScoreError, match="p.jsonl:1: not UTF-8 text"):
        score_files(write(tmp_path / "p.jsonl", LATIN1), write(tmp_path / "g.jsonl", b'{"id": "a", "b": "A", "c": ["x", "y"]}\n'), "id", "a", "b", "c")


@pytest.fixture()
def client(tmp_path):
    from framejudge.service.app import create_app
    from framejudge.service.settings import Settings
    from framejudge.service.store import create_key, engine_for

    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", run_worker=False)
    key = create_key(engine_for(settings.database_url), ["grade"])
    return TestClient(create_app(settings), raise_server_exceptions=False), {"Authorization": f"Bearer {key}"}


ITEM = json.dumps({"id": "x", "turns": [{"question": "q?", "response_a": "a"}]}).encode()


def test_api_items_bodies_with_a_bom_or_not_utf8(client):
    client, headers = client
    for body, kind in [(BOM + b"[" + ITEM + b"]", "application/json"), (BOM + ITEM + b"\n", "application/x-ndjson")]:
        r = client.post("/v1/jobs", content=body, headers={**headers, "Content-Type": kind})
        assert r.status_code == 202, r.text
    r = client.post("/v1/jobs", files={"items": (None, BOM + ITEM)}, headers=headers)
    assert r.status_code == 202, r.text
    latin = ITEM.replace(b'"x"', b'"' + LATIN1 + b'"')
    r = client.post("/v1/jobs", content=ITEM + b"\n" + latin + b"\n",
                    headers={**headers, "Content-Type": "application/x-ndjson"})
    assert r.status_code == 422 and r.json()["detail"].startswith("line 2: not UTF-8 text (byte 0xe9"), r.text
    r = client.post("/v1/jobs", files={"items": (None, latin)}, headers=headers)
    assert r.status_code == 400 and "form field 'items', line 1: not UTF-8 text" in r.json()["detail"], r.text
